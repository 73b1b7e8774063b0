package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store/storetest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func dialV2(t *testing.T, addr, user, password string, opts client.Options) *client.Conn {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = waitLimit
	}
	c, err := client.Dial(ctxT(t), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.LoginV2(ctxT(t), user, password); err != nil {
		t.Fatal(err)
	}
	return c
}

// nextChat waits for the next chat message on c, skipping receipts.
func nextChat(t *testing.T, c *client.Conn) client.ChatMessage {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatal("connection ended")
			}
			switch ev := ev.(type) {
			case client.ChatMessage:
				return ev
			case client.Stored:
			default:
				t.Fatalf("unexpected event %#v", ev)
			}
		case <-timeout:
			t.Fatal("no chat message")
		}
	}
}

// TestV2Shapes checks protocol 2's objects on the wire: login with a
// password, ids, STORED, deliveries with id and seq, errors with codes.
func TestV2Shapes(t *testing.T) {
	r := newRing(t, 2, nil)
	a := dialRaw(t, r.addr(1))
	login := a.loginV2("alice", "s3cret")
	if login["node"] != float64(1) {
		t.Errorf("login answer %v", login)
	}
	b := dialRaw(t, r.addr(2))
	b.loginV2("bob", "")
	a.send(`{"messageType":"JOIN_GROUP","group":"g","id":"j1"}`)
	a.expect(`{"messageType":"JOIN_GROUP","group":"g","id":"j1"}`)
	const id = "0190f5a2-7b1c-7cde-8f00-0123456789ab"
	a.send(`{"messageType":"CHAT_MESSAGE","id":"` + id + `","toUsername":"bob","messageContent":"hi"}`)
	st := a.obj()
	if st["messageType"] != "STORED" || st["id"] != id || st["seq"].(float64) < 1 || st["time"] == "" {
		t.Fatalf("receipt %v", st)
	}
	m := b.obj()
	want := map[string]any{"messageType": "CHAT_MESSAGE", "id": id, "seq": st["seq"], "fromName": "alice",
		"toUsername": "bob", "messageContent": "hi", "sentAt": m["sentAt"], "time": m["time"]}
	if fmt.Sprint(m) != fmt.Sprint(want) || !sentAtRE.MatchString(`"sentAt":"`+m["sentAt"].(string)+`"`) {
		t.Fatalf("delivery %v", m)
	}
	if m["time"] != st["time"] {
		t.Fatalf("receipt time %v, delivered message's time %v: both are the stored acceptance time", st["time"], m["time"])
	}
	// The same id again is stored once: the same receipt, no second delivery.
	a.send(`{"messageType":"CHAT_MESSAGE","id":"` + id + `","toUsername":"bob","messageContent":"hi"}`)
	if again := a.obj(); fmt.Sprint(again) != fmt.Sprint(st) {
		t.Fatalf("resent receipt %v, first %v", again, st)
	}
	a.send(`{"messageType":"CHAT_MESSAGE","id":"not-a-uuid","toUsername":"bob","messageContent":"x"}`)
	a.expect(`{"messageType":"ERROR","code":"BAD_REQUEST","errorMessage":"id must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower case)","id":"not-a-uuid"}`)
	a.send(`{"messageType":"CHAT_MESSAGE","id":"0190f5a2-7b1c-7cde-8f00-0123456789ac","toUsername":"nobody","messageContent":"x"}`)
	a.expect(`{"messageType":"ERROR","code":"UNKNOWN_USER","errorMessage":"no user \"nobody\" (a user exists once they have logged in)","id":"0190f5a2-7b1c-7cde-8f00-0123456789ac"}`)
	a.send(`{"messageType":"ACK"}`)
	a.expectError(protocol.CodeBadRequest, "ACK needs 1 to 1000 message ids")
	b.send(`{"messageType":"ACK","ids":["` + id + `"]}`)
	eventually(t, "acknowledged message removed", func() bool { return storetest.PendingFor(t, r.st, "bob") == 0 })
	// Password rules.
	c := dialRaw(t, r.addr(2))
	c.send(`{"messageType":"LOGIN","username":"alice"}`)
	c.expect(`{"messageType":"ERROR","errorMessage":"user \"alice\" is protected by a password: log in with protocol version 2 and the password"}`)
	c.send(`{"messageType":"LOGIN","username":"alice","version":2,"password":"wrong","id":"x"}`)
	c.expect(`{"messageType":"ERROR","code":"BAD_PASSWORD","errorMessage":"wrong password","id":"x"}`)
	c.send(`{"messageType":"LOGIN","username":"alice","version":2,"password":"s3cret","id":"y"}`)
	c.expect(`{"messageType":"ERROR","code":"USER_ONLINE","errorMessage":"user \"alice\" is already logged in at node 1","id":"y"}`)
	c.send(`{"messageType":"WHO"}`)
	c.expect(`{"messageType":"ERROR","errorMessage":"log in first: send LOGIN with your username"}`)
}

