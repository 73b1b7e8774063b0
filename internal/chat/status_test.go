package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/store"
)

// loginWith logs a raw protocol-2 connection in with features and returns
// the LOGIN answer.
func (c *raw) loginWith(user string, features ...string) map[string]any {
	c.t.Helper()
	fs := `[]`
	if len(features) > 0 {
		fs = `["` + strings.Join(features, `","`) + `"]`
	}
	c.send(fmt.Sprintf(`{"messageType":"LOGIN","username":%q,"version":2,"features":%s,"id":"l1"}`, user, fs))
	m := c.obj()
	if m["messageType"] != "LOGIN" || m["username"] != user {
		c.t.Fatalf("login answer %v", m)
	}
	return m
}

// until reads lines until one of messageType typ, and returns it and the
// types of those before it.
func (c *raw) until(typ string) (map[string]any, []string) {
	c.t.Helper()
	var before []string
	for {
		m := c.obj()
		if m["messageType"] == typ {
			return m, before
		}
		before = append(before, fmt.Sprint(m["messageType"]))
	}
}

// nextV2 sends a request and returns the next line as an object.
func (c *raw) ask(line string) map[string]any {
	c.t.Helper()
	c.send(line)
	return c.obj()
}

func TestAwayWhoisNames(t *testing.T) {
	r := newRing(t, 2, nil)
	alice, bob, carol := dialRaw(t, r.addr(1)), dialRaw(t, r.addr(2)), dialRaw(t, r.addr(2))
	alice.loginWith("alice", protocol.FeatureAway)
	bob.loginWith("bob")
	carol.loginWith("carol")
	for _, c := range []*raw{alice, bob, carol} {
		if m := c.ask(`{"messageType":"JOIN_GROUP","group":"lab","id":"j"}`); m["messageType"] != "JOIN_GROUP" {
			t.Fatalf("join: %v", m)
		}
	}

	// AWAY sets, with the time; WHO and WHOIS show it.
	m := bob.ask(`{"messageType":"AWAY","message":"at lunch","id":"a1"}`)
	if m["messageType"] != "AWAY" || m["message"] != "at lunch" || m["since"] == nil || m["id"] != "a1" || m["username"] != nil {
		t.Errorf("AWAY answer %v", m)
	}
	m = alice.ask(`{"messageType":"WHO","id":"w"}`)
	if got := fmt.Sprint(m["users"]); got != "[map[node:1 username:alice] map[away:at lunch node:2 username:bob] map[node:2 username:carol]]" {
		t.Errorf("WHO users = %s", got)
	}
	m = alice.ask(`{"messageType":"WHOIS","username":"bob","id":"i"}`)
	if m["messageType"] != "WHOIS" || m["online"] != true || m["node"] != float64(2) || m["since"] == nil ||
		m["away"] != "at lunch" || m["awaySince"] == nil || m["id"] != "i" {
		t.Errorf("WHOIS bob = %v", m)
	}
	alice.send(`{"messageType":"WHOIS","username":"ghost","id":"g"}`)
	alice.expectError(protocol.CodeUnknownUser, "ghost")

	// A direct message to an away user: its sender (who asked for the
	// feature) is told once, with the message; a sender who did not ask
	// is not.
	alice.send(chatTo("bob", "lunch?"))
	alice.send(chatTo("bob", "still?"))
	kinds := map[string]int{}
	for range 3 {
		m := alice.obj()
		kinds[fmt.Sprint(m["messageType"])]++
		if m["messageType"] == "AWAY" && (m["username"] != "bob" || m["message"] != "at lunch" || m["since"] == nil || m["id"] != nil) {
			t.Errorf("away notice %v", m)
		}
	}
	if kinds["STORED"] != 2 || kinds["AWAY"] != 1 {
		t.Errorf("two messages to an away user: %v, want 2 STORED and 1 AWAY", kinds)
	}
	if m := alice.ask(`{"messageType":"WHO","id":"w2"}`); m["messageType"] != "WHO" {
		t.Errorf("a second notice came for the same away status: %v", m)
	}
	carol.send(chatTo("bob", "hi"))
	if m := carol.obj(); m["messageType"] != "STORED" {
		t.Errorf("a sender without the feature got %v", m)
	}

	// NAMES: members in pages, each with where they are and their status.
	carol.nc.Close()
	eventually(t, "carol logged out", func() bool {
		m := alice.ask(`{"messageType":"WHOIS","username":"carol","id":"c"}`)
		return m["online"] == false && m["node"] == nil
	})
	m = alice.ask(`{"messageType":"NAMES","group":"lab","limit":2,"id":"n1"}`)
	if got := fmt.Sprint(m["members"]); got != "[map[node:1 username:alice] map[away:at lunch node:2 username:bob]]" || m["truncated"] != true || m["next"] == nil {
		t.Fatalf("NAMES page 1 = %v", m)
	}
	m = alice.ask(fmt.Sprintf(`{"messageType":"NAMES","group":"lab","after":%q,"id":"n2"}`, m["next"]))
	if got := fmt.Sprint(m["members"]); got != "[map[username:carol]]" || m["truncated"] != nil {
		t.Errorf("NAMES page 2 = %v", m)
	}
	alice.send(`{"messageType":"NAMES","group":"nope","id":"n3"}`)
	alice.expectError(protocol.CodeUnknownGroup, "nope")
	alice.send(`{"messageType":"NAMES","group":"lab","after":"x","id":"n4"}`)
	alice.expectError(protocol.CodeBadRequest, "after")
	bob.send(`{"messageType":"JOIN_GROUP","group":"club","inviteOnly":true,"id":"j"}`)
	bob.until("JOIN_GROUP") // after the deliveries of the messages above
	alice.send(`{"messageType":"NAMES","group":"club","id":"n5"}`)
	alice.expectError(protocol.CodeNotMember, "invite-only")

	// Refusals change nothing; a clear is an answer without a message.
	bob.send(fmt.Sprintf(`{"messageType":"AWAY","message":%q,"id":"a2"}`, strings.Repeat("x", 301)))
	bob.expectError(protocol.CodeTooLong, "away message")
	bob.send(`{"messageType":"AWAY","message":"a\nb","id":"a3"}`)
	bob.expectError(protocol.CodeBadRequest, "unprintable")
	// The status lasts across logins: the LOGIN answer carries it.
	bob.nc.Close()
	var again *raw
	eventually(t, "bob logs in again", func() bool {
		again = dialRaw(t, r.addr(1))
		again.send(`{"messageType":"LOGIN","username":"bob","version":2,"id":"l2"}`)
		m := again.obj()
		if m["messageType"] == "LOGIN" {
			if m["away"] != "at lunch" {
				t.Errorf("LOGIN answer of an away user = %v", m)
			}
			return true
		}
		again.nc.Close()
		return false
	})
	again.send(`{"messageType":"AWAY","id":"a4"}`)
	if m, _ := again.until("AWAY"); fmt.Sprint(m) != "map[id:a4 messageType:AWAY]" { // after the redeliveries
		t.Errorf("clearing: %v", m)
	}
	if m := alice.ask(`{"messageType":"WHOIS","username":"bob","id":"i2"}`); m["away"] != nil || m["node"] != float64(1) {
		t.Errorf("WHOIS after the clear = %v", m)
	}
}

