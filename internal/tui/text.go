package tui

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/ringchat/ringchat/internal/client"
)

// Clean makes text from the network safe to print on one terminal line:
// control characters (escape sequences, newlines), bidirectional overrides
// and line separators are shown escaped.
func Clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case isControl(r) && r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isControl reports control characters, bidirectional overrides and line
// separators: anything that could move the cursor or disguise text.
func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// MessageTime is when a chat message was accepted: its protocol-2 time,
// else its sentAt, else ok is false.
func MessageTime(m client.ChatMessage) (t time.Time, ok bool) {
	if m.Stamp != "" {
		if t, err := time.Parse(time.RFC3339Nano, m.Stamp); err == nil {
			return t, true
		}
	}
	if t, err := m.Time(); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// Conversation is the conversation a chat message belongs to, seen by me:
// its group, or the other user (me for a message to myself).
func Conversation(m client.ChatMessage, me string) client.Recipient {
	switch {
	case m.To.Group:
		return m.To
	case m.From == me:
		return client.ToUser(m.To.Name)
	default:
		return client.ToUser(m.From)
	}
}

// Plural is "1 message", "2 messages".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
