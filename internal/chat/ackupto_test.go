package chat

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/store"
)

// loginCumulative logs user in with protocol 2 asking for
// FeatureCumulativeAck, and checks that the answer grants it.
func (c *raw) loginCumulative(user string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"messageType":"LOGIN","username":%q,"version":2,"features":["cumulative-ack"],"id":"l1"}`, user))
	m := c.obj()
	if m["messageType"] != "LOGIN" || m["id"] != "l1" || fmt.Sprint(m["features"]) != "[cumulative-ack]" {
		c.t.Fatalf("login answer %v, want one granting cumulative-ack", m)
	}
}

// chat reads the next line: a chat message; it returns its text and seq.
func (c *raw) chat() (string, int64) {
	c.t.Helper()
	m := c.obj()
	text, _ := m["messageContent"].(string)
	seq, _ := m["seq"].(float64)
	if m["messageType"] != "CHAT_MESSAGE" || seq <= 0 {
		c.t.Fatalf("got %v, want a protocol-2 chat message", m)
	}
	return text, int64(seq)
}

// barrier sends a request with an answer and checks that the answer is
// the next line: the lines before it were served, without an answer.
func (c *raw) barrier(id string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"messageType":"GROUPS","id":%q}`, id))
	if m := c.obj(); m["messageType"] != "GROUPS" || m["id"] != id {
		c.t.Fatalf("got %v, want the answer to GROUPS %s", m, id)
	}
}

// stored sends a direct message from a raw protocol-2 session and returns
// its seq from STORED.
func (c *raw) stored(to, text string) int64 {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","toUsername":%q,"messageContent":%q}`, to, text))
	m := c.obj()
	seq, _ := m["seq"].(float64)
	if m["messageType"] != "STORED" || seq <= 0 {
		c.t.Fatalf("got %v, want STORED", m)
	}
	return int64(seq)
}

// TestAckUpToGrantedOnlyIfAsked: the LOGIN answer names cumulative-ack
// only for a session that asked for it.
func TestAckUpToGrantedOnlyIfAsked(t *testing.T) {
	r := newRing(t, 1, nil)
	dialRaw(t, r.addr(1)).loginCumulative("bob")
	m := dialRaw(t, r.addr(1)).loginV2("carol", "")
	if f, ok := m["features"]; ok {
		t.Errorf("a login without features was granted %v", f)
	}
}

// TestAckUpToAcknowledgesWhatWasHanded: ACK_UPTO n acknowledges the direct
// and group messages handed to the connection up to n, and nothing after:
// after a reconnect only the later message comes again.
func TestAckUpToAcknowledgesWhatWasHanded(t *testing.T) {
	r := newRing(t, 1, nil)
	bob := dialRaw(t, r.addr(1))
	bob.loginCumulative("bob")
	bob.send(`{"messageType":"JOIN_GROUP","group":"g","id":"j"}`)
	bob.obj()
	alice := dialRaw(t, r.addr(1))
	alice.loginV2("alice", "")
	alice.send(`{"messageType":"JOIN_GROUP","group":"g","id":"j"}`)
	alice.obj()

	alice.stored("bob", "d1")
	alice.send(`{"messageType":"CHAT_MESSAGE","toGroup":"g","messageContent":"g1"}`)
	alice.obj() // STORED
	alice.stored("bob", "d2")
	var seqs []int64
	for _, want := range []string{"d1", "g1", "d2"} {
		text, seq := bob.chat()
		if text != want {
			t.Fatalf("bob got %q, want %q", text, want)
		}
		seqs = append(seqs, seq)
	}
	bob.send(fmt.Sprintf(`{"messageType":"ACK_UPTO","seq":%d}`, seqs[1]))
	bob.barrier("b1")
	srv := r.servers[0]
	eventually(t, "acknowledgements applied", func() bool { return srv.Stats().PendingAcks == 0 })
	bob.nc.Close()
	eventually(t, "bob logged out", func() bool { return srv.Stats().Sessions == 1 })

	bob = dialRaw(t, r.addr(1))
	bob.loginCumulative("bob")
	if text, seq := bob.chat(); text != "d2" || seq != seqs[2] {
		t.Fatalf("after the reconnect bob got %q (seq %d), want d2 (seq %d) alone: d1 and g1 were acknowledged", text, seq, seqs[2])
	}
	bob.send(fmt.Sprintf(`{"messageType":"ACK_UPTO","seq":%d}`, seqs[2]))
	bob.barrier("b2")
	eventually(t, "acknowledgements applied", func() bool { return srv.Stats().PendingAcks == 0 })
	bob.nc.Close()
	eventually(t, "bob logged out", func() bool { return srv.Stats().Sessions == 1 })
	bob = dialRaw(t, r.addr(1))
	bob.loginCumulative("bob")
	bob.barrier("b3") // nothing came again before it
}

