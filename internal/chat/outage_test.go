package chat

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// outageErrs are what a store that went away answers: none is about the
// data of the work that meets it.
var outageErrs = []error{
	&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
	fmt.Errorf("store: insert messages: %w", driver.ErrBadConn),
	fmt.Errorf("store: insert messages: %w", mysql.ErrInvalidConn),
	fmt.Errorf("store: fenced: %w", context.DeadlineExceeded),
	&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded},
	&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
	&mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"},
	fmt.Errorf("%w: cannot reach MariaDB at 127.0.0.1:3306: connection refused", store.ErrUnavailable),
}

// outageStore is a store that goes away while down is set, in one of two
// ways: every transaction fails at once (a server that refuses
// connections), or, when partial, an empty fenced transaction commits but
// every one that stores a message fails (connections that break under
// work, a Galera member failing over). Once armed, it goes down in the
// middle of the next transaction that stores messages, failing it, with
// an error about the data if dataErr is set (and the store's error
// after).
type outageStore struct {
	store.Store
	down    atomic.Bool
	armed   atomic.Bool
	partial bool
	dataErr bool
	downAt  atomic.Int64 // unix nanoseconds
	failed  atomic.Int64 // transactions failed by the outage
}

func (o *outageStore) cause() error {
	return outageErrs[int(o.failed.Add(1)-1)%len(outageErrs)]
}

func (o *outageStore) Fenced(ctx context.Context, f store.Fence, fn func(store.Tx) error) error {
	if o.down.Load() && !o.partial {
		return o.cause()
	}
	return o.Store.Fenced(ctx, f, func(tx store.Tx) error { return fn(outageTx{tx, o}) })
}

func (o *outageStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if o.down.Load() && !o.partial {
		return o.cause()
	}
	return o.Store.Update(ctx, fn)
}

func (o *outageStore) View(ctx context.Context, fn func(store.Tx) error) error {
	if o.down.Load() && !o.partial {
		return o.cause()
	}
	return o.Store.View(ctx, fn)
}

type outageTx struct {
	store.Tx
	o *outageStore
}

func (t outageTx) InsertMessages(ms []store.NewMessage, rcpts [][]int64) ([]store.Inserted, error) {
	if t.o.armed.CompareAndSwap(true, false) {
		t.o.downAt.Store(time.Now().UnixNano())
		t.o.down.Store(true)
		if t.o.dataErr {
			return nil, fmt.Errorf("store: insert messages: %w", &mysql.MySQLError{Number: 1366, Message: "Incorrect string value for column `content`"})
		}
	}
	if t.o.down.Load() {
		return nil, t.o.cause()
	}
	return t.Tx.InsertMessages(ms, rcpts)
}

// A message in flight when the store goes away is kept, however long the
// store stays away and whatever it answers meanwhile, and stored once it
// is back: STORED to its protocol-2 sender, no ERROR to either sender,
// delivered once, nothing set aside. The outage lasts many times
// PoisonStreak and many failed visits, with the message alone in them.
func TestStoreOutageNeverSetsAMessageAside(t *testing.T) {
	for _, c := range []struct {
		name    string
		partial bool
		data    bool
	}{
		{"refused", false, false},
		// One data error first makes the message the suspect; then the
		// probes' empty transactions commit while the message's fail:
		// the store's failures, not the message's.
		{"work fails while the store takes empty transactions", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &outageStore{Store: newStore(t, 2), partial: c.partial, dataErr: c.data}
			streak := 100 * time.Millisecond
			r := newRingOn(t, st, 2, func(cfg *Config) { cfg.PoisonStreak = streak })
			outageKeeps(t, r, st, streak)
		})
	}
}

