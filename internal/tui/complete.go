package tui

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// completion is Tab completion in progress: each Tab puts the next
// candidate in place of the word being completed.
type completion struct {
	before, after string   // the line before the word and after the cursor
	cands         []string // replacements for the word, suffix included
	i             int
}

// commandNames are the commands of the help texts, for completion.
var commandNames = func() []string {
	var names []string
	for _, w := range regexp.MustCompile(`(^|[\s;(])(/[a-z]+)`).FindAllStringSubmatch(HelpText+UIHelpText, -1) {
		if !slices.Contains(names, w[2]) {
			names = append(names, w[2])
		}
	}
	slices.Sort(names)
	return names
}()

// Commands whose first argument is a group, or a user or #group.
var (
	groupArgs     = []string{"/join", "/leave", "/part", "/g", "/private"}
	recipientArgs = []string{"/msg", "/to", "/query", "/history", "/invite"}
)

// complete completes the word before the cursor (Tab: step 1), or puts
// the next (previous: step -1) candidate in its place. It reports whether
// there was a candidate.
func (m *Model) complete(step int) bool {
	if m.pwPrompt {
		return true
	}
	c := m.comp
	if c == nil {
		if c = m.startCompletion(); c == nil {
			return false
		}
		if step < 0 {
			c.i = len(c.cands) - 1
		}
		m.comp = c
	} else {
		c.i = (c.i + step + len(c.cands)) % len(c.cands)
	}
	word := c.before + c.cands[c.i]
	m.input.SetValue(word + c.after)
	m.input.SetCursor(len([]rune(word)))
	return true
}

// startCompletion finds the candidates for the word before the cursor;
// nil when there are none.
func (m *Model) startCompletion() *completion {
	runes, pos := []rune(m.input.Value()), m.input.Position()
	start := pos
	for start > 0 && !unicode.IsSpace(runes[start-1]) {
		start--
	}
	c := &completion{before: string(runes[:start]), after: string(runes[pos:])}
	c.cands = m.candidates(c.before, string(runes[start:pos]))
	if len(c.cands) == 0 {
		return nil
	}
	return c
}

// candidates are the completions of word after before: a command at the
// start of a line, a group after the commands that take one or for
// "#...", else a user (at the start of a line followed by ": ").
func (m *Model) candidates(before, word string) []string {
	fields := strings.Fields(before)
	pool, suffix := m.userNames(), " "
	switch {
	case len(fields) == 0 && strings.HasPrefix(word, "/"):
		pool = commandNames
	case strings.HasPrefix(word, "#"):
		pool = prefixed("#", m.groupNames())
	case len(fields) == 1 && slices.Contains(groupArgs, strings.ToLower(fields[0])):
		pool = m.groupNames()
	case len(fields) == 1 && slices.Contains(recipientArgs, strings.ToLower(fields[0])):
		pool = append(pool, prefixed("#", m.groupNames())...)
	case len(fields) == 0:
		suffix = ": "
	}
	var out []string
	for _, p := range pool {
		if len(p) > len(word) && strings.HasPrefix(strings.ToLower(p), strings.ToLower(word)) {
			out = append(out, p+suffix)
		}
	}
	return out
}

// userNames are the users this client has seen (senders, /who, tabs),
// those who wrote in the current tab first, the latest writer first.
func (m *Model) userNames() []string {
	var names []string
	entries := m.convs[m.cur].entries
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.kind == kindChat && e.from != m.me && !slices.Contains(names, e.from) {
			names = append(names, e.from)
		}
	}
	var others []string
	for u := range m.users {
		if u != m.me && !slices.Contains(names, u) {
			others = append(others, u)
		}
	}
	slices.Sort(others)
	return append(names, others...)
}

// groupNames are the groups this client knows of, sorted.
func (m *Model) groupNames() []string {
	var names []string
	for g := range m.knownGroups {
		names = append(names, g)
	}
	slices.Sort(names)
	return names
}

// seeUser and seeGroup remember names for completion.
func (m *Model) seeUser(name string) {
	if name != "" {
		m.users[name] = true
	}
}

func (m *Model) seeGroup(name string) {
	if name != "" {
		m.knownGroups[name] = true
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}
