package tui

import (
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

// A message refused by the server shows its ✗ at once where it was sent
// from, and the conversation it was for is marked unread.
func TestRefusedMessageShowsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.line("/msg ghost6 ping")
	h.want("→ ghost6 ping …", " 2:ghost6 ")
	h.event(client.ErrorMessage{ID: "id-1", Code: "UNKNOWN_USER", Message: `no user "ghost6"`})
	h.want(`→ ghost6 ping ✗ no user "ghost6"`, " 2:ghost6 (1)")
	h.wantNot("ping …")
	h.press('2', tea.ModAlt)
	h.want(`alice ping ✗ no user "ghost6"`)
	h.wantNot("(1)", "! not sent to ghost6") // one line says it, not two
	h.typeText("/msg gho")
	h.press(tea.KeyTab) // the ring said there is no ghost6: no completion
	if got := h.m.input.Value(); got != "/msg gho" {
		t.Errorf("Tab completed %q to %q", "/msg gho", got)
	}
}