// TestAckUpToRefusals: without the feature (protocol 1 or 2), with a
// missing or bad seq, or one past what the connection was handed, ACK_UPTO
// is refused and acknowledges nothing: the message comes again.
func TestAckUpToRefusals(t *testing.T) {
	r := newRing(t, 1, nil)
	srv := r.servers[0]
	v1 := dialRaw(t, r.addr(1))
	v1.login("old")
	v1.send(`{"messageType":"ACK_UPTO","seq":1}`)
	v1.expectError("", "ACK_UPTO")

	alice := dialRaw(t, r.addr(1))
	alice.loginV2("alice", "")
	plain := dialRaw(t, r.addr(1))
	plain.loginV2("bob", "")
	bob := dialRaw(t, r.addr(1))
	bob.loginCumulative("carol")
	bob.send(`{"messageType":"ACK_UPTO","seq":1,"id":"a0"}`)
	bob.expectError(protocol.CodeBadRequest, "past the newest message delivered on this connection (0)")

	s1 := alice.stored("bob", "for bob")
	alice.stored("carol", "for carol")
	_, got := plain.chat()
	if got != s1 {
		t.Fatalf("bob got seq %d, want %d", got, s1)
	}
	plain.send(fmt.Sprintf(`{"messageType":"ACK_UPTO","seq":%d,"id":"a1"}`, got))
	if m := plain.expectError(protocol.CodeUnknownType, `needs the feature "cumulative-ack"`); m["id"] != "a1" {
		t.Errorf("refusal %v does not name the request a1", m)
	}
	_, seq := bob.chat()
	for _, c := range []struct {
		line string
		code protocol.Code
		part string
	}{
		{`{"messageType":"ACK_UPTO","id":"a2"}`, protocol.CodeBadRequest, `needs "seq"`},
		{`{"messageType":"ACK_UPTO","seq":0,"id":"a2"}`, protocol.CodeBadRequest, `needs "seq"`},
		{`{"messageType":"ACK_UPTO","seq":-5,"id":"a2"}`, protocol.CodeBadRequest, `needs "seq"`},
		{`{"messageType":"ACK_UPTO","seq":"7","id":"a2"}`, protocol.CodeBadJSON, `seq`},
		{fmt.Sprintf(`{"messageType":"ACK_UPTO","seq":%d,"id":"a2"}`, seq+1), protocol.CodeBadRequest,
			fmt.Sprintf("seq %d is past the newest message delivered on this connection (%d)", seq+1, seq)},
	} {
		bob.send(c.line)
		bob.expectError(c.code, c.part)
	}
	eventually(t, "acknowledgements applied", func() bool { return srv.Stats().PendingAcks == 0 })
	plain.nc.Close()
	bob.nc.Close()
	eventually(t, "bob and carol logged out", func() bool { return srv.Stats().Sessions == 2 })
	plain = dialRaw(t, r.addr(1))
	plain.loginV2("bob", "")
	if text, _ := plain.chat(); text != "for bob" {
		t.Errorf("bob got %q after the reconnect, want his unacknowledged message again", text)
	}
	bob = dialRaw(t, r.addr(1))
	bob.loginCumulative("carol")
	if text, _ := bob.chat(); text != "for carol" {
		t.Errorf("carol got %q after the reconnect, want her unacknowledged message again", text)
	}
}

// TestAckUpToSkipsNothingUndelivered: a message stored after the last one
// handed to the connection (its node cannot deliver it yet) is past what
// ACK_UPTO may name, so it is not acknowledged, and comes after a
// reconnect; the one handed is acknowledged.
func TestAckUpToSkipsNothingUndelivered(t *testing.T) {
	r := newRing(t, 2, nil)
	alice := dialRaw(t, r.addr(1))
	alice.loginV2("alice", "")
	bob := dialRaw(t, r.addr(2))
	bob.loginCumulative("bob")
	s1 := alice.stored("bob", "m1")
	if text, seq := bob.chat(); text != "m1" || seq != s1 {
		t.Fatalf("bob got %q (seq %d), want m1 (seq %d)", text, seq, s1)
	}
	r.mu.Lock()
	r.fail[2] = 1 << 30 // node 2 fetches nothing for bob
	r.mu.Unlock()
	s2 := alice.stored("bob", "m2")
	bob.send(fmt.Sprintf(`{"messageType":"ACK_UPTO","seq":%d}`, s2))
	bob.expectError(protocol.CodeBadRequest, fmt.Sprintf("past the newest message delivered on this connection (%d)", s1))
	bob.send(fmt.Sprintf(`{"messageType":"ACK_UPTO","seq":%d}`, s1))
	bob.barrier("b1")
	bob.nc.Close()
	srv2 := r.servers[1]
	eventually(t, "bob logged out", func() bool { return srv2.Stats().Sessions == 0 })
	r.mu.Lock()
	r.fail[2] = 0
	r.mu.Unlock()
	eventually(t, "acknowledgements applied", func() bool { return srv2.Stats().PendingAcks == 0 })

	bob = dialRaw(t, r.addr(2))
	bob.loginCumulative("bob")
	if text, seq := bob.chat(); text != "m2" || seq != s2 {
		t.Fatalf("after the reconnect bob got %q (seq %d), want m2 (seq %d): m1 acknowledged, m2 not", text, seq, s2)
	}
}

