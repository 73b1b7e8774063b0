package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

func TestSearch(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	for i := range 40 {
		text := fmt.Sprint("line ", i)
		if i == 3 || i == 20 {
			text = fmt.Sprintf("line %d: the Deploy is done", i)
		}
		h.event(chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), text, now))
	}
	h.wantNot("line 20")
	h.line("/search deploy")
	h.want("line 20: the Deploy is done", `found "deploy" 2/2 (Ctrl-R: earlier)`)
	h.wantNot("line 39", "line 3:")
	if c := h.m.View().Content; !strings.Contains(c, h.m.st.found.Render("line 20: the Deploy is done")) {
		t.Errorf("the match is not highlighted:\n%q", c)
	}
	h.press('r', tea.ModCtrl)
	h.want("line 3: the Deploy is done", `found "deploy" 1/2`)
	h.press('r', tea.ModCtrl) // from the oldest round to the newest
	h.want("line 20: the Deploy", `found "deploy" 2/2`)
	h.press(tea.KeyEscape)
	h.wantNot(`found "deploy"`)

	// Ctrl-R searches for what the input line holds.
	h.typeText("line 39")
	h.press('r', tea.ModCtrl)
	h.want(`found "line 39" 1/1`, "line 39")
	h.wantInput("")
	h.line("/search") // ends it
	h.wantNot(`found "line 39"`)

	h.line("/search no such thing")
	h.want(`· no line here matches "no such thing"`)
	h.wantNot(`found "no such`)
	h.press('r', tea.ModCtrl)
	h.want("· type what to find, then Ctrl-R (or /search TEXT)")

	// Another tab ends the search.
	h.line("/search deploy")
	h.press('1', tea.ModAlt)
	h.wantNot(`found "deploy"`)
}

// Lines added before the matches, or dropped from the scrollback, while
// searching do not confuse it.
func TestSearchWhileLinesChange(t *testing.T) {
	h := newHarnessWith(t, nil, Config{MaxLines: 30})
	h.line("/to bob")
	for i := range 30 {
		h.event(chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), fmt.Sprint("line ", i), now))
	}
	h.line("/search line 1") // line 1, line 10..19
	h.want(`found "line 1" 11/11`, "line 19")
	for i := 30; i < 50; i++ { // line 1 and line 10..19 leave the scrollback
		h.event(chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), fmt.Sprint("line ", i), now))
	}
	for range 11 {
		h.press('r', tea.ModCtrl)
	}
	h.want(`found "line 1" 11/11`)
}
