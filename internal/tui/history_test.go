package tui

import (
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
)

// /history in a conversation that shows every message of it already
// lists them, rather than saying there are none.
func TestHistoryOfShownMessages(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.event(chat("m1", "bob", client.ToUser("alice"), "hi alice", now.Add(-2*time.Minute)))
	h.line("hi bob")
	h.b.history["bob"] = []client.ChatMessage{
		chat("m1", "bob", client.ToUser("alice"), "hi alice", now.Add(-2*time.Minute)),
		chat("id-1", "alice", client.ToUser("bob"), "hi bob", now),
	}
	h.line("/history bob 5")
	h.wantNot("no earlier messages")
	h.want("── the last 2 messages with bob ──", "10:18 bob hi alice", "10:20 alice hi bob")
	h.b.history["dave"] = nil
	h.line("/history dave")
	h.want("· no messages with dave")
}