// outageKeeps has node 1 accept a protocol-1 and a protocol-2 message to
// a user at node 2, the store go away in the middle of the visit that
// stores them, and come back once the outage has lasted long enough to set
// work aside; then it checks each message arrives once, with no error.
func outageKeeps(t *testing.T, r *testRing, st *outageStore, streak time.Duration) {
	ctx := ctxT(t)
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	p := dialRaw(t, r.addr(1))
	p.login("p")
	r.failVisits(1, 1<<30) // node 1 holds the messages until both are in
	p.send(chatTo("b", "kept v1"))
	id, err := a.Post(ctx, client.ToUser("b"), "kept v2")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both messages accepted at node 1", func() bool {
		return r.servers[0].Stats().OutboxLen == 2
	})
	st.armed.Store(true)
	r.failVisits(1, 0)
	eventually(t, "a long outage, the messages alone in failed visits", func() bool {
		at := st.downAt.Load()
		return at != 0 && st.failed.Load() >= 10*poisonAfter && time.Since(time.Unix(0, at)) >= 5*streak
	})
	down := time.Unix(0, st.downAt.Load())
	if s := r.servers[0].Stats(); s.Poisoned != 0 || s.Stored != 0 {
		t.Fatalf("during the outage: %d set aside, %d stored", s.Poisoned, s.Stored)
	}
	st.down.Store(false)
	waitStored(t, a, id)
	// The protocol-1 sender's next line is its own message to itself: no
	// ERROR came before it.
	p.send(chatTo("p", "after"))
	if m := p.obj(); m["messageType"] != "CHAT_MESSAGE" || m["messageContent"] != "after" {
		t.Fatalf("protocol-1 sender got %v, want its own message", m)
	}
	got := map[string]int{}
	for got["kept v1"] == 0 || got["kept v2"] == 0 {
		got[nextChat(t, b).Content]++
	}
	if _, err := a.SendWait(ctx, client.ToUser("b"), "last"); err != nil {
		t.Fatal(err)
	}
	for got["last"] == 0 {
		got[nextChat(t, b).Content]++
	}
	if got["kept v1"] != 1 || got["kept v2"] != 1 || len(got) != 3 {
		t.Fatalf("b got %v, want each message once", got)
	}
	if s := r.servers[0].Stats(); s.Poisoned != 0 || s.Stored != 4 {
		t.Fatalf("%d pieces of work set aside, %d messages stored; want 0 and 4", s.Poisoned, s.Stored)
	}
	t.Logf("outage: %d transactions failed over %v; healed and delivered", st.failed.Load(), time.Since(down).Round(time.Millisecond))
}

// waitStored waits for STORED for id on c, failing on an ERROR.
func waitStored(t *testing.T, c *client.Conn, id string) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev := <-c.Events():
			switch ev := ev.(type) {
			case client.Stored:
				if ev.ID == id {
					return
				}
			case client.ErrorMessage:
				t.Fatalf("error for a message in flight during an outage: %+v", ev)
			}
		case <-timeout:
			t.Fatalf("no STORED for %s", id)
		}
	}
}

// Work that fails with a data error, again and again right after the store
// took a probe, while the store stores the other messages, is set aside:
// its sender is told which message, by id (protocol 2) or by its text
// (protocol 1), and the others' messages flow.
func TestPoisonMessageSetAsideNamesTheMessage(t *testing.T) {
	st := &badMessageStore{Store: newStore(t, 2)}
	st.failing.Store(-1)
	r := newRingOn(t, st, 2, func(c *Config) { c.PoisonStreak = 100 * time.Millisecond })
	ctx := ctxT(t)
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	p := dialRaw(t, r.addr(1))
	p.login("p")
	p.send(chatTo("b", "bad"), chatTo("b", "fine v1"))
	id, err := a.Post(ctx, client.ToUser("b"), "bad")
	if err != nil {
		t.Fatal(err)
	}
	m := p.expectError("", `message "bad" to user "b" could not be stored`)
	if _, ok := m["code"]; ok {
		t.Errorf("protocol-1 error with a code: %v", m)
	}
	refusal := waitRefusal(t, a)
	if refusal.ID != id || refusal.Code != protocol.CodeNotStored || !strings.Contains(refusal.Message, id) {
		t.Fatalf("refusal %+v, want %s for %s", refusal, protocol.CodeNotStored, id)
	}
	if _, err := a.SendWait(ctx, client.ToUser("b"), "fine v2"); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for got["fine v2"] == 0 {
		got[nextChat(t, b).Content]++
	}
	if got["fine v1"] != 1 || got["bad"] != 0 {
		t.Fatalf("b got %v", got)
	}
	if n := r.servers[0].Stats().Poisoned; n != 2 {
		t.Fatalf("%d pieces of work set aside, want 2", n)
	}
}

// waitRefusal waits for the next ERROR on c, skipping receipts.
func waitRefusal(t *testing.T, c *client.Conn) client.ErrorMessage {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev := <-c.Events():
			if e, ok := ev.(client.ErrorMessage); ok {
				return e
			}
		case <-timeout:
			t.Fatal("no ERROR")
		}
	}
}
