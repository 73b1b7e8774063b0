package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
)

var sentAtRE = regexp.MustCompile(`"sentAt":"[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2}:\d{2} [AP]M"`)

// v1Line replaces the sentAt value by a marker after checking its format.
func v1Line(t *testing.T, line string) string {
	t.Helper()
	if !sentAtRE.MatchString(line) {
		t.Fatalf("no sentAt in the original format in %s", line)
	}
	return sentAtRE.ReplaceAllString(line, `"sentAt":"*"`)
}

// TestV1Shapes checks the exact bytes of protocol 1 (DESIGN.md, "Chat"): the
// original client's lines, including the older toName/forGroup shape and
// its sentAt object, get the answers it expects; fromName is never trusted.
func TestV1Shapes(t *testing.T) {
	r := newRing(t, 2, nil)
	alice := dialRaw(t, r.addr(1))
	bob := dialRaw(t, r.addr(2))
	alice.login("alice")
	bob.login("bob")
	alice.join("g1")
	bob.join("g1")
	bob.send(`{"messageType":"ALIVE"}`)
	// The original client's own line (figure 22 of the reference).
	alice.send(`{"sentAt":{"seconds":1556146749,"nanos":290000000},"fromName":"mallory","toName":"bob","messageContent":"hey man you're cool too.","forGroup":false,"messageType":"CHAT_MESSAGE"}`)
	if got := v1Line(t, bob.line()); got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","messageContent":"hey man you're cool too.","sentAt":"*"}` {
		t.Errorf("direct message: %s", got)
	}
	alice.send(`{"messageType":"CHAT_MESSAGE","fromName":"alice","toName":"g1","forGroup":true,"messageContent":"hi <all> & \"you\"","sentAt":"Apr 25, 2019, 4:55:53 PM"}`)
	if got := v1Line(t, bob.line()); got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","toGroup":"g1","messageContent":"hi <all> & \"you\"","sentAt":"*"}` {
		t.Errorf("group message: %s", got)
	}
	// Its protocol-1 sender is shown it too, as the original server did:
	// the original client has no receipt.
	if got := v1Line(t, alice.line()); got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"alice","toGroup":"g1","messageContent":"hi <all> & \"you\"","sentAt":"*"}` {
		t.Errorf("group message, to its sender: %s", got)
	}
	bob.send(`{"messageType":"LEAVE_GROUP","group":"g1"}`)
	bob.expect(`{"messageType":"LEAVE_GROUP","group":"g1"}`)
	bob.send(`{"messageType":"LEAVE_GROUP","group":"g1"}`)
	bob.expect(`{"messageType":"ERROR","errorMessage":"not a member of g1"}`)
	// Sending to oneself works.
	alice.send(chatTo("alice", "note to self"))
	if got := v1Line(t, alice.line()); got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"alice","messageContent":"note to self","sentAt":"*"}` {
		t.Errorf("self message: %s", got)
	}
	// A v1 delivery counts as delivered once written: nothing stays queued.
	eventually(t, "protocol-1 deliveries removed once written", func() bool {
		return storetest.PendingFor(t, r.st, "bob") == 0 && storetest.PendingFor(t, r.st, "alice") == 0
	})
}

// TestGroupOrderAndMembership: a group message reaches every member as of
// sending (not the sender) in one order for all, senders on different
// nodes; joining twice is harmless; leaving stops delivery.
func TestGroupOrderAndMembership(t *testing.T) {
	r := newRing(t, 3, nil)
	names := []string{"ann", "ben", "cat", "dan"}
	cs := map[string]*raw{}
	for i, n := range names {
		c := dialRaw(t, r.addr(int64(i%3+1)))
		c.login(n)
		c.join("team")
		c.join("team") // twice: harmless
		cs[n] = c
	}
	const each = 20
	done := make(chan struct{})
	for _, n := range names[:2] {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				cs[n].send(chatGroup("team", fmt.Sprintf("%s-%d", n, i)))
			}
		}()
	}
	<-done
	<-done
	read := func(who string, k int) []string {
		var out []string
		for range k {
			var m map[string]any
			if err := json.Unmarshal([]byte(cs[who].line()), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m["messageContent"].(string))
		}
		return out
	}
	cat, dan := read("cat", 2*each), read("dan", 2*each)
	if !slices.Equal(cat, dan) {
		t.Fatalf("members saw different orders:\ncat %v\ndan %v", cat, dan)
	}
	// FIFO per sender.
	for _, sender := range names[:2] {
		var seen []string
		for _, m := range cat {
			if strings.HasPrefix(m, sender+"-") {
				seen = append(seen, m)
			}
		}
		for i, m := range seen {
			if m != fmt.Sprintf("%s-%d", sender, i) {
				t.Fatalf("%s's messages out of order: %v", sender, seen)
			}
		}
	}
	// Protocol-1 senders get every message, their own too (the original
	// client's confirmation), in the group's one order.
	for _, sender := range names[:2] {
		if got := read(sender, 2*each); !slices.Equal(got, cat) {
			t.Fatalf("%s saw another order than the members:\n%s %v\ncat %v", sender, sender, got, cat)
		}
	}
	// Leaving stops delivery.
	cs["dan"].send(`{"messageType":"LEAVE_GROUP","group":"team"}`)
	cs["dan"].expect(`{"messageType":"LEAVE_GROUP","group":"team"}`)
	cs["ann"].send(chatGroup("team", "after dan left"))
	for _, who := range []string{"ann", "ben", "cat"} {
		if got := read(who, 1); got[0] != "after dan left" {
			t.Fatalf("%s got %q", who, got)
		}
	}
	cs["dan"].send(chatTo("dan", "marker"))
	if got := read("dan", 1); got[0] != "marker" {
		t.Fatalf("dan received %q after leaving the group", got[0])
	}
}

// TestOfflineDelivery: a message to a user who is not logged in waits in
// the store until they log in, at any node; FIFO per sender and recipient.
func TestOfflineDelivery(t *testing.T) {
	r := newRing(t, 3, nil)
	bob := dialRaw(t, r.addr(2))
	bob.login("bob")
	bob.nc.Close()
	alice := dialRaw(t, r.addr(1))
	alice.login("alice")
	for i := range 5 {
		alice.send(chatTo("bob", fmt.Sprint("offline ", i)))
	}
	eventually(t, "messages stored for bob", func() bool { return storetest.PendingFor(t, r.st, "bob") == 5 })
	r.rotations(2)
	again := dialRaw(t, r.addr(3))
	again.login("bob")
	for i := range 5 {
		var m map[string]any
		if err := json.Unmarshal([]byte(again.line()), &m); err != nil {
			t.Fatal(err)
		}
		if m["messageContent"] != fmt.Sprint("offline ", i) || m["fromName"] != "alice" {
			t.Fatalf("message %d: %v", i, m)
		}
	}
}

// TestUnknownRecipient: a message to an unknown user or group is refused
// at once and leaves nothing behind.
func TestUnknownRecipient(t *testing.T) {
	r := newRing(t, 1, nil)
	alice := dialRaw(t, r.addr(1))
	alice.login("alice")
	alice.send(chatTo("nobody", "hello?"))
	alice.expect(`{"messageType":"ERROR","errorMessage":"no user \"nobody\" (a user exists once they have logged in)"}`)
	alice.send(chatGroup("nogroup", "hello?"))
	alice.expectError("", `no group "nogroup"`)
	r.rotations(2)
	var msgs []store.Message
	err := r.st.Update(context.Background(), func(tx store.Tx) error {
		u, _ := tx.UserByName("alice")
		var err error
		msgs, err = tx.History(store.Conversation{UserA: u.ID, UserB: u.ID}, 10)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.servers[0].Stats(); st.Stored != 0 || st.Queued != 0 || len(msgs) != 0 {
		t.Errorf("refused messages left something: stats %+v, messages %v", st, msgs)
	}
}

// TestSecondLogin: a user is logged in once across the ring; a second
// login (same node or another) gets USER_ONLINE; after logout it works.
func TestSecondLogin(t *testing.T) {
	r := newRing(t, 2, nil)
	first := dialRaw(t, r.addr(1))
	first.login("alice")
	same := dialRaw(t, r.addr(1))
	same.send(`{"messageType":"LOGIN","username":"alice"}`)
	same.expectError("", `user "alice" is already logged in (at node 1)`)
	other := dialRaw(t, r.addr(2))
	other.send(`{"messageType":"LOGIN","username":"alice"}`)
	other.expectError("", `user "alice" is already logged in at node 1`)
	first.send(`{"messageType":"LOGIN","username":"bob"}`)
	first.expectError("", `already logged in as "alice"`)
	first.nc.Close()
	eventually(t, "alice logged out", func() bool {
		on, _ := r.st.Online(context.Background())
		return len(on) == 0
	})
	other.login("alice")
}

// TestStalePresence: presence left by a node that is no longer in the ring
// does not block the user; presence this node left behind is cleared when
// it starts.
func TestStalePresence(t *testing.T) {
	st := newStore(t, 3)
	ctx := context.Background()
	storetest.Present(t, st, "ghost", 3)
	storetest.Present(t, st, "old", 1)
	// Node 3 leaves the ring (as the coordinator splices out a dead node).
	c, _ := st.Coordinator(ctx)
	if err := st.SetSuccessors(ctx, c, []store.SuccessorChange{{NodeID: 2, Successor: 1}, {NodeID: 3, Successor: 0}}); err != nil {
		t.Fatal(err)
	}
	r := newRingOn(t, st, 2, nil) // node 1 starts: "old" is cleared
	on, _ := st.Online(ctx)
	if len(on) != 1 || on[0].UserName != "ghost" {
		t.Fatalf("online after node 1 started: %+v", on)
	}
	c2 := dialRaw(t, r.addr(2))
	c2.login("ghost")
	on, _ = st.Online(ctx)
	if len(on) != 1 || on[0].NodeID != 2 {
		t.Fatalf("online after login: %+v", on)
	}
}

// TestNames: limits, and names that look like SQL are stored and shown
// verbatim.
func TestNames(t *testing.T) {
	r := newRing(t, 1, nil)
	c := dialRaw(t, r.addr(1))
	for _, tc := range []struct{ line, want string }{
		{`{"messageType":"LOGIN","username":""}`, "empty username"},
		{`{"messageType":"LOGIN"}`, "empty username"},
		{`{"messageType":"LOGIN","username":"` + strings.Repeat("x", 33) + `"}`, "over the limit of 32"},
		{`{"messageType":"LOGIN","username":"a\u0007b"}`, "unprintable"},
		{`{"messageType":"LOGIN","username":" alice"}`, "starts or ends with a space"},
		{`{"messageType":"LOGIN","username":"alice","version":3}`, "unsupported protocol version 3"},
	} {
		c.send(tc.line)
		c.expectError("", tc.want)
	}
	sqlName := `x'); DROP TABLE users;--`
	c.login(sqlName)
	c.join(`g" OR 1=1 --`)
	c.send(chatTo(sqlName, `'; DELETE FROM messages; --`))
	var m map[string]any
	if err := json.Unmarshal([]byte(c.line()), &m); err != nil {
		t.Fatal(err)
	}
	if m["fromName"] != sqlName || m["toUsername"] != sqlName || m["messageContent"] != `'; DELETE FROM messages; --` {
		t.Fatalf("not verbatim: %v", m)
	}
	on, _ := r.st.Online(context.Background())
	if len(on) != 1 || on[0].UserName != sqlName {
		t.Fatalf("online: %+v", on)
	}
	// 32 characters of any script are fine.
	c2 := dialRaw(t, r.addr(1))
	c2.login(strings.Repeat("é", 32))
}

