package tui

import (
	"fmt"
	"slices"
	"strings"
)

// search is a search of the current conversation's lines.
type search struct {
	query string
	hits  []*entry // the matching lines, oldest first
	at    int      // the hit shown
}

// startSearch searches the current conversation for query (empty: ends
// the search) and shows its newest match.
func (m *Model) startSearch(query string) {
	m.search = nil
	if query == "" {
		m.refresh()
		return
	}
	s := &search{query: query}
	for _, e := range m.convs[m.cur].entries {
		if e.kind != kindInfo && e.kind != kindError && containsFold(e.text, query) {
			s.hits = append(s.hits, e)
		}
	}
	if len(s.hits) == 0 {
		m.info("no line here matches %q", Clean(query))
		return
	}
	s.at = len(s.hits) - 1
	m.search = s
	m.showHit()
}

// searchEarlier shows the match before the one shown (from the oldest:
// the newest again).
func (m *Model) searchEarlier() {
	s := m.search
	if s == nil {
		if q := strings.TrimSpace(m.input.Value()); q != "" {
			m.input.Reset()
			m.startSearch(q)
		} else {
			m.info("type what to find, then Ctrl-R (or /search TEXT)")
		}
		return
	}
	s.at = (s.at - 1 + len(s.hits)) % len(s.hits)
	m.showHit()
}

// showHit scrolls the pane to the match shown, in its middle (lines
// may have been added before it, or dropped, since the search began).
func (m *Model) showHit() {
	m.refresh()
	i := slices.Index(m.convs[m.cur].entries, m.search.hits[m.search.at])
	if i < 0 { // dropped from the scrollback
		return
	}
	m.pane.SetYOffset(max(m.lineOf[i]-m.pane.Height()/2, 0))
}

// endSearch ends a search; false if there was none.
func (m *Model) endSearch() bool {
	if m.search == nil {
		return false
	}
	m.search = nil
	m.refresh()
	return true
}

// searchStatus is the status bar's note on the search.
func (m *Model) searchStatus() string {
	s := m.search
	if s == nil {
		return ""
	}
	return fmt.Sprintf(" │ found %q %d/%d (Ctrl-R: earlier)", Clean(s.query), s.at+1, len(s.hits))
}

// isHit reports whether e is a match of the search under way.
func (m *Model) isHit(e *entry) bool {
	return m.search != nil && e.kind != kindInfo && e.kind != kindError && containsFold(e.text, m.search.query)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
