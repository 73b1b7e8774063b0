package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
)

// chatRing is a 5-process ring on MariaDB that the chat tests share.
type chatRing struct {
	r  *testutil.Ring
	st store.Store
}

func (c *chatRing) addr(id int64) string { return fmt.Sprintf("127.0.0.1:%d", c.r.Ports[id][1]) }

func startChatRing(t *testing.T) *chatRing {
	t.Helper()
	dsn := testutil.MySQLDSN(t)
	ids := []int64{1, 2, 3, 4, 5}
	r := testutil.NewRing(t, ringnodeBin, dsn, ids...)
	r.Extra = []string{"--max-clients-per-ip", "1000"} // 500 clients on one node, all from 127.0.0.1
	ctx := context.Background()
	r.Start(1)
	st := openWhenMigrated(t, dsn)
	for _, id := range ids[1:] {
		r.Start(id)
	}
	c := &chatRing{r: r, st: st}
	// The ring carries messages once every node stores and delivers one.
	for _, id := range ids {
		u := fmt.Sprintf("probe%d", id)
		conn := c.v2(t, id, u, client.Options{AutoAck: true})
		cctx, cancel := context.WithTimeout(ctx, within)
		if _, err := conn.SendWait(cctx, client.ToUser(u), "ping"); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		cancel()
		waitChat(t, conn, func(m client.ChatMessage) bool { return m.Content == "ping" })
		conn.Close()
	}
	return c
}

// v2 logs user in at node id with protocol 2 (retrying while the node
// starts); the connection closes when the test ends.
func (c *chatRing) v2(t *testing.T, id int64, user string, opts client.Options) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	opts.Timeout = within
	conn, err := client.DialV2(ctx, []string{c.addr(id)}, user, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitChat waits for a chat message matching ok on conn, skipping others
// and receipts.
func waitChat(t *testing.T, conn *client.Conn, ok func(client.ChatMessage) bool) client.ChatMessage {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, open := <-conn.Events():
			if !open {
				t.Fatalf("connection of %s ended: %v", conn.User(), conn.Err())
			}
			if m, isChat := ev.(client.ChatMessage); isChat && ok(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("%s: no matching chat message within %v", conn.User(), within)
		}
	}
}

// line is a raw line-mode connection, as the original client is.
type line struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialLine(t *testing.T, addr string) *line {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &line{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<20)}
}

func (l *line) send(s string) {
	l.t.Helper()
	if _, err := l.nc.Write([]byte(s + "\n")); err != nil {
		l.t.Fatal(err)
	}
}

func (l *line) read() string {
	l.t.Helper()
	_ = l.nc.SetReadDeadline(time.Now().Add(within))
	s, err := l.br.ReadString('\n')
	if err != nil {
		l.t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(s, "\n")
}

func (l *line) expect(want string) {
	l.t.Helper()
	if got := l.read(); got != want {
		l.t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// untilClosed reads until the server closes the connection.
func (l *line) untilClosed() []string {
	l.t.Helper()
	var out []string
	_ = l.nc.SetReadDeadline(time.Now().Add(within))
	for {
		s, err := l.br.ReadString('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				l.t.Fatalf("not closed; got %q", out)
			}
			return out
		}
		out = append(out, strings.TrimSuffix(s, "\n"))
	}
}

var sentAt = regexp.MustCompile(`"sentAt":"[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2}:\d{2} [AP]M"`)

// TestChat runs the chat service end to end on five ringnode processes and
// MariaDB: protocol 1 exactly as the original client speaks it, groups
// across nodes, offline delivery at another node, protocol-2 redelivery
// after a reconnect, bad input while others chat, 500 clients on one
// node, and a crashed node's users logging in elsewhere. The scenarios
// share one ring, in this order (the last one kills node 5).
func TestChat(t *testing.T) {
	c := startChatRing(t)
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *chatRing)
	}{
		{"OriginalClient", chatOriginalClient},
		{"GroupOrderAcrossNodes", chatGroupOrderAcrossNodes},
		{"OfflineAtAnotherNode", chatOfflineAtAnotherNode},
		{"ReconnectRedelivery", chatReconnectRedelivery},
		{"BadInputWhileOthersChat", chatBadInputWhileOthersChat},
		{"FiveHundredClientsOnOneNode", chatFiveHundredClientsOnOneNode},
		{"CrashedNodeUsersLogInElsewhere", chatCrashedNodeUsersLogInElsewhere},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, c) })
	}
}

