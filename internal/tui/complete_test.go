package tui

import (
	"slices"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

func (h *harness) wantInput(want string) {
	h.t.Helper()
	if got := h.m.input.Value(); got != want {
		h.t.Fatalf("input %q, want %q", got, want)
	}
}

func TestTabCompletion(t *testing.T) {
	h := newHarness(t) // knows #ops and #random from the start
	h.typeText("/jo")
	h.press(tea.KeyTab)
	h.wantInput("/join ")
	h.typeText("r")
	h.press(tea.KeyTab)
	h.wantInput("/join random ")
	h.press(tea.KeyEnter)

	h.b.who = []protocol.OnlineUser{{Username: "alice"}, {Username: "bob"}, {Username: "carol"}, {Username: "chris"}}
	h.line("/who")
	h.event(chat("m1", "chris", client.ToGroup("random"), "hello", now))
	// A user at the start of a line, the latest writer of the tab first;
	// Tab again goes on to the next, Shift+Tab back.
	h.typeText("c")
	h.press(tea.KeyTab)
	h.wantInput("chris: ")
	h.press(tea.KeyTab)
	h.wantInput("carol: ")
	h.press(tea.KeyTab, tea.ModShift)
	h.wantInput("chris: ")
	h.typeText("ask ")
	h.typeText("B")
	h.press(tea.KeyTab)
	h.wantInput("chris: ask bob ")
	h.press(tea.KeyEnter)

	// Before the cursor only; the rest of the line stays.
	h.typeText("/msg  hi")
	for range 3 {
		h.press(tea.KeyLeft)
	}
	h.typeText("#o")
	h.press(tea.KeyTab)
	h.wantInput("/msg #ops  hi")
	h.press(tea.KeyEnter)

	// Nothing to complete: the line stays; I am no candidate.
	h.typeText("/msg ali")
	h.press(tea.KeyTab)
	h.wantInput("/msg ali")
	h.press(tea.KeyEnter)
	h.typeText("zz")
	h.press(tea.KeyTab)
	h.wantInput("zz")
}

func TestCommandNames(t *testing.T) {
	for _, c := range []string{"/msg", "/g", "/join", "/invite", "/passwd", "/me", "/close", "/search", "/quit"} {
		if !slices.Contains(commandNames, c) {
			t.Errorf("%s is not completed (%q)", c, commandNames)
		}
	}
	for _, c := range commandNames {
		if _, err := ParseUI(c + " x y"); err != nil && err.Error() == `unknown command "`+c+`" (try /help)` {
			t.Errorf("%s completed but unknown", c)
		}
	}
}