// TestTakeUpTo: ACK_UPTO n takes the open deliveries up to n handed
// before any at or above n; one handed after a higher sequence waits for
// an ACK_UPTO that covers that one (the client may not have it yet).
func TestTakeUpTo(t *testing.T) {
	s := &Server{}
	sess := &session{version: protocol.V2}
	var ds []queue.Delivery
	for _, m := range []struct {
		id  string
		seq int64
	}{{"a", 10}, {"b", 20}, {"c", 15}, {"d", 30}} {
		ds = append(ds, queue.Delivery{To: sess, D: store.Delivery{RecipientID: 7, Message: store.Message{ID: m.id, Seq: m.seq}}})
	}
	s.noteUnacked(ds[:3])
	if sess.handedMax != 20 {
		t.Fatalf("handedMax %d after 10, 20 and 15, want 20", sess.handedMax)
	}
	s.noteUnacked(ds[3:])
	if sess.handedMax != 30 {
		t.Fatalf("handedMax %d, want 30", sess.handedMax)
	}
	for _, c := range []struct {
		n    int64
		want []string
	}{
		{9, nil},
		{10, []string{"a"}},
		{20, []string{"b"}}, // not c: handed after b, it may still be on its way
		{29, []string{"c"}},
		{30, []string{"d"}},
	} {
		taken := takeUpTo(sess.unacked, c.n)
		got := slices.Sorted(maps.Keys(taken))
		if !slices.Equal(got, c.want) {
			t.Errorf("ACK_UPTO %d took %v, want %v", c.n, got, c.want)
		}
		for id, d := range taken {
			if d.row.RecipientID != 7 || d.row.Seq > c.n {
				t.Errorf("ACK_UPTO %d took %s with row %+v", c.n, id, d.row)
			}
		}
	}
	if len(sess.unacked) != 0 {
		t.Errorf("left open: %v", sess.unacked)
	}
}

// pendingFor is how many messages user has not acknowledged, as the
// store counts them.
func pendingFor(t *testing.T, st store.Store, user string) int {
	t.Helper()
	var n int
	err := st.View(ctxT(t), func(tx store.Tx) error {
		u, err := tx.UserByName(user)
		if err != nil {
			return err
		}
		n, err = tx.PendingCount(u.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The client library asks for cumulative-ack, is granted it, and its
// AutoAck acknowledges direct and group messages with ACK_UPTO: once they
// are on Events, nothing of them is pending in the store.
func TestClientAcksCumulatively(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	alice := dialV2(t, r.addr(1), "alice", "", client.Options{AutoAck: true})
	bob := dialV2(t, r.addr(2), "bob", "", client.Options{AutoAck: true, CumulativeAck: true})
	if !bob.Granted(protocol.FeatureCumulativeAck) {
		t.Fatal("the node did not grant cumulative-ack")
	}
	for _, c := range []*client.Conn{alice, bob} {
		if err := c.Join(ctx, "g"); err != nil {
			t.Fatal(err)
		}
	}
	const n = 30
	for i := range n {
		to := client.ToUser("bob")
		if i%3 == 1 {
			to = client.ToGroup("g")
		}
		if _, err := alice.SendWait(ctx, to, fmt.Sprintf("m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if m := nextChat(t, bob); m.Content != fmt.Sprintf("m%d", i) {
			t.Fatalf("bob got %q, want m%d", m.Content, i)
		}
	}
	eventually(t, "every message acknowledged", func() bool { return pendingFor(t, r.st, "bob") == 0 })
}

// A client.Session with CumulativeAck acknowledges with ACK_UPTO what its
// consumer has taken from Events.
func TestSessionAcksCumulatively(t *testing.T) {
	r := newRing(t, 1, nil)
	ctx := ctxT(t)
	alice := dialV2(t, r.addr(1), "alice", "", client.Options{AutoAck: true})
	bob, err := client.StartSession(ctx, client.SessionConfig{Addrs: []string{r.addr(1)}, User: "bob",
		Options: client.Options{Timeout: waitLimit, CumulativeAck: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	const n = 20
	for i := range n {
		if _, err := alice.SendWait(ctx, client.ToUser("bob"), fmt.Sprintf("m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; {
		select {
		case ev := <-bob.Events():
			if m, ok := ev.(client.ChatMessage); ok {
				if m.Content != fmt.Sprintf("m%d", i) {
					t.Fatalf("bob got %q, want m%d", m.Content, i)
				}
				i++
			}
		case <-ctx.Done():
			t.Fatal("bob's messages did not come")
		}
	}
	eventually(t, "every message acknowledged", func() bool { return pendingFor(t, r.st, "bob") == 0 })
}