// sendWait sends text to `to` from conn and waits for its STORED receipt.
func sendWait(t *testing.T, conn *client.Conn, to client.Recipient, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := conn.SendWait(ctx, to, text); err != nil {
		t.Fatal(err)
	}
}

// nextChat waits for the next chat message on conn.
func nextChat(t *testing.T, conn *client.Conn) client.ChatMessage {
	t.Helper()
	return waitChat(t, conn, func(client.ChatMessage) bool { return true })
}

// chatOriginalClient: protocol 1 exactly as the original client speaks it,
// direct and group messages between two nodes, errors, and one login per
// name across the ring.
func chatOriginalClient(t *testing.T, c *chatRing) {
	alice, bob := dialLine(t, c.addr(1)), dialLine(t, c.addr(4))
	alice.send(`{"username":"alice","messageType":"LOGIN"}`)
	alice.expect(`{"messageType":"LOGIN","username":"alice"}`)
	bob.send(`{"username":"bob","messageType":"LOGIN"}`)
	bob.expect(`{"messageType":"LOGIN","username":"bob"}`)
	for _, l := range []*line{alice, bob} {
		l.send(`{"group":"coolguys","messageType":"JOIN_GROUP"}`)
		l.expect(`{"messageType":"JOIN_GROUP","group":"coolguys"}`)
	}
	alice.send(`{"sentAt":{"seconds":1556146749,"nanos":290000000},"fromName":"someone","toName":"bob","messageContent":"hey man you're cool too.","forGroup":false,"messageType":"CHAT_MESSAGE"}`)
	got := sentAt.ReplaceAllString(bob.read(), `"sentAt":"*"`)
	if got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","messageContent":"hey man you're cool too.","sentAt":"*"}` {
		t.Errorf("direct: %s", got)
	}
	alice.send(`{"messageType":"CHAT_MESSAGE","fromName":"alice","toGroup":"coolguys","messageContent":"hey everyone","sentAt":"Apr 25, 2019, 4:55:53 PM"}`)
	got = sentAt.ReplaceAllString(bob.read(), `"sentAt":"*"`)
	if got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","toGroup":"coolguys","messageContent":"hey everyone","sentAt":"*"}` {
		t.Errorf("group: %s", got)
	}
	// The sender is shown its own group message, named to itself: the
	// original client's confirmation that it went out.
	got = sentAt.ReplaceAllString(alice.read(), `"sentAt":"*"`)
	if got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"alice","toGroup":"coolguys","messageContent":"hey everyone","sentAt":"*"}` {
		t.Errorf("group, to its sender: %s", got)
	}
	alice.send(`{"messageType":"ALIVE"}`)
	alice.send(`{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"nobody","messageContent":"x"}`)
	alice.expect(`{"messageType":"ERROR","errorMessage":"no user \"nobody\" (a user exists once they have logged in)"}`)
	bob.send(`{"group":"coolguys","messageType":"LEAVE_GROUP"}`)
	bob.expect(`{"messageType":"LEAVE_GROUP","group":"coolguys"}`)
	// Logged in once across the ring.
	again := dialLine(t, c.addr(2))
	again.send(`{"username":"alice","messageType":"LOGIN"}`)
	again.expect(`{"messageType":"ERROR","errorMessage":"user \"alice\" is already logged in at node 1"}`)
}

// chatGroupOrderAcrossNodes: two senders on two nodes write to a group at
// once; its members on two other nodes see one order.
func chatGroupOrderAcrossNodes(t *testing.T, c *chatRing) {
	members := map[string]*client.Conn{}
	for i, name := range []string{"gm1", "gm2", "gm3", "gm4"} {
		conn := c.v2(t, int64(i+1), name, client.Options{AutoAck: true})
		cctx, cancel := context.WithTimeout(context.Background(), within)
		if err := conn.Join(cctx, "order"); err != nil {
			t.Fatal(err)
		}
		cancel()
		members[name] = conn
	}
	const each = 15
	var wg sync.WaitGroup
	for _, sender := range []string{"gm1", "gm2"} {
		wg.Go(func() {
			for i := range each {
				cctx, cancel := context.WithTimeout(context.Background(), within)
				_, err := members[sender].SendWait(cctx, client.ToGroup("order"), fmt.Sprintf("%s-%d", sender, i))
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var orders [][]string
	for _, name := range []string{"gm3", "gm4"} {
		var seen []string
		for len(seen) < 2*each {
			seen = append(seen, nextChat(t, members[name]).Content)
		}
		orders = append(orders, seen)
	}
	if !slices.Equal(orders[0], orders[1]) {
		t.Fatalf("members on different nodes saw different orders:\n%v\n%v", orders[0], orders[1])
	}
}

// chatOfflineAtAnotherNode: messages to a user who logged out are
// delivered, in order, when they log in at another node.
func chatOfflineAtAnotherNode(t *testing.T, c *chatRing) {
	carol := c.v2(t, 2, "carol", client.Options{AutoAck: true})
	carol.Close()
	dave := c.v2(t, 3, "dave", client.Options{AutoAck: true})
	for i := range 3 {
		sendWait(t, dave, client.ToUser("carol"), fmt.Sprint("while you were out ", i))
	}
	back := c.v2(t, 5, "carol", client.Options{AutoAck: true})
	for i := range 3 {
		m := nextChat(t, back)
		if m.Content != fmt.Sprint("while you were out ", i) || m.From != "dave" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
}

// chatReconnectRedelivery: protocol 2 delivers again what was not
// acknowledged, at another node, in order; a client that remembers the ids
// acknowledges and drops the duplicates.
func chatReconnectRedelivery(t *testing.T, c *chatRing) {
	seen := client.NewSeen(0)
	erin := c.v2(t, 1, "erin", client.Options{Seen: seen})
	frank := c.v2(t, 2, "frank", client.Options{AutoAck: true})
	for i := range 4 {
		sendWait(t, frank, client.ToUser("erin"), fmt.Sprint("r", i))
	}
	var first []client.ChatMessage
	for range 4 {
		first = append(first, nextChat(t, erin))
	}
	cctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := erin.Ack(cctx, first[0].ID); err != nil { // only the first
		t.Fatal(err)
	}
	// An ACK has no answer: wait until the store has it, or the login
	// below could make the first message pending again before it lands.
	testutil.Eventually(t, within, "the first message acknowledged", func() bool { return storetest.PendingFor(t, c.st, "erin") == 3 })
	erin.Close()
	// A fresh client (no memory of ids) at another node gets the three
	// unacknowledged messages again, in order.
	again := c.v2(t, 4, "erin", client.Options{})
	for i := 1; i < 4; i++ {
		m := nextChat(t, again)
		if m.ID != first[i].ID || m.Content != fmt.Sprint("r", i) {
			t.Fatalf("redelivery %d: %+v, want %+v", i, m, first[i])
		}
	}
	again.Close()
	// A client that remembers them (same Seen) acknowledges and drops the
	// duplicates.
	third := c.v2(t, 3, "erin", client.Options{Seen: seen})
	testutil.Eventually(t, within, "duplicates acknowledged", func() bool { return storetest.PendingFor(t, c.st, "erin") == 0 })
	if _, err := frank.SendWait(cctx, client.ToUser("erin"), "new"); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, third); m.Content != "new" {
		t.Fatalf("got %+v, want only the new message", m)
	}
}

// chatBadInputWhileOthersChat: malformed, oversized, hostile and flooding
// input on one node is refused line by line while two users there chat,
// and their chat loses and reorders nothing.
func chatBadInputWhileOthersChat(t *testing.T, c *chatRing) {
	ctx := context.Background()
	gina := c.v2(t, 2, "gina", client.Options{AutoAck: true})
	hank := c.v2(t, 2, "hank", client.Options{AutoAck: true})
	const n = 40
	received := collectChats(hank, n)
	sendDone := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := gina.Post(ctx, client.ToUser("hank"), fmt.Sprint("m", i)); err != nil {
				sendDone <- err
				return
			}
		}
		sendDone <- nil
	}()
	badInput(t, c.addr(2))
	if err := <-sendDone; err != nil {
		t.Fatal(err)
	}
	got := <-received
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint("m", i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the chat beside the bad input lost or reordered messages:\n%v", got)
	}
	err := c.st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.UserByName("x'); DROP TABLE users; --")
		return err
	})
	if err != nil {
		t.Errorf("the SQL-looking name was not stored verbatim: %v", err)
	}
}

// collectChats gathers the contents of the next n chat messages on conn;
// fewer if the connection ends or none comes for a while.
func collectChats(conn *client.Conn, n int) <-chan []string {
	received := make(chan []string, 1)
	go func() {
		var got []string
		for len(got) < n {
			select {
			case ev, ok := <-conn.Events():
				if !ok {
					received <- got
					return
				}
				if m, isChat := ev.(client.ChatMessage); isChat {
					got = append(got, m.Content)
				}
			case <-time.After(within):
				received <- got
				return
			}
		}
		received <- got
	}()
	return received
}

// badInput sends a node's client port bad input on line connections: each
// refused with its reason; a line over the limit and a flood close the
// connection.
func badInput(t *testing.T, addr string) {
	bad := dialLine(t, addr)
	for _, tc := range []struct{ in, want string }{
		{`{"messageType":"CHAT_MESSAGE","toUsername":"hank","messageContent":"x"}`, "log in first"},
		{`{{{{`, "malformed JSON"},
		{`{"messageType":"SELF_DESTRUCT"}`, "unknown messageType"},
		{`{"messageType":"LOGIN","username":"` + strings.Repeat("n", 40) + `"}`, "over the limit of 32"},
	} {
		bad.send(tc.in)
		if got := bad.read(); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %s, want %q", tc.in, got, tc.want)
		}
	}
	bad.send(`{"messageType":"LOGIN","username":"x'); DROP TABLE users; --"}`)
	bad.expect(`{"messageType":"LOGIN","username":"x'); DROP TABLE users; --"}`)
	bad.send(`{"messageType":"CHAT_MESSAGE","toUsername":"hank","messageContent":"` + strings.Repeat("z", 5000) + `"}`)
	if got := bad.read(); !strings.Contains(got, "over the limit of 4096") {
		t.Errorf("long content: %s", got)
	}
	bad.send(strings.Repeat("x", 70<<10))
	if got := bad.untilClosed(); len(got) != 1 || !strings.Contains(got[0], "line longer than 65536 bytes") {
		t.Errorf("long line: %q", got)
	}
	flood := dialLine(t, addr)
	flood.send(strings.TrimSuffix(strings.Repeat(`{"messageType":"ALIVE"}`+"\n", 2000), "\n"))
	// RATE_LIMITED when the dropping starts (again after a line got
	// through), FLOOD last.
	if got := flood.untilClosed(); len(got) < 2 || !strings.Contains(got[0], "lines are dropped") ||
		!strings.Contains(got[len(got)-1], "refused in a row") {
		t.Errorf("flood: %q", got)
	}
}

// chatFiveHundredClientsOnOneNode: 500 clients log in at one node and each
// gets the message the one before it sends.
func chatFiveHundredClientsOnOneNode(t *testing.T, c *chatRing) {
	const n = 500
	start := time.Now()
	conns := loginMany(t, c.addr(3), n)
	if t.Failed() {
		return
	}
	loggedIn := time.Since(start)
	var got atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf("from u%03d", (i+n-1)%n)
			waitChat(t, conns[i], func(m client.ChatMessage) bool { return m.Content == want })
			got.Add(1)
		})
	}
	sent := time.Now()
	for i := range n {
		if _, err := conns[i].Post(context.Background(), client.ToUser(fmt.Sprintf("u%03d", (i+1)%n)), fmt.Sprintf("from u%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	t.Logf("%d clients logged in at one node in %v; %d messages among them delivered in %v", n, loggedIn.Round(time.Millisecond),
		got.Load(), time.Since(sent).Round(time.Millisecond))
	on, _ := c.st.Online(context.Background())
	at3 := 0
	for _, p := range on {
		if p.NodeID == 3 {
			at3++
		}
	}
	if at3 < n {
		t.Errorf("%d users online at node 3, want %d", at3, n)
	}
}

// loginMany logs users u000, u001... in at addr with protocol 2, 50 at a
// time; the connections close when the test ends. A login that fails is
// an error of the test, and leaves a nil connection.
func loginMany(t *testing.T, addr string, n int) []*client.Conn {
	conns := make([]*client.Conn, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			conn, err := client.DialV2(cctx, []string{addr}, fmt.Sprintf("u%03d", i), "", client.Options{AutoAck: true, Timeout: within})
			if err != nil {
				t.Error(err)
				return
			}
			conns[i] = conn
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
	})
	return conns
}

// chatCrashedNodeUsersLogInElsewhere: the users of a node killed with
// kill -9 log in at another node (their stale presence replaced) and chat.
func chatCrashedNodeUsersLogInElsewhere(t *testing.T, c *chatRing) {
	ivy := c.v2(t, 5, "ivy", client.Options{AutoAck: true})
	_ = ivy
	c.r.Kill(5)
	// Until the ring has spliced node 5 out its presence may stand; the
	// client retries, and the stale presence is replaced.
	cctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	again, err := client.DialV2(cctx, []string{c.addr(1)}, "ivy", "", client.Options{AutoAck: true, Timeout: within})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.SendWait(cctx, client.ToUser("ivy"), "alive again"); err != nil {
		t.Fatal(err)
	}
	waitChat(t, again, func(m client.ChatMessage) bool { return m.Content == "alive again" })
}
