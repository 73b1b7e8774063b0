package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// Messages from node 1 to a user at node 2 and to a group with members at
// both nodes are stored in order, each answered by one receipt, delivered
// once each in order, and removed once acknowledged: a protocol-2 member by
// its ACKs, a protocol-1 one as written; a protocol-1 sender is shown its
// own group message, a protocol-2 one is not.
func TestVisitStoresDeliversAndAcks(t *testing.T) {
	forStores(t, 2, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 2, nil)
		a := r.login(1, "a", protocol.V2)
		p := r.login(1, "p", protocol.V1)
		b := r.login(2, "b", protocol.V2)
		r.join("lab", a, p, b)
		r.rotate(1, false)
		var want []string
		for k := range 100 {
			text := fmt.Sprintf("m%d", k)
			r.send(1, a, Recipient{Name: "b"}, text)
			want = append(want, text)
		}
		r.send(1, p, Recipient{Name: "lab", Group: true}, "all")
		want = append(want, "all")
		r.rotate(2, false)
		wantContents(t, "b", b, want)
		wantContents(t, "a", a, []string{"all"})
		wantContents(t, "p", p, []string{"all"}) // a protocol-1 sender sees its own group message
		receipts := a.takeReceipts()
		if len(receipts) != 100 {
			t.Fatalf("a got %d receipts for 100 messages", len(receipts))
		}
		for k, rc := range receipts {
			if rc.Unknown || rc.SetAside || rc.Msg.Content != fmt.Sprintf("m%d", k) || (k > 0 && rc.Seq <= receipts[k-1].Seq) {
				t.Fatalf("receipt %d: %+v", k, rc)
			}
		}
		if rs := p.takeReceipts(); len(rs) != 1 || rs[0].Seq == 0 {
			t.Fatalf("p's receipts %+v", rs)
		}
		for _, s := range []*fakeSession{a, p, b} {
			r.acked(s)
		}
		r.rotate(2, false)
		for name, s := range map[string]*fakeSession{"a": a, "p": p, "b": b} {
			if n := r.pending(s.user); n != 0 {
				t.Errorf("%s: %d rows left after its acknowledgements", name, n)
			}
		}
		wantContents(t, "b", b, want) // nothing came twice
		if st := r.nodes[0].q.Stats(); st.Stored != 101 || st.FailedVisits != 0 || st.OutboxLen != 0 || st.PendingAcks != 0 {
			t.Errorf("node 1 stats %+v", st)
		}
	})
}

// loseCommit makes node id's next k visits that commit work report a
// failure after the commit, as when the connection breaks during COMMIT.
func (r *ring) loseCommit(id int64, k int) *atomic.Int64 {
	left := new(atomic.Int64)
	left.Store(int64(k))
	r.fenced = func(node int64, f store.Fence, fn func(store.Tx) error) error {
		ran := false
		err := r.st.Fenced(context.Background(), f, func(tx store.Tx) error {
			err := fn(tx)
			ran = err == nil
			return err
		})
		if err == nil && ran && node == id && left.Add(-1) >= 0 {
			return fmt.Errorf("store: commit: %w", mysql.ErrInvalidConn)
		}
		return err
	}
	return left
}

