package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// A message longer than the node takes is refused whole, in one line,
// before it is sent, and stays in the input line; a paste of 20 lines
// (a terminal's, with CRs) is one message of 20 lines, shown as lines.
func TestMessagesKeepTheirText(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	long := strings.Repeat("x", 4510)
	h.update(tea.PasteMsg{Content: long})
	if got := h.m.input.Value(); got != long {
		t.Fatalf("the input line holds %d characters of the 4510 pasted", len(got))
	}
	h.press(tea.KeyEnter)
	if len(h.b.posts) != 0 {
		t.Fatalf("posted %d bytes", len(h.b.posts[0].Text))
	}
	h.want("! not sent: the message is 4,510 bytes, over the limit of 4,096 bytes per message (it stays in")
	if h.m.input.Value() != long {
		t.Fatal("the refused message is not in the input line any more")
	}
	if n := strings.Count(h.screen(), "not sent"); n != 1 {
		t.Errorf("%d lines say it is not sent, want 1", n)
	}

	h.m.input.Reset()
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf("line %d of the paste", i+1))
	}
	h.update(tea.PasteMsg{Content: strings.Join(lines, "\r") + "\r"})
	h.press(tea.KeyEnter)
	if len(h.b.posts) != 1 || h.b.posts[0].Text != strings.Join(lines, "\n") {
		t.Fatalf("posts %q, want one message of the 20 lines", h.b.posts)
	}
	h.update(tea.WindowSizeMsg{Width: 100, Height: 30})
	screen := h.lines()
	first := slices.IndexFunc(screen, func(l string) bool { return strings.Contains(l, "alice line 1 of the paste") })
	if first < 0 || !strings.HasPrefix(strings.TrimSpace(screen[first+19]), "line 20 of the paste …") {
		t.Fatalf("the 20 lines are not shown as 20 lines:\n%s", h.screen())
	}

	// A node's own limit; Alt+Enter types a line break; an incoming
	// message of several lines shows as lines, still made safe.
	h.m.cfg.MaxMessageBytes = 10
	h.typeText("two")
	h.press(tea.KeyEnter, tea.ModAlt)
	h.typeText("lines")
	h.press(tea.KeyEnter)
	if len(h.b.posts) != 2 || h.b.posts[1].Text != "two\nlines" {
		t.Fatalf("posts %q", h.b.posts)
	}
	h.typeText("eleven byte")
	h.press(tea.KeyEnter)
	h.want("the message is 11 bytes, over the limit of 10 bytes per message")
	h.m.input.Reset()
	h.event(chat("m1", "bob", client.ToUser("alice"), "first\nsecond \x1b[2J", now))
	h.want("10:20 bob first  ", "\n          second \\x1b[2J")
}

// ✓✓ only for what was on screen: not while the pane is scrolled up
// from a new message, nor while the window has not the focus.
func TestReadMarkOnlyWhenShown(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	in := func(seq int64) {
		m := chat(fmt.Sprint("b", seq), "bob", client.ToUser("alice"), fmt.Sprint("message ", seq), now)
		m.Seq = seq
		h.event(m)
	}
	for seq := int64(1); seq <= 30; seq++ {
		in(seq)
	}
	if last := h.b.reads[len(h.b.reads)-1]; last != "bob 30" {
		t.Fatalf("READs %q, want up to bob 30", h.b.reads)
	}
	h.press(tea.KeyPgUp)
	in(31)
	h.want("↓ 1 new (Esc)")
	if last := h.b.reads[len(h.b.reads)-1]; last != "bob 30" {
		t.Fatalf("READ %q while scrolled up: message 31 is not on screen", last)
	}
	h.press(tea.KeyEscape)
	h.want("message 31")
	if last := h.b.reads[len(h.b.reads)-1]; last != "bob 31" {
		t.Fatalf("READs %q, want bob 31 once it shows", h.b.reads)
	}

	h.update(tea.BlurMsg{})
	in(32)
	if last := h.b.reads[len(h.b.reads)-1]; last != "bob 31" {
		t.Fatalf("READ %q while the window is in the background", last)
	}
	h.update(tea.FocusMsg{})
	if last := h.b.reads[len(h.b.reads)-1]; last != "bob 32" {
		t.Fatalf("READs %q, want bob 32 once the window is in front", h.b.reads)
	}
	if !h.m.View().ReportFocus {
		t.Error("the terminal is not asked to report the focus")
	}
}

// /history of a group that does not exist says so in one line and opens
// no tab, now or at the next start; the name is no Tab choice.
func TestHistoryOfNothingOpensNoTab(t *testing.T) {
	state := StateFile(filepath.Join(t.TempDir(), "state"), "alice")
	h := newHarnessWith(t, nil, Config{StateFile: state})
	h.b.fail["history"] = &client.ServerError{Code: protocol.CodeUnknownGroup, Message: `no group "nosuch"`}
	h.line("/history #nosuch")
	h.want(`! no group "nosuch"`)
	h.wantNot("2:#nosuch", "#nosuch ›")
	if b, _ := os.ReadFile(state); strings.Contains(string(b), "nosuch") {
		t.Errorf("state file %q keeps it", b)
	}
	h.typeText("/to #nos")
	h.press(tea.KeyTab)
	if got := h.m.input.Value(); got != "/to #nos" {
		t.Errorf("Tab completed it: %q", got)
	}
}

// Tab completes the name of a user online without /who first; unread
// counts come back at the next start; /invite tells the user invited.
func TestSmallThings(t *testing.T) {
	state := StateFile(filepath.Join(t.TempDir(), "state"), "alice")
	b := &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{},
		who: []protocol.OnlineUser{{Username: "alice", Node: 1}, {Username: "bobby", Node: 2}}}
	h := newHarnessWith(t, b, Config{StateFile: state})
	h.typeText("/to bo")
	h.press(tea.KeyTab)
	if got := h.m.input.Value(); got != "/to bobby " {
		t.Errorf("Tab after /to bo: %q, want /to bobby", got)
	}
	h.m.input.Reset()

	h.line("/to bobby")
	h.event(chat("c1", "carol", client.ToUser("alice"), "one", now))
	h.event(chat("c2", "carol", client.ToUser("alice"), "two", now))
	h.want(" 3:carol (2)")
	h2 := newHarnessWith(t, nil, Config{StateFile: state})
	h2.want(" 2:bobby  3:carol (2)")
	h2.press('3', tea.ModAlt)
	h2.wantNot("(2)")

	h.line("/invite carol #ops")
	h.press('4', tea.ModAlt)
	h.want("invited carol to #ops: they can /join ops now; carol is told in a direct message")
	if p := h.b.posts[len(h.b.posts)-1]; p.To != client.ToUser("carol") || p.Text != "/me invited you to #ops: /join ops" {
		t.Errorf("carol was told %+v", p)
	}
}