// TestBadInput: every kind of bad line gets an ERROR and the connection,
// and everyone else, carry on; a line over 64 KiB closes the connection
// with a reason.
func TestBadInput(t *testing.T) {
	r := newRing(t, 1, nil)
	good := dialRaw(t, r.addr(1))
	good.login("good")
	bad := dialRaw(t, r.addr(1))
	for _, tc := range []struct{ line, want string }{
		{`{"messageType":"JOIN_GROUP","group":"g"}`, "log in first"},
		{chatTo("good", "hi"), "log in first"},
		{`not json`, "malformed JSON"},
		{`{"messageType":"LOGIN","username":`, "malformed JSON"},
		{`[1,2]`, "malformed JSON"},
		{`{"username":"x"}`, "missing messageType"},
		{`{"messageType":"EXPLODE"}`, `unknown messageType "EXPLODE"`},
		{`{"messageType":42}`, "malformed JSON"},
	} {
		bad.send(tc.line)
		bad.expectError("", tc.want)
	}
	bad.login("bad")
	for _, tc := range []struct{ line, want string }{
		{`{"messageType":"WHO"}`, `unknown messageType "WHO"`}, // protocol 2 only
		{`{"messageType":"CHAT_MESSAGE","toUsername":"good","messageContent":""}`, "empty messageContent"},
		{`{"messageType":"CHAT_MESSAGE","messageContent":"x"}`, "no recipient"},
		{`{"messageType":"CHAT_MESSAGE","toUsername":"good","toGroup":"g","messageContent":"x"}`, "not both"},
		{chatTo("good", strings.Repeat("y", protocol.MaxContentBytes+1)), "over the limit of 4096"},
		{`{"messageType":"JOIN_GROUP","group":""}`, "empty group"},
	} {
		bad.send(tc.line)
		bad.expectError("", tc.want)
	}
	bad.send(chatTo("good", strings.Repeat("z", protocol.MaxContentBytes)))
	if m := good.obj(); len(m["messageContent"].(string)) != protocol.MaxContentBytes {
		t.Fatal("a message of exactly 4 KiB was not delivered")
	}
	huge := `{"messageType":"CHAT_MESSAGE","toUsername":"good","messageContent":"` + strings.Repeat("a", protocol.MaxLineBytes) + `"}`
	bad.send(huge)
	lines := bad.closed()
	if len(lines) != 1 || !strings.Contains(lines[0], "line longer than 65536 bytes") {
		t.Fatalf("after a long line: %q", lines)
	}
	// Everyone else carries on.
	other := dialRaw(t, r.addr(1))
	other.login("other")
	other.send(chatTo("good", "still here"))
	if m := good.obj(); m["messageContent"] != "still here" {
		t.Fatalf("good got %v", m)
	}
}