// A visit whose commit reached the store but was reported failed: its
// deliveries are made pending again and delivered once, in order; its
// stored messages are stored again (found by id), answered by one receipt
// each and delivered once.
func TestLostCommitDeliversOnce(t *testing.T) {
	forStores(t, 2, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 2, nil)
		a := r.login(1, "a", protocol.V2)
		b := r.login(2, "b", protocol.V2)
		r.rotate(1, false)
		left := r.loseCommit(2, 1) // a delivery visit at node 2
		r.send(1, a, Recipient{Name: "b"}, "one")
		r.send(1, a, Recipient{Name: "b"}, "two")
		r.rotate(4, true)
		if left.Load() >= 0 {
			t.Fatal("no commit of node 2 was lost: the test tested nothing")
		}
		wantContents(t, "b", b, []string{"one", "two"})
		left = r.loseCommit(1, 1) // a storing visit at node 1
		r.send(1, a, Recipient{Name: "b"}, "three")
		r.rotate(4, true)
		if left.Load() >= 0 {
			t.Fatal("no commit of node 1 was lost: the test tested nothing")
		}
		wantContents(t, "b", b, []string{"one", "two", "three"})
		if rs := a.takeReceipts(); len(rs) != 3 {
			t.Fatalf("a got %d receipts for 3 messages: %+v", len(rs), rs)
		}
		r.acked(b)
		r.rotate(1, false)
		if n := r.pending(b.user); n != 0 {
			t.Fatalf("%d rows left for b", n)
		}
	})
}

// failingTx fails InsertMessages with err while fail says so.
type failingTx struct {
	store.Tx
	fail func(ms []store.NewMessage) error
}

func (t failingTx) InsertMessages(ms []store.NewMessage, rcpts [][]int64) ([]store.Inserted, error) {
	if err := t.fail(ms); err != nil {
		return nil, err
	}
	return t.Tx.InsertMessages(ms, rcpts)
}

// failInserts has every visit's InsertMessages ask fail first.
func (r *ring) failInserts(fail func(ms []store.NewMessage) error) {
	r.fenced = func(_ int64, f store.Fence, fn func(store.Tx) error) error {
		return r.st.Fenced(context.Background(), f, func(tx store.Tx) error { return fn(failingTx{tx, fail}) })
	}
}

var dataErr = &mysql.MySQLError{Number: 1366, Message: "Incorrect string value for column `content`"}

// A message whose storing fails alone with a data error, visit after visit
// right after the store took a probe, for longer than PoisonStreak is set
// aside: refused to its sender, counted, and the node's other messages
// flow.
func TestMessageThatFailsAloneIsSetAside(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, func(c *Config) { c.PoisonStreak = 50 * time.Millisecond })
		a := r.login(1, "a", protocol.V2)
		b := r.login(1, "b", protocol.V2)
		r.rotate(1, false)
		r.failInserts(func(ms []store.NewMessage) error {
			if slices.ContainsFunc(ms, func(m store.NewMessage) bool { return m.Content == "bad" }) {
				return fmt.Errorf("store: insert messages: %w", dataErr)
			}
			return nil
		})
		bad := r.send(1, a, Recipient{Name: "b"}, "bad")
		r.send(1, a, Recipient{Name: "b"}, "fine")
		var aside []Receipt
		deadline := time.Now().Add(10 * time.Second)
		for len(aside) == 0 && time.Now().Before(deadline) {
			r.rotate(1, true)
			for _, rc := range a.takeReceipts() {
				if rc.SetAside {
					aside = append(aside, rc)
				}
			}
		}
		if len(aside) != 1 || aside[0].Msg != bad {
			t.Fatalf("set aside %+v, want the bad message", aside)
		}
		r.rotate(2, false)
		wantContents(t, "b", b, []string{"fine"})
		if p := r.nodes[0].q.Stats().Poisoned; p != 1 {
			t.Fatalf("%d pieces of work set aside, want 1", p)
		}
	})
}

// A message that fails alone for less than PoisonStreak is not set aside:
// it waits and is stored once the store takes it.
func TestMessageFailingBrieflyIsStored(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, func(c *Config) { c.PoisonStreak = time.Minute })
		a := r.login(1, "a", protocol.V2)
		b := r.login(1, "b", protocol.V2)
		r.rotate(1, false)
		var failing atomic.Int64
		failing.Store(4 * poisonAfter)
		r.failInserts(func([]store.NewMessage) error {
			if failing.Add(-1) >= 0 {
				return fmt.Errorf("store: insert messages: %w", dataErr)
			}
			return nil
		})
		r.send(1, a, Recipient{Name: "b"}, "bad")
		for range 20 * poisonAfter {
			r.rotate(1, true)
		}
		if failing.Load() >= 0 {
			t.Fatal("the visits never retried it")
		}
		wantContents(t, "b", b, []string{"bad"})
		if rs := a.takeReceipts(); len(rs) != 1 || rs[0].SetAside {
			t.Fatalf("a's receipts %+v", rs)
		}
		if p := r.nodes[0].q.Stats().Poisoned; p != 0 {
			t.Fatalf("%d pieces of work set aside, want none", p)
		}
	})
}

