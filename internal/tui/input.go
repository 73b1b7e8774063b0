package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

// LineBreak stands for a line break in the input line, which holds one
// line of text: a pasted line break shows as it (and Alt+Enter types one),
// and the message sent has a real line break in its place.
const LineBreak = "␤"

// pasteText is pasted text as the input line holds it: each line break
// (CR LF, CR or LF: terminals send a paste's with CR) a LineBreak, the
// last ones dropped.
func pasteText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimRight(s, "\n")
	return strings.ReplaceAll(s, "\n", LineBreak)
}

// messageText is the text of the input line as it is sent: a line break
// for each LineBreak.
func messageText(s string) string { return strings.ReplaceAll(s, LineBreak, "\n") }

// paste puts pasted text into the input line, its line breaks kept.
func (m *Model) paste(msg tea.PasteMsg) tea.Cmd {
	m.comp = nil
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(tea.PasteMsg{Content: pasteText(msg.Content)})
	return tea.Batch(cmd, m.sendTyping())
}

// maxMessage is the largest message the node takes: Config's, else the
// Backend's (a *client.Session knows its node's), else the protocol's.
func (m *Model) maxMessage() int {
	if m.cfg.MaxMessageBytes > 0 {
		return m.cfg.MaxMessageBytes
	}
	if b, ok := m.cfg.Backend.(interface{ MaxMessageBytes() int }); ok && b.MaxMessageBytes() > 0 {
		return b.MaxMessageBytes()
	}
	return client.DefaultMaxMessageBytes
}

// tooLong refuses text longer than the node takes, in one line, before
// anything is sent: the input line keeps it (keepLine) for the user to
// shorten.
func (m *Model) tooLong(text string) bool {
	limit := m.maxMessage()
	if len(text) <= limit {
		return false
	}
	m.keepLine = true
	m.errorf("not sent: the message is %s bytes, over the limit of %s bytes per message (it stays in the input line: shorten it or send it in parts)",
		thousands(len(text)), thousands(limit))
	return true
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
