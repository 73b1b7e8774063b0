package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

func TestMentions(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.event(chat("m1", "carol", client.ToGroup("ops"), "deploying now", now))
	h.want(" 3:#ops (1)")
	if len(h.raw) != 0 {
		t.Fatalf("the bell rang for a line not naming me: %q", h.raw)
	}
	h.event(chat("m2", "carol", client.ToGroup("ops"), "@Alice: can you check?", now))
	h.want(" 3:#ops (2@)")
	if len(h.raw) != 1 || h.raw[0] != "\a" {
		t.Fatalf("bell %q, want one", h.raw)
	}
	// A name inside another word is no mention; my own lines are none.
	for _, text := range []string{"malice aforethought", "alice_bot is down", "alice-2 joined"} {
		h.event(chat("x"+text, "carol", client.ToUser("alice"), text, now))
	}
	h.line("alice, remember the milk")
	if len(h.raw) != 1 {
		t.Fatalf("bell %q, want still one", h.raw)
	}
	h.press('3', tea.ModAlt)
	h.wantNot("(2@)")
	content := h.m.View().Content
	if !strings.Contains(content, h.m.st.mention.Render("@Alice: can you check?")) {
		t.Errorf("the line naming me is not highlighted:\n%q", content)
	}
	if strings.Contains(content, h.m.st.mention.Render("deploying now")) {
		t.Error("a line not naming me is highlighted")
	}
	// In the current tab: highlighted and rung, no mark.
	h.event(chat("m3", "bob", client.ToGroup("ops"), "thanks alice", now))
	h.wantNot("@)")
	if len(h.raw) != 2 {
		t.Fatalf("bell %q, want two", h.raw)
	}
}

func TestMentionWithoutBell(t *testing.T) {
	b := &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{}}
	h := &harness{t: t, b: b, m: New(Config{Backend: b, NoBell: true, Now: func() time.Time { return now }})}
	h.event(chat("m1", "carol", client.ToGroup("ops"), "alice?", now))
	h.want("2:#ops (1@)")
	if len(h.raw) != 0 {
		t.Fatalf("bell %q with NoBell", h.raw)
	}
}