// TestV2Queries: WHO, GROUPS and HISTORY.
func TestV2Queries(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	alice := dialV2(t, r.addr(1), "alice", "", client.Options{AutoAck: true})
	bob := dialV2(t, r.addr(2), "bob", "", client.Options{AutoAck: true})
	for _, g := range []string{"g1", "g2"} {
		if err := alice.Join(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.Join(ctx, "g1"); err != nil {
		t.Fatal(err)
	}
	who, err := bob.Who(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(who) != "[{alice 1} {bob 2}]" {
		t.Errorf("WHO = %v", who)
	}
	groups, err := bob.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(groups) != "[{g1 2 true} {g2 1 false}]" {
		t.Errorf("GROUPS = %v", groups)
	}
	for i := range 5 {
		if _, err := alice.SendWait(ctx, client.ToUser("bob"), fmt.Sprint("d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := bob.SendWait(ctx, client.ToGroup("g1"), fmt.Sprint("g", i)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := bob.History(ctx, client.ToUser("alice"), 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range h {
		got = append(got, m.From+":"+m.Content)
	}
	if strings.Join(got, " ") != "alice:d2 alice:d3 alice:d4" {
		t.Errorf("HISTORY with alice = %v", got)
	}
	h, err = alice.History(ctx, client.ToGroup("g1"), 0)
	if err != nil || len(h) != 5 || h[4].Content != "g4" || h[0].Seq >= h[4].Seq {
		t.Errorf("HISTORY of g1 = %+v, %v", h, err)
	}
	_, err = bob.History(ctx, client.ToGroup("g2"), 0)
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != protocol.CodeNotMember {
		t.Errorf("history of a group bob is not in: %v", err)
	}
	// A v1 client in the same conversation never sees protocol-2 objects.
	old := dialRaw(t, r.addr(1))
	old.login("old")
	old.join("g1")
	if _, err := bob.SendWait(ctx, client.ToGroup("g1"), "to the old client"); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(old.line()), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if fmt.Sprint(keys) != "[fromName messageContent messageType sentAt toGroup toUsername]" {
		t.Errorf("v1 client got %v", m)
	}
}

// TestV2Redelivery: messages not acknowledged come again after a reconnect
// at another node, and the client delivers each once; acknowledged ones do
// not come again; messages sent but not stored are resent with their ids
// and stored once.
func TestV2Redelivery(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	sender := dialV2(t, r.addr(1), "sender", "pw", client.Options{})
	seen := client.NewSeen(0)
	rcv := dialV2(t, r.addr(1), "rcv", "pw2", client.Options{Seen: seen})
	var ids []string
	for i := range 6 {
		st, err := sender.SendWait(ctx, client.ToUser("rcv"), fmt.Sprint("m", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	var got []string
	for range 6 {
		got = append(got, nextChat(t, rcv).Content)
	}
	if strings.Join(got, " ") != "m0 m1 m2 m3 m4 m5" {
		t.Fatalf("first delivery %v", got)
	}
	if err := rcv.Ack(ctx, ids[:2]...); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two acknowledged", func() bool { return storetest.PendingFor(t, r.st, "rcv") == 4 })
	rcv.Close()
	// Reconnect at the other node with the same Seen: the four come again,
	// are acknowledged by the client as duplicates and not delivered twice.
	again, err := client.DialV2(ctx, []string{r.addr(2)}, "rcv", "pw2", client.Options{Seen: seen, Timeout: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	eventually(t, "duplicates acknowledged", func() bool { return storetest.PendingFor(t, r.st, "rcv") == 0 })
	if _, err := sender.SendWait(ctx, client.ToUser("rcv"), "fresh"); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, again); m.Content != "fresh" {
		t.Fatalf("after reconnect got %q, want only the fresh message", m.Content)
	}
	// A new client (no Seen) gets unacknowledged messages again.
	again.Close()
	third, err := client.DialV2(ctx, []string{r.addr(1), r.addr(2)}, "rcv", "pw2", client.Options{Timeout: waitLimit, AutoAck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if m := nextChat(t, third); m.Content != "fresh" {
		t.Fatalf("third connection got %q", m.Content)
	}
	// Unstored messages are resent with their ids: stored once.
	r.failVisits(1, 1_000_000) // node 1 cannot store anything now
	id, err := sender.Post(ctx, client.ToUser("rcv"), "resent")
	if err != nil {
		t.Fatal(err)
	}
	r.rotations(2)
	un := sender.Unstored()
	if len(un) != 1 || un[0].ID != id {
		t.Fatalf("unstored %v", un)
	}
	sender.Close()
	r.failVisits(1, 0)
	s2 := dialV2(t, r.addr(2), "sender", "pw", client.Options{})
	if err := s2.Resend(ctx, un); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, third); m.Content != "resent" || m.ID != id {
		t.Fatalf("got %+v", m)
	}
	// Node 1 stored it too once it could (the old connection's queue):
	// the id is stored once, so no second delivery.
	r.rotations(3)
	eventually(t, "nothing left", func() bool { return storetest.PendingFor(t, r.st, "rcv") == 0 })
	select {
	case ev := <-third.Events():
		if m, ok := ev.(client.ChatMessage); ok {
			t.Fatalf("delivered twice: %+v", m)
		}
	default:
	}
}

// TestFailedVisitSendsNothing: while the fenced transaction fails nothing
// is committed, so no receipt is sent and nothing is lost; the message is
// stored and delivered once the token works again.
func TestFailedVisitSendsNothing(t *testing.T) {
	r := newRing(t, 1, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	r.failVisits(1, 5)
	id, err := a.Post(ctx, client.ToUser("a"), "survives")
	if err != nil {
		t.Fatal(err)
	}
	var events []client.Event
	for len(events) < 2 {
		select {
		case ev := <-a.Events():
			events = append(events, ev)
		case <-time.After(waitLimit):
			t.Fatalf("events %v", events)
		}
	}
	st, ok := events[0].(client.Stored)
	m, ok2 := events[1].(client.ChatMessage)
	if !ok || !ok2 || st.ID != id || m.ID != id {
		t.Fatalf("events %#v", events)
	}
	if f := r.servers[0].Stats().FailedVisits; f < 5 {
		t.Errorf("failed visits %d, want 5", f)
	}
}

// TestIdleVisitsSkipStore: once there is nothing to do, visits do not open
// store transactions, with clients connected and logged in.
func TestIdleVisitsSkipStore(t *testing.T) {
	r := newRing(t, 3, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "hi"); err != nil {
		t.Fatal(err)
	}
	nextChat(t, b)
	eventually(t, "ack applied", func() bool { return storetest.PendingFor(t, r.st, "b") == 0 })
	r.rotations(3)
	before := map[int64]Stats{}
	for _, s := range r.servers {
		before[s.cfg.NodeID] = s.Stats()
	}
	r.rotations(20)
	for _, s := range r.servers {
		now := s.Stats()
		if d := now.StoreVisits - before[s.cfg.NodeID].StoreVisits; d != 0 {
			t.Errorf("node %d opened %d transactions in %d idle visits", s.cfg.NodeID, d, now.Visits-before[s.cfg.NodeID].Visits)
		}
	}
	// And work still flows afterwards, to the right node only.
	if _, err := b.SendWait(ctx, client.ToUser("a"), "back"); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, a); m.Content != "back" {
		t.Fatal(m)
	}
	if d := r.servers[2].Stats().StoreVisits - before[3].StoreVisits; d != 0 {
		t.Errorf("node 3, with nothing to do, opened %d transactions", d)
	}
}

// TestStuckClient: a client that reads nothing does not slow the others;
// it is closed once its socket stays full for WriteTimeout. (At 300 ms,
// under the race detector on a loaded machine, the reader that reads all
// along was dropped too, its last line cut.)
func TestStuckClient(t *testing.T) {
	r := newRing(t, 1, func(c *Config) {
		c.WriteTimeout, c.SocketBuffer, c.RateLimit = 2*time.Second, 4096, 0
	})
	ctx := ctxT(t)
	stuck := dialRaw(t, r.addr(1))
	if err := stuck.nc.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	stuck.login("stuck")
	stuck.join("all")
	reader := dialV2(t, r.addr(1), "reader", "", client.Options{AutoAck: true})
	if err := reader.Join(ctx, "all"); err != nil {
		t.Fatal(err)
	}
	sender := dialV2(t, r.addr(1), "sender", "", client.Options{AutoAck: true})
	big := strings.Repeat("x", protocol.MaxContentBytes-8)
	go func() {
		for i := range 300 {
			if _, err := sender.Post(ctx, client.ToGroup("all"), fmt.Sprint(i, big)); err != nil {
				return
			}
		}
	}()
	for i := range 300 {
		m := nextChat(t, reader)
		if !strings.HasPrefix(m.Content, fmt.Sprint(i, "x")) {
			t.Fatalf("message %d: %.10q", i, m.Content)
		}
	}
	eventually(t, "stuck client dropped", func() bool { return r.servers[0].Stats().Dropped >= 1 })
	// Its undelivered messages wait in the store for its next login.
	if n := storetest.PendingFor(t, r.st, "stuck"); n == 0 {
		t.Error("nothing pending for the dropped client")
	}
}

// TestV2GroupsLargestPage: GROUPS answers the largest page the protocol
// allows (1,000) and clamps a larger one to it, instead of failing.
func TestV2GroupsLargestPage(t *testing.T) {
	r := newRing(t, 1, nil)
	c := dialRaw(t, r.addr(1))
	c.loginV2("alice", "")
	for _, limit := range []int{maxGroupsPage, maxGroupsPage + 1, 5000} {
		c.send(fmt.Sprintf(`{"messageType":"GROUPS","limit":%d,"id":"g%d"}`, limit, limit))
		m := c.obj()
		if m["messageType"] != "GROUPS" || m["id"] != fmt.Sprint("g", limit) {
			t.Errorf("GROUPS with limit %d: %v", limit, m)
		}
	}
}