// outageErrs are what a store that went away answers: none is about the
// data of the work that meets it.
var outageErrs = []error{
	fmt.Errorf("store: insert messages: %w", mysql.ErrInvalidConn),
	fmt.Errorf("store: fenced: %w", context.DeadlineExceeded),
	&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
	&mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"},
	fmt.Errorf("%w: cannot reach MariaDB at 127.0.0.1:3306: connection refused", store.ErrUnavailable),
}

// A message in flight when the store goes away is kept however long the
// store stays away (many times PoisonStreak) and whatever it answers, with
// every transaction failing or only those that store messages (the probe
// commits), and even when the outage began with a data error: once the
// store is back it is stored once, answered once, delivered once, and
// nothing is set aside.
func TestStoreOutageNeverSetsAMessageAside(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) {
			forStores(t, 2, func(t *testing.T, st store.Store) { outageKeeps(t, st, partial) })
		})
	}
}

func outageKeeps(t *testing.T, st store.Store, partial bool) {
	const streak = 20 * time.Millisecond
	r := newTestRing(t, st, 2, func(c *Config) { c.PoisonStreak = streak })
	a := r.login(1, "a", protocol.V2)
	p := r.login(1, "p", protocol.V1)
	b := r.login(2, "b", protocol.V2)
	r.rotate(1, false)
	var down atomic.Bool
	var failed atomic.Int64
	cause := func() error { return outageErrs[int(failed.Add(1)-1)%len(outageErrs)] }
	first := true
	r.fenced = func(_ int64, f store.Fence, fn func(store.Tx) error) error {
		if down.Load() && !partial {
			return cause()
		}
		return r.st.Fenced(context.Background(), f, func(tx store.Tx) error {
			return fn(failingTx{tx, func([]store.NewMessage) error {
				switch {
				case !down.Load():
					return nil
				case first: // the outage begins with an error that looks like the data's
					first = false
					return fmt.Errorf("store: insert messages: %w", dataErr)
				}
				return cause()
			}})
		})
	}
	r.send(1, p, Recipient{Name: "b"}, "kept v1")
	r.send(1, a, Recipient{Name: "b"}, "kept v2")
	down.Store(true)
	began := time.Now()
	for failed.Load() < 10*poisonAfter || time.Since(began) < 5*streak {
		r.rotate(1, true)
	}
	if s := r.nodes[0].q.Stats(); s.Poisoned != 0 || s.Stored != 0 || s.OutboxLen != 2 {
		t.Fatalf("during the outage: %+v", s)
	}
	down.Store(false)
	r.rotate(3, false)
	wantContents(t, "b", b, []string{"kept v1", "kept v2"})
	if rs := a.takeReceipts(); len(rs) != 1 || rs[0].SetAside || rs[0].Seq == 0 {
		t.Fatalf("a's receipts %+v", rs)
	}
	if rs := p.takeReceipts(); len(rs) != 1 || rs[0].SetAside || rs[0].Unknown {
		t.Fatalf("p's receipts %+v", rs)
	}
	if s := r.nodes[0].q.Stats(); s.Poisoned != 0 || s.Stored != 2 {
		t.Fatalf("after the outage: %+v", s)
	}
}

// spyTx records the users of every PendingFor a visit runs.
type spyTx struct {
	store.Tx
	calls *[][]int64
	mu    *sync.Mutex
}