func TestReadMarksAndTyping(t *testing.T) {
	r := newRing(t, 2, nil)
	alice, bob, carol := dialRaw(t, r.addr(1)), dialRaw(t, r.addr(2)), dialRaw(t, r.addr(1))
	alice.loginWith("alice", protocol.FeatureRead, protocol.FeatureTyping)
	bob.loginWith("bob", protocol.FeatureRead, protocol.FeatureTyping, "a-feature-from-the-future")
	carol.loginWith("carol")
	var seqs []float64
	for i := range 3 {
		alice.send(chatTo("bob", fmt.Sprint("m", i)))
		st, _ := alice.until("STORED")
		seqs = append(seqs, st["seq"].(float64))
		if m, _ := bob.until("CHAT_MESSAGE"); m["messageContent"] != fmt.Sprint("m", i) {
			t.Fatalf("bob got %v", m)
		}
	}

	// bob reads up to the second: alice (at another node) is told.
	bob.send(fmt.Sprintf(`{"messageType":"READ","toUsername":"alice","seq":%d}`, int64(seqs[1])))
	if m := alice.obj(); fmt.Sprint(m) != fmt.Sprintf("map[messageType:READ seq:%v username:bob]", seqs[1]) {
		t.Fatalf("alice got %v, want bob's READ", m)
	}
	// The same mark again, or an older one, tells nobody; typing does.
	bob.send(fmt.Sprintf(`{"messageType":"READ","toUsername":"alice","seq":%d}`, int64(seqs[0])))
	bob.send(`{"messageType":"TYPING","toUsername":"alice"}`)
	if m := alice.obj(); fmt.Sprint(m) != "map[messageType:TYPING username:bob]" {
		t.Fatalf("alice got %v, want bob's TYPING", m)
	}
	// HISTORY gives the mark to the one whose messages were read.
	m := alice.ask(`{"messageType":"HISTORY","toUsername":"bob","id":"h"}`)
	if m["readSeq"] != seqs[1] || len(m["messages"].([]any)) != 3 {
		t.Errorf("alice's HISTORY with bob: readSeq %v, %d messages", m["readSeq"], len(m["messages"].([]any)))
	}
	if m := bob.ask(`{"messageType":"HISTORY","toUsername":"alice","id":"h"}`); m["readSeq"] != nil {
		t.Errorf("bob's HISTORY: alice read nothing of his, readSeq %v", m["readSeq"])
	}
	// HISTORY before a sequence: the page before the oldest shown.
	m = alice.ask(fmt.Sprintf(`{"messageType":"HISTORY","toUsername":"bob","limit":1,"before":%d,"id":"h2"}`, int64(seqs[2])))
	if ms := m["messages"].([]any); len(ms) != 1 || ms[0].(map[string]any)["messageContent"] != "m1" {
		t.Errorf("HISTORY before m2, limit 1 = %v", ms)
	}

	// A session that did not ask for notices gets none.
	carol.send(chatTo("alice", "from carol"))
	carol.until("STORED")
	cm, _ := alice.until("CHAT_MESSAGE")
	alice.send(fmt.Sprintf(`{"messageType":"READ","toUsername":"carol","seq":%d}`, int64(cm["seq"].(float64))))
	alice.send(`{"messageType":"TYPING","toUsername":"carol"}`)
	r.rotations(3)
	if m := carol.ask(`{"messageType":"WHO","id":"w"}`); m["messageType"] != "WHO" {
		t.Errorf("carol, without the features, got %v", m)
	}

	// Refused: a group, no sequence, an unknown user, protocol 1.
	bob.send(`{"messageType":"READ","toGroup":"g","seq":1,"id":"r1"}`)
	bob.expectError(protocol.CodeBadRequest, "direct")
	bob.send(`{"messageType":"READ","toUsername":"alice","id":"r2"}`)
	bob.expectError(protocol.CodeBadRequest, "seq")
	bob.send(`{"messageType":"READ","toUsername":"ghost","seq":5,"id":"r3"}`)
	bob.expectError(protocol.CodeUnknownUser, "ghost")
	old := dialRaw(t, r.addr(2))
	old.login("old")
	old.send(`{"messageType":"TYPING","toUsername":"alice"}`)
	old.expectError("", "unknown messageType")
}