// TestFlood: lines over the rate limit are dropped with one RATE_LIMITED
// error; a sustained flood closes the connection; others are unaffected.
func TestFlood(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.RateLimit, c.RateBurst, c.FloodLimit = 5, 10, 50 })
	good := dialRaw(t, r.addr(1))
	good.login("good")
	flood := dialRaw(t, r.addr(1))
	flood.login("flood")
	var b strings.Builder
	for range 200 {
		b.WriteString(`{"messageType":"ALIVE"}` + "\n")
	}
	flood.send(strings.TrimSuffix(b.String(), "\n"))
	lines := flood.closed()
	if len(lines) < 2 || !strings.Contains(lines[0], "lines are dropped") || !strings.Contains(lines[len(lines)-1], "refused in a row") {
		t.Fatalf("flood got %q", lines)
	}
	good.send(chatTo("good", "fine"))
	if m := good.obj(); m["messageContent"] != "fine" {
		t.Fatalf("good got %v", m)
	}
}

// TestRateLimitedRequestsAreAnswered: a protocol-2 request the rate limit
// drops is answered by its id (RATE_LIMITED), every one of them, not only
// the first of the run: a client waiting for a message's STORED must learn
// that it was dropped, or it waits for an answer that never comes (seen as
// a sender whose every few hundredth message hung until its timeout).
func TestRateLimitedRequestsAreAnswered(t *testing.T) {
	// 5 lines a second: the burst is gone long before one more line is
	// allowed; polls that resend every 5 ms stay far from a flood.
	r := newRing(t, 1, func(c *Config) { c.RateLimit, c.RateBurst, c.FloodLimit = 5, 5, 1000 })
	bob := dialRaw(t, r.addr(1))
	bob.loginV2("bob", "")
	alice := dialRaw(t, r.addr(1))
	alice.loginV2("alice", "") // one line of the burst of 5
	const n = 12
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","toUsername":"bob","messageContent":"m%d","id":"00000000-0000-7000-8000-%012d"}`, i, i))
	}
	alice.send(lines...)
	answered := map[string]string{} // id: STORED or the error's code
	limited := 0
	for len(answered) < n {
		m := alice.obj()
		id, _ := m["id"].(string)
		switch {
		case m["messageType"] == "STORED":
			answered[id] = "STORED"
		case m["messageType"] == "ERROR" && m["code"] == string(protocol.CodeRateLimited) && id != "":
			if limited == 0 && !strings.Contains(m["errorMessage"].(string), "lines are dropped") {
				t.Errorf("first refusal: %v", m)
			}
			answered[id] = string(protocol.CodeRateLimited)
			limited++
		default:
			t.Fatalf("unexpected %v (answered so far: %v)", m, answered)
		}
	}
	if limited == 0 || limited == n {
		t.Fatalf("want some messages stored and the rest refused, got %v", answered)
	}
	// The refused ones were dropped, not queued: sent again once the limit
	// allows, the same id is taken.
	id := ""
	for k, v := range answered {
		if v == string(protocol.CodeRateLimited) {
			id = k
		}
	}
	eventually(t, "a refused message sent again is stored", func() bool {
		alice.send(fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","toUsername":"bob","messageContent":"again","id":%q}`, id))
		m := alice.obj()
		return m["messageType"] == "STORED" && m["id"] == id
	})
}