func (t spyTx) PendingFor(node int64, users []int64, perUser, limit int) ([]store.Delivery, error) {
	t.mu.Lock()
	*t.calls = append(*t.calls, slices.Clone(users))
	t.mu.Unlock()
	return t.Tx.PendingFor(node, users, perUser, limit)
}

// spyFetches records the users each fetch of node 1 reads; take returns
// them since the last take.
func (r *ring) spyFetches() (take func() [][]int64) {
	var mu sync.Mutex
	var calls [][]int64
	r.fenced = func(id int64, f store.Fence, fn func(store.Tx) error) error {
		return r.st.Fenced(context.Background(), f, func(tx store.Tx) error {
			if id != 1 {
				return fn(tx)
			}
			return fn(spyTx{tx, &calls, &mu})
		})
	}
	return func() [][]int64 {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
}

// insertFor stores n messages from sender to user directly, as a visit
// elsewhere would have.
func (r *ring) insertFor(sender, user int64, n int, prefix string) {
	r.t.Helper()
	err := r.st.Update(context.Background(), func(tx store.Tx) error {
		var ms []store.NewMessage
		var rcpts [][]int64
		for k := range n {
			ms = append(ms, store.NewMessage{ID: fmt.Sprintf("%s-%d-%d", prefix, user, k), SenderID: sender, ToUserID: user,
				Content: fmt.Sprintf("%s%d", prefix, k), SentAt: time.Now(), NodeID: 2})
			rcpts = append(rcpts, []int64{user})
		}
		_, err := tx.InsertMessages(ms, rcpts)
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// With 30 users at node 1, a fetch reads only the users who asked: a user
// logging in with a backlog (read alone until it is drained, and it
// arrives whole and in order), and the recipient a hint names for a
// direct message from another node; a group message reads everyone.
func TestFetchReadsOnlyTheUsersWhoAsked(t *testing.T) {
	forStores(t, 2, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 2, func(c *Config) { c.FetchLimit = 64 })
		take := r.spyFetches()
		var here []*fakeSession
		for i := range 30 {
			here = append(here, r.login(1, fmt.Sprintf("u%d", i), protocol.V2))
		}
		far := r.login(2, "far", protocol.V2)
		r.join("lab", append(here[:3:3], far)...)
		r.rotate(2, false)
		take()
		away := r.login(1, "away", protocol.V2) // no fetch yet: the backlog comes first
		r.insertFor(far.user, away.user, 300, "b")
		r.rotate(300/64+2, false)
		for _, users := range take() {
			if !slices.Equal(users, []int64{away.user}) {
				t.Fatalf("a fetch read users %v; want only the one logging in (%d)", users, away.user)
			}
		}
		var want []string
		for k := range 300 {
			want = append(want, fmt.Sprintf("b%d", k))
		}
		wantContents(t, "away", away, want)
		r.send(2, far, Recipient{Name: "u7"}, "psst")
		r.rotate(2, false)
		for _, users := range take() {
			if !slices.Equal(users, []int64{here[7].user}) {
				t.Fatalf("a direct message to u7 read the queues of %v at node 1", users)
			}
		}
		wantContents(t, "u7", here[7], []string{"psst"})
		r.send(2, far, Recipient{Name: "lab", Group: true}, "all hands")
		r.rotate(2, false)
		if !slices.ContainsFunc(take(), func(users []int64) bool { return len(users) == 31 }) {
			t.Fatal("no fetch of every user at node 1 for a group message")
		}
		for _, s := range here[:3] {
			if got := s.contents(); got[len(got)-1] != "all hands" {
				t.Fatalf("a member got %q", got)
			}
		}
	})
}

// One user's backlog does not hold up the others: a fetch takes at most
// FetchPerClient of it, and the other user's message comes in the same
// visit; the backlog drains in order over the next visits.
func TestOneBacklogDoesNotHoldUpOthers(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, func(c *Config) { c.FetchPerClient = 10 })
		s := r.login(1, "s", protocol.V2)
		big := r.login(1, "big", protocol.V2)
		small := r.login(1, "small", protocol.V2)
		r.rotate(1, false)
		r.insertFor(s.user, big.user, 100, "b")
		r.insertFor(s.user, small.user, 1, "s")
		r.nodes[0].q.FetchAll()
		r.rotate(1, false)
		wantContents(t, "small", small, []string{"s0"})
		if n := len(big.contents()); n == 0 || n > 10 {
			t.Fatalf("big got %d messages in one fetch, want 1 to 10", n)
		}
		r.rotate(12, false)
		var want []string
		for k := range 100 {
			want = append(want, fmt.Sprintf("b%d", k))
		}
		wantContents(t, "big", big, want)
	})
}