// TestClientStatus: the Go client's side of AWAY, WHOIS, NAMES, READ and
// TYPING, against the server.
func TestClientStatus(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	all := []string{protocol.FeatureAway, protocol.FeatureRead, protocol.FeatureTyping}
	alice := dialV2(t, r.addr(1), "alice", "", client.Options{AutoAck: true, Features: all})
	bob := dialV2(t, r.addr(2), "bob", "", client.Options{AutoAck: true, Features: all})
	if err := bob.Join(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	a, err := bob.SetAway(ctx, "in a meeting")
	if err != nil || a.Message != "in a meeting" || a.Since == "" || a.User != "" {
		t.Fatalf("SetAway = %+v, %v", a, err)
	}
	w, err := alice.Whois(ctx, "bob")
	if err != nil || !w.Online || w.Node != 2 || w.Away != "in a meeting" || w.Since == "" {
		t.Errorf("Whois = %+v, %v", w, err)
	}
	n, err := alice.Names(ctx, "lab", "", 0)
	if err != nil || fmt.Sprint(n.Members) != "[{bob 2 in a meeting}]" || n.Truncated {
		t.Errorf("Names = %+v, %v", n, err)
	}
	who, err := alice.Who(ctx)
	if err != nil || fmt.Sprint(who) != "[{alice 1} {bob 2 away: in a meeting}]" {
		t.Errorf("Who = %v, %v", who, err)
	}
	st, err := alice.SendWait(ctx, client.ToUser("bob"), "ping")
	if err != nil {
		t.Fatal(err)
	}
	got := func(c *client.Conn, want func(client.Event) bool) client.Event {
		t.Helper()
		for {
			select {
			case ev := <-c.Events():
				if want(ev) {
					return ev
				}
			case <-ctx.Done():
				t.Fatal("no such event")
			}
		}
	}
	if ev := got(alice, func(ev client.Event) bool { _, ok := ev.(client.Away); return ok }).(client.Away); ev.User != "bob" || ev.Message != "in a meeting" {
		t.Errorf("away notice %+v", ev)
	}
	got(bob, func(ev client.Event) bool { m, ok := ev.(client.ChatMessage); return ok && m.Content == "ping" })
	if err := bob.Typing(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if ev := got(alice, func(ev client.Event) bool { _, ok := ev.(client.TypingNotice); return ok }).(client.TypingNotice); ev.User != "bob" {
		t.Errorf("typing notice %+v", ev)
	}
	if err := bob.Read(ctx, "alice", st.Seq); err != nil {
		t.Fatal(err)
	}
	if ev := got(alice, func(ev client.Event) bool { _, ok := ev.(client.ReadNotice); return ok }).(client.ReadNotice); ev.User != "bob" || ev.Seq != st.Seq {
		t.Errorf("read notice %+v, want seq %d", ev, st.Seq)
	}
	h, err := alice.HistoryBefore(ctx, client.ToUser("bob"), 10, 0)
	if err != nil || h.ReadSeq != st.Seq || len(h.Messages) != 1 {
		t.Errorf("HistoryBefore = %+v, %v", h, err)
	}
	if a, err := bob.SetAway(ctx, ""); err != nil || a.Message != "" {
		t.Errorf("clearing = %+v, %v", a, err)
	}
}

// Notices in the token are a peer's word: a token from a node that holds
// the cluster key may carry any. Only well-formed ones for a user logged in
// here, who asked for their kind, are handed over; the token carries at
// most maxHintNotices on, and a notice whose origin never sees it again
// (a dead node, a forged one) is gone after noticeHops visits.
// tokenNotices is the notices' part of the token's App data (the queue's
// hint), and maxHintNotices and noticeHops are the queue's bounds of them.
type tokenNotices struct {
	N []queue.Notice `json:"n"`
}

const maxHintNotices, noticeHops = 64, 64

func TestForgedNoticesInTheToken(t *testing.T) {
	r := newRing(t, 2, nil)
	alice := dialRaw(t, r.addr(1))
	alice.loginWith("alice", protocol.FeatureRead)
	var id int64
	if err := r.st.View(context.Background(), func(tx store.Tx) error {
		u, err := tx.UserByName("alice")
		id = u.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	forged := []queue.Notice{
		{Origin: 9, User: id, Kind: "zz", From: "mallory", Hops: 5},                // no such kind
		{Origin: 9, User: id, Kind: queue.NoticeRead, From: "", Seq: 1, Hops: 5},   // no sender
		{Origin: 9, User: id, Kind: queue.NoticeRead, From: "m", Seq: -1, Hops: 5}, // no such sequence
		{Origin: 0, User: id, Kind: queue.NoticeRead, From: "m", Seq: 1, Hops: 5},  // from no node
		{Origin: 9, User: id, Kind: queue.NoticeTyping, From: "m", Hops: 5},        // a kind alice did not ask for
		{Origin: 9, User: id, Kind: queue.NoticeRead, From: "bob", Seq: 7, Hops: 5},
	}
	for range 500 { // for nobody logged in, never coming home
		forged = append(forged, queue.Notice{Origin: 9, User: 999_999, Kind: queue.NoticeTyping, From: "x", Hops: 1 << 30})
	}
	app, err := json.Marshal(tokenNotices{N: forged})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.forged = app
	r.mu.Unlock()
	r.poke()
	if m := alice.obj(); fmt.Sprint(m) != "map[messageType:READ seq:7 username:bob]" {
		t.Fatalf("alice got %v, want only the well-formed READ", m)
	}
	carried := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		var h tokenNotices
		if len(r.app) > 0 {
			if err := json.Unmarshal(r.app, &h); err != nil {
				t.Fatal(err)
			}
		}
		return len(h.N)
	}
	r.rotations(1)
	if n := carried(); n > maxHintNotices {
		t.Errorf("the token carries %d notices on, over %d", n, maxHintNotices)
	}
	r.rotations(noticeHops/2 + 1) // two visits a rotation on this ring
	if n := carried(); n != 0 {
		t.Errorf("%d notices still carried after %d visits", n, noticeHops+2)
	}
	if m := alice.ask(`{"messageType":"WHO","id":"w"}`); m["messageType"] != "WHO" {
		t.Errorf("alice got %v, want nothing more", m)
	}
}
