package tui

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

func TestWhoisNamesAway(t *testing.T) {
	h := newHarness(t)
	h.b.whois = map[string]client.Whois{"bob": {User: "bob", Online: true, Node: 2, Since: "2026-03-14T09:00:00Z",
		Away: "at lunch", AwaySince: "2026-03-14T10:05:00Z"}}
	h.line("/whois bob")
	h.want("bob: online at node 2 since Mar 14 09:00; away since Mar 14 10:05: at lunch")
	h.b.fail["whois"] = errors.New("whois ghost: no user \"ghost\"")
	h.line("/whois ghost")
	h.want(`! whois ghost: no user "ghost"`)

	h.line("/names") // the status buffer is no group
	h.want("! names of which group?")
	h.b.names = map[string][]protocol.Member{"ops": {{Username: "zed"}, {Username: "bob", Node: 2, Away: "at lunch"}, {Username: "alice", Node: 1}}}
	h.line("/join ops")
	h.line("/names")
	h.want("#ops, 3 members (2 online): alice (node 1), bob (node 2, away: at lunch), zed")

	h.line("/away in a meeting")
	h.want("you are marked away: in a meeting", " (away)")
	h.line("/away")
	h.want("you are back: no longer marked away")
	h.wantNot(" (away)")
	if !slices.Equal(h.b.away, []string{"in a meeting", ""}) {
		t.Errorf("AWAY requests %q", h.b.away)
	}

	// Someone I write to is away: said in our conversation.
	h.line("/to bob")
	h.event(client.Away{User: "bob", Message: "at lunch", Since: "2026-03-14T10:05:00Z"})
	h.want("bob is away (since 10:05): at lunch")
}

func TestAwayAtStart(t *testing.T) {
	b := &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{},
		whois: map[string]client.Whois{"alice": {User: "alice", Online: true, Node: 1, Away: "gone fishing"}}}
	h := newHarnessWith(t, b, Config{})
	h.want("you are marked away: gone fishing (/away alone: back)", " (away)")
}

func TestReadReceipts(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.line("hi bob")
	id := h.b.posts[0].ID
	h.event(client.Stored{ID: id, Seq: 7})
	h.want("hi bob ✓")
	h.wantNot("✓✓")
	h.event(client.ReadNotice{User: "carol", Seq: 7}) // another user's mark moves nothing here
	h.wantNot("✓✓")
	h.event(client.ReadNotice{User: "bob", Seq: 7})
	h.want("hi bob ✓✓")

	// What bob sends while his tab is on screen is read at once; in
	// another tab, when I go there.
	m := chat("b1", "bob", client.ToUser("alice"), "one", now)
	m.Seq = 9
	h.event(m)
	h.line("/to #ops")
	m = chat("b2", "bob", client.ToUser("alice"), "two", now)
	m.Seq = 11
	h.event(m)
	if !slices.Equal(h.b.reads, []string{"bob 9"}) {
		t.Fatalf("READs %q, want bob 9 only", h.b.reads)
	}
	h.press('n', tea.ModCtrl) // back to bob's tab (the order: ringchat, bob, #ops)
	h.press('n', tea.ModCtrl)
	h.want("two")
	if !slices.Equal(h.b.reads, []string{"bob 9", "bob 11"}) {
		t.Errorf("READs %q, want bob 11 after going to his tab", h.b.reads)
	}
}

func TestHistoryShowsReadMark(t *testing.T) {
	h := newHarness(t)
	mine := chat("a1", "alice", client.ToUser("bob"), "read one", now)
	mine.Seq = 3
	unread := chat("a2", "alice", client.ToUser("bob"), "not yet", now)
	unread.Seq = 5
	h.b.history["bob"] = []client.ChatMessage{mine, unread}
	h.b.readSeq = map[string]int64{"bob": 3}
	h.line("/to bob")
	h.want("read one ✓✓")
	h.wantNot("not yet ✓")
}

func TestTyping(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.typeText("hel")
	if !slices.Equal(h.b.typings, []string{"bob"}) {
		t.Errorf("TYPINGs %q: one for the first keys", h.b.typings)
	}
	h.m.input.Reset()
	h.typeText("/who") // a command is not a message being written
	if len(h.b.typings) != 1 {
		t.Errorf("TYPINGs %q after a command", h.b.typings)
	}
	h.m.input.Reset()

	// Sending the message ends my "is typing" at bob's: the next key
	// starts it again, within the 3 s.
	h.m.input.Reset()
	h.typeText("hello")
	h.press(tea.KeyEnter)
	h.typeText("a")
	if !slices.Equal(h.b.typings, []string{"bob", "bob"}) {
		t.Errorf("TYPINGs %q: again at the first key after a message", h.b.typings)
	}
	h.m.input.Reset()

	h.event(client.TypingNotice{User: "bob"})
	h.want("bob is typing…")
	m := chat("b1", "bob", client.ToUser("alice"), "here", now)
	h.event(m)
	h.wantNot("is typing")
	h.event(client.TypingNotice{User: "bob"})
	h.line("/to #ops") // shown in bob's tab only
	h.wantNot("is typing")
}

func TestNoReceipts(t *testing.T) {
	h := newHarnessWith(t, nil, Config{NoReceipts: true})
	h.line("/to bob")
	h.typeText("hello")
	m := chat("b1", "bob", client.ToUser("alice"), "hi", now)
	m.Seq = 4
	h.event(m)
	if len(h.b.typings) != 0 || len(h.b.reads) != 0 {
		t.Errorf("with NoReceipts: TYPING %q, READ %q", h.b.typings, h.b.reads)
	}
	h.event(client.TypingNotice{User: "bob"}) // theirs still show
	h.want("bob is typing…")
}

func TestPageUpPastTheLastHundred(t *testing.T) {
	h := newHarness(t)
	for i := range 250 {
		m := chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), fmt.Sprint("msg ", i), now.Add(-time.Hour))
		m.Seq = int64(i + 1)
		h.b.history["bob"] = append(h.b.history["bob"], m)
	}
	h.line("/to bob")
	h.want("msg 249")
	for range 60 {
		h.press(tea.KeyPgUp)
	}
	h.want("── no older messages with bob ──", "msg 0")
	h.wantNot("the server gives the last")
}