// A session whose queue has no room gets nothing, is told so (it asks for
// a fetch when it has room), and its messages stay pending; once it asks,
// they come, once each.
func TestFullQueueWaits(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, nil)
		a := r.login(1, "a", protocol.V2)
		b := r.login(1, "b", protocol.V2)
		r.rotate(1, false)
		b.mu.Lock()
		b.room = 0
		b.mu.Unlock()
		r.send(1, a, Recipient{Name: "b"}, "hold")
		r.rotate(2, false)
		b.mu.Lock()
		starved := b.starved
		b.room = 1000
		b.mu.Unlock()
		if starved == 0 || len(b.contents()) != 0 || r.pending(b.user) != 1 {
			t.Fatalf("starved %d, got %q, %d pending", starved, b.contents(), r.pending(b.user))
		}
		r.nodes[0].q.FetchFor(b.user)
		r.rotate(2, false)
		wantContents(t, "b", b, []string{"hold"})
	})
}

// A delivery whose session is gone when the visit hands it over (the
// connection closed after the visit took its work) is made pending again,
// and the user's next session gets it, once.
func TestDeliveryToAGoneSessionComesAgain(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, nil)
		a := r.login(1, "a", protocol.V2)
		b := r.login(1, "b", protocol.V2)
		r.rotate(1, false)
		b.mu.Lock()
		b.gone = true
		b.mu.Unlock()
		r.send(1, a, Recipient{Name: "b"}, "again")
		r.rotate(1, false)
		if len(b.contents()) != 0 {
			t.Fatalf("a gone session got %q", b.contents())
		}
		// The user's next session here (its presence row stays: the rows
		// come again by the visit's unmark alone).
		b2 := &fakeSession{user: b.user, node: 1, version: protocol.V2, room: 1000}
		fs := r.nodes[0].sessions
		fs.mu.Lock()
		fs.sessions[b.user] = b2
		fs.mu.Unlock()
		r.nodes[0].q.FetchFor(b.user)
		r.rotate(3, false)
		wantContents(t, "b's new session", b2, []string{"again"})
	})
}

// Acknowledgements of ids that are not a session's open deliveries wait
// at most maxStrayAcks per user; visits look them up a bounded number at a
// time, and no visit fails.
func TestStrayAcksBounded(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, nil)
		x := r.login(1, "x", protocol.V2)
		r.rotate(1, false)
		q := r.nodes[0].q
		for i := range 5 {
			ids := make([]string, 1000)
			for j := range ids {
				ids[j] = fmt.Sprintf("stray-%d-%d", i, j)
			}
			if !q.Ack(x.user, nil, ids) {
				t.Fatal("ACKs refused")
			}
		}
		if n := q.Stats().StrayAcks; n != maxStrayAcks {
			t.Fatalf("%d stray acknowledgements wait, want %d", n, maxStrayAcks)
		}
		r.rotate(1, false)
		if n := q.Stats().PendingAcks; n != 0 {
			t.Fatalf("%d acknowledgements left after a visit", n)
		}
		if q.Ack(x.user, nil, make([]string, maxAckBacklog+1)) {
			t.Fatal("a backlog past its bound was taken")
		}
		if f := q.Stats().FailedVisits; f != 0 {
			t.Fatalf("%d visits failed", f)
		}
	})
}
