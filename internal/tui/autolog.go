package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ringchat/ringchat/internal/client"
)

// autolog appends each conversation's messages to a plain-text file of
// its own, as irssi's autolog does: one line per message,
// "2006-01-02 15:04:05 <bob> text" ("* bob waves" for an action).
type autolog struct {
	dir string
	loc *time.Location
}

// write appends one message of the conversation with conv.
func (a *autolog) write(conv client.Recipient, at time.Time, from, text string) error {
	line := "<" + Clean(from) + "> " + Clean(text)
	if act, ok := actionOf(text); ok {
		line = "* " + Clean(from) + " " + Clean(act)
	}
	f, err := os.OpenFile(filepath.Join(a.dir, LogFileName(conv)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", at.In(a.loc).Format(time.DateTime), line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// LogFileName is the name of a conversation's log file: "bob.log",
// "#ops.log" (see SafeFileName).
func LogFileName(conv client.Recipient) string {
	return SafeFileName(key(conv)) + ".log"
}

// SafeFileName is name as a file name: bytes other than letters, digits
// and "#+-.=@_" are written %XX, and so is a leading dot, so that no name
// can leave its directory or hide its file ("../../x" is "%2E.%2F..%2Fx").
func SafeFileName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, w := utf8.DecodeRuneInString(name[i:])
		if keepInFileName(r, i == 0) {
			b.WriteString(name[i : i+w])
		} else {
			for _, c := range []byte(name[i : i+w]) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		i += w
	}
	return b.String()
}

func keepInFileName(r rune, first bool) bool {
	switch {
	case r == utf8.RuneError, first && r == '.':
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("#+-.=@_", r)
}

// logMessage appends a message to its conversation's log, if logging;
// the first failure is shown and stops logging.
func (m *Model) logMessage(conv client.Recipient, at time.Time, from, text string) {
	if m.log == nil {
		return
	}
	if err := m.log.write(conv, at, from, text); err != nil {
		m.log = nil
		m.errorf("logging stopped: %s", errText(err))
	}
}