// TestIdleTimeout: a protocol-2 session that sends nothing is closed with
// a reason, and so is a connection that does not log in; ALIVE keeps a
// protocol-2 session open.
func TestIdleTimeout(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.IdleTimeout, c.LoginTimeout = 300*time.Millisecond, 200*time.Millisecond })
	alive := dialRaw(t, r.addr(1))
	alive.loginV2("alive", "")
	idle := dialRaw(t, r.addr(1))
	idle.loginV2("idle", "")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				_, _ = alive.nc.Write([]byte(`{"messageType":"ALIVE"}` + "\n"))
			}
		}
	}()
	silent := dialRaw(t, r.addr(1))
	lines := idle.closed()
	if len(lines) != 1 || !strings.Contains(lines[0], `"code":"IDLE_TIMEOUT"`) || !strings.Contains(lines[0], "nothing received for 300ms") {
		t.Fatalf("idle got %q", lines)
	}
	if lines := silent.closed(); len(lines) != 1 || !strings.Contains(lines[0], "not logged in after 200ms") {
		t.Fatalf("silent connection got %q", lines)
	}
	eventually(t, "idle user logged out", func() bool {
		on, _ := r.st.Online(context.Background())
		return len(on) == 1 && on[0].UserName == "alive"
	})
	alive.send(`{"messageType":"ALIVE","id":"still-open"}`)
	alive.expect(`{"messageType":"ALIVE","id":"still-open"}`)
}

