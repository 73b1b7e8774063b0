package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/ringchat/ringchat/internal/client"
)

// newHarnessWith is a harness whose model has cfg (its Backend and clock
// are the test's).
func newHarnessWith(t *testing.T, b *fake, cfg Config) *harness {
	if b == nil {
		b = &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{}}
	}
	cfg.Backend, cfg.Now, cfg.Location = b, func() time.Time { return now }, time.UTC
	h := &harness{t: t, b: b, m: New(cfg)}
	h.m.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	h.run(h.m.Init())
	h.update(tea.WindowSizeMsg{Width: 100, Height: 16})
	return h
}

func TestConversationsRestored(t *testing.T) {
	state := StateFile(filepath.Join(t.TempDir(), "state"), "alice")
	h := newHarnessWith(t, nil, Config{StateFile: state})
	h.line("/to bob")
	h.line("/to carol")
	h.line("/join ops")
	h.line("/to carol")
	h.line("/close")
	if b, err := os.ReadFile(state); err != nil || string(b) != `{"open":["bob","#ops"],"current":"bob"}`+"\n" {
		t.Fatalf("state file %q, %v", b, err)
	}
	h.press('3', tea.ModAlt)
	if b, _ := os.ReadFile(state); string(b) != `{"open":["bob","#ops"],"current":"#ops"}`+"\n" {
		t.Fatalf("state file after switching: %q", b)
	}

	// The next run opens them again with their last messages.
	b := &fake{user: "alice", fail: map[string]error{}, history: map[string][]client.ChatMessage{
		"bob":  {chat("b1", "bob", client.ToUser("alice"), "see you tomorrow", now.Add(-time.Hour))},
		"#ops": {chat("o1", "carol", client.ToGroup("ops"), "all green", now.Add(-2*time.Hour))},
	}}
	h2 := newHarnessWith(t, b, Config{StateFile: state})
	h2.want(" 1:ringchat  2:bob  3:#ops ", "#ops › ", "08:20 carol all green")
	h2.press('2', tea.ModAlt)
	h2.want("09:20 bob see you tomorrow")
}

func TestBadStateFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), "alice.json")
	if err := os.WriteFile(state, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, Config{StateFile: state})
	h.update(tea.WindowSizeMsg{Width: 250, Height: 16}) // the path on one line
	h.want("! conversations not restored: " + state + ": invalid character")
	h.line("/to bob") // the next change writes a good file
	if b, _ := os.ReadFile(state); string(b) != `{"open":["bob"],"current":"bob"}`+"\n" {
		t.Fatalf("state file %q", b)
	}
	if err := os.WriteFile(state, []byte(`{"open":["bob","","#","a b"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := newHarnessWith(t, nil, Config{StateFile: state})
	h2.want(" 1:ringchat  2:bob ")
	h2.wantNot("3:")
}

func TestStateFileName(t *testing.T) {
	if got := StateFile("/s", "../../x"); got != "/s/%2E.%2F..%2Fx.json" {
		t.Errorf("StateFile = %q", got)
	}
}

func TestPageUpLoadsOlder(t *testing.T) {
	h := newHarness(t)
	for i := range 120 {
		h.b.history["bob"] = append(h.b.history["bob"], chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), fmt.Sprint("msg ", i), now))
	}
	h.line("/to bob")
	h.want("msg 119")
	h.press(tea.KeyPgUp)
	h.want("── 20 earlier messages ──", "msg 100")
	top := h.lines()[2]  // under the rule
	h.press(tea.KeyPgUp) // at the top: 50 older messages, the view stays
	if h.lines()[2] != top {
		t.Fatalf("the view moved: %q, was %q\n%s", h.lines()[2], top, h.screen())
	}
	h.press(tea.KeyPgUp)
	h.want("msg 90")
	h.wantNot("── 20 earlier")
	for range 20 {
		h.press(tea.KeyPgUp)
	}
	h.want("── older messages: the server gives the last 100, /history shows them ──", "msg 20")
	h.wantNot("msg 19\n")
	h.press(tea.KeyEscape)
	h.want("msg 119")
}

func TestPageUpAtTheStart(t *testing.T) {
	h := newHarness(t)
	for i := range 25 {
		h.b.history["bob"] = append(h.b.history["bob"], chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), fmt.Sprint("msg ", i), now))
	}
	h.line("/to bob")
	for range 4 {
		h.press(tea.KeyPgUp)
	}
	// One rule above the earlier messages, however many pages came.
	h.want("── no older messages with bob ──", "── 25 earlier messages ──", "msg 0")
	h.wantNot("── 5 earlier", "── 20 earlier")
	calls := h.b.historyCalls
	h.press(tea.KeyPgUp) // nothing more is asked for
	if h.b.historyCalls != calls {
		t.Fatal("asked again")
	}
}

func TestColors(t *testing.T) {
	h := newHarnessWith(t, nil, Config{Colors: Colors{Me: "#ff0000", Senders: []string{"#00ff00"}}})
	h.line("/to bob")
	h.line("hi")
	h.event(chat("m1", "bob", client.ToUser("alice"), "hello", now))
	content := h.m.View().Content
	for _, want := range []string{
		lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("#ff0000")).Render("alice"),
		lipgloss.NewStyle().Foreground(lipgloss.Color("#00ff00")).Render("bob"),
	} {
		if !strings.Contains(content, want) {
			t.Errorf("screen lacks %q:\n%q", want, content)
		}
	}
}
