package tui

import (
	"regexp"

	tea "charm.land/bubbletea/v2"
)

// mentionPattern matches a text naming user: the name as a word of its
// own, in any case, with or without a leading @.
func mentionPattern(user string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[^\pL\pN_-])` + regexp.QuoteMeta(user) + `($|[^\pL\pN_-])`)
}

// isMention reports whether e is someone else's message naming me.
func (m *Model) isMention(e *entry) bool {
	return e.kind == kindChat && e.from != m.me && m.mention.MatchString(e.text)
}

// noticeMention marks c's tab when a live message names me, and asks for
// the bell.
func (m *Model) noticeMention(c *conversation, e *entry) {
	if !m.isMention(e) {
		return
	}
	if key(c.to) != m.cur {
		c.mentioned = true
	}
	if !m.cfg.NoBell {
		m.bell = true
	}
}

// takeBell is the command ringing the terminal's bell if a mention asked
// for it since the last call.
func (m *Model) takeBell() tea.Cmd {
	if !m.bell {
		return nil
	}
	m.bell = false
	return tea.Raw("\a")
}