// TestV1NeverClosedForSilence: the original client sends no ALIVE, so a
// protocol-1 session is not closed however long it is quiet (TCP
// keep-alive finds its dead peers): idle for several times the idle
// limit that closes a protocol-2 session meanwhile, it still gets what is
// sent to it, and its next request is answered.
func TestV1NeverClosedForSilence(t *testing.T) {
	const limit = 200 * time.Millisecond
	r := newRing(t, 1, func(c *Config) { c.IdleTimeout = limit })
	old := dialRaw(t, r.addr(1))
	old.login("old")
	quietSince := time.Now()
	v2 := dialRaw(t, r.addr(1))
	v2.loginV2("new", "")
	// The protocol-2 session, as quiet, is closed: the limit is in force.
	if lines := v2.closed(); len(lines) != 1 || !strings.Contains(lines[0], "nothing received for 200ms") {
		t.Fatalf("the quiet protocol-2 session got %q, want IDLE_TIMEOUT", lines)
	}
	eventually(t, "five idle limits without a line from the protocol-1 session", func() bool {
		return time.Since(quietSince) > 5*limit
	})
	if st := r.servers[0].Stats(); st.Sessions != 1 || st.Dropped != 1 {
		t.Fatalf("after the quiet: %+v, want the protocol-1 session alone and one connection dropped", st)
	}
	sender := dialRaw(t, r.addr(1))
	sender.login("sender")
	sender.send(chatTo("old", "still there?"))
	if m := old.obj(); m["messageType"] != "CHAT_MESSAGE" || m["messageContent"] != "still there?" || m["fromName"] != "sender" {
		t.Fatalf("the quiet protocol-1 session got %v", m)
	}
	old.join("g")
	on, err := r.st.Online(context.Background())
	if err != nil || len(on) != 2 {
		t.Fatalf("online after the quiet: %v %v, want old and sender", on, err)
	}
}

// TestMaxClients: connections over the limit are refused with a reason.
func TestMaxClients(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.MaxClients = 2 })
	a := dialRaw(t, r.addr(1))
	a.login("a")
	b := dialRaw(t, r.addr(1))
	b.login("b")
	c := dialRaw(t, r.addr(1))
	if lines := c.closed(); len(lines) != 1 || !strings.Contains(lines[0], "server full: 2 clients") {
		t.Fatalf("third client got %q", lines)
	}
	a.nc.Close()
	eventually(t, "a slot freed", func() bool { return r.servers[0].Stats().Clients == 1 })
	d := dialRaw(t, r.addr(1))
	d.login("d")
}
