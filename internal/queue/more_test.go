package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// Once there is nothing to do, visits open no store transaction, with
// users logged in; work still flows afterwards, and only the nodes it
// concerns touch the store.
func TestIdleVisitsSkipStore(t *testing.T) {
	forStores(t, 3, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 3, nil)
		a := r.login(1, "a", protocol.V2)
		b := r.login(2, "b", protocol.V2)
		r.send(1, a, Recipient{Name: "b"}, "hi")
		r.rotate(2, false)
		r.acked(b)
		r.rotate(2, false)
		before := make([]Stats, 3)
		for i, n := range r.nodes {
			before[i] = n.q.Stats()
		}
		r.rotate(20, false)
		for i, n := range r.nodes {
			if d := n.q.Stats().StoreVisits - before[i].StoreVisits; d != 0 {
				t.Errorf("node %d opened %d transactions in 20 idle visits", n.id, d)
			}
		}
		r.send(2, b, Recipient{Name: "a"}, "back")
		r.rotate(2, false)
		wantContents(t, "a", a, []string{"back"})
		if d := r.nodes[2].q.Stats().StoreVisits - before[2].StoreVisits; d != 0 {
			t.Errorf("node 3, with nothing to do, opened %d transactions", d)
		}
	})
}

// App data the queue cannot read is replaced, and the node fetches to be
// safe.
func TestVisitWithBadHintFetches(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, nil)
		r.login(1, "x", protocol.V1)
		r.rotate(2, false)
		before := r.nodes[0].q.Stats().StoreVisits
		r.app = json.RawMessage(`"not ours"`)
		r.rotate(1, false)
		if r.nodes[0].q.Stats().StoreVisits == before {
			t.Error("no fetch after unreadable App data")
		}
		if r.app != nil {
			t.Errorf("App data not replaced: %s", r.app)
		}
	})
}

// A failed visit sends nothing: no receipt, no delivery; the message is
// stored by a later visit, answered once and delivered once.
func TestFailedVisitSendsNothing(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, nil)
		a := r.login(1, "a", protocol.V2)
		r.rotate(1, false)
		var failing atomic.Int64
		failing.Store(5)
		r.fenced = func(_ int64, f store.Fence, fn func(store.Tx) error) error {
			if failing.Add(-1) >= 0 {
				return fmt.Errorf("injected: %w", store.ErrFenced)
			}
			return r.st.Fenced(context.Background(), f, fn)
		}
		r.send(1, a, Recipient{Name: "a"}, "survives")
		for range 5 {
			if _, err := r.visit(1); err == nil {
				t.Fatal("an injected failure did not fail the visit")
			}
			if len(a.takeReceipts()) != 0 || len(a.contents()) != 0 {
				t.Fatal("a failed visit sent something")
			}
		}
		r.rotate(2, false)
		if rs := a.takeReceipts(); len(rs) != 1 {
			t.Fatalf("receipts %+v", rs)
		}
		wantContents(t, "a", a, []string{"survives"})
		if f := r.nodes[0].q.Stats().FailedVisits; f != 5 {
			t.Errorf("failed visits %d, want 5", f)
		}
	})
}

// A fetch of every user that reads them a slice at a time (FetchLimit 4,
// as after failures) goes on to the next slice even when one slice had
// nothing, until every user was read: a message for a user in a later
// slice is not left for the safety fetch.
func TestFetchSlicesReachEveryUser(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, func(c *Config) { c.FetchLimit = 4 })
		a := r.login(1, "a", protocol.V2)
		var users []*fakeSession
		for i := range 12 {
			users = append(users, r.login(1, fmt.Sprintf("u%02d", i), protocol.V2))
		}
		r.rotate(2, false)
		for i := len(users) - 1; i >= 0; i-- {
			// Stored elsewhere: the hint names node 1 for everyone.
			r.insertFor(a.user, users[i].user, 1, fmt.Sprintf("to u%02d ", i))
		}
		r.nodes[0].q.FetchAll()
		r.rotate(12, false)
		for i, u := range users {
			wantContents(t, fmt.Sprintf("u%02d", i), u, []string{fmt.Sprintf("to u%02d 0", i)})
		}
	})
}

// Messages past the retention that everyone has are pruned by the visits,
// a slice at a time, while the node chats on; a message still awaited is
// kept, and no visit fails.
func TestVisitsPruneOldHistory(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, func(c *Config) { c.Retention, c.PruneInterval = time.Millisecond, 10*time.Millisecond })
		r.nodes[0].q.v.lastPrune = time.Time{} // not a minute after start
		a := r.login(1, "a", protocol.V2)
		b := r.login(1, "b", protocol.V2)
		c := r.login(1, "c", protocol.V2)
		r.rotate(1, false)
		c.mu.Lock()
		c.gone = true
		c.mu.Unlock()
		r.nodes[0].sessions.mu.Lock()
		delete(r.nodes[0].sessions.sessions, c.user) // logged out: its message waits
		r.nodes[0].sessions.mu.Unlock()
		const n = 150
		for k := range n {
			r.send(1, a, Recipient{Name: "b"}, fmt.Sprintf("m%d", k))
		}
		r.send(1, a, Recipient{Name: "c"}, "for c, offline")
		r.rotate(3, false)
		if got := len(b.contents()); got != n {
			t.Fatalf("b got %d of %d", got, n)
		}
		r.acked(b)
		history := func(x, y *fakeSession) []store.Message {
			var ms []store.Message
			if err := r.st.View(context.Background(), func(tx store.Tx) error {
				var err error
				ms, err = tx.History(store.Conversation{UserA: x.user, UserB: y.user}, 1000)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return ms
		}
		// A node prunes in visits that have other work: a chats on, to
		// itself.
		deadline := time.Now().Add(10 * time.Second)
		for k := 0; len(history(a, b)) > 0; k++ {
			if time.Now().After(deadline) {
				t.Fatalf("%d messages of a and b left", len(history(a, b)))
			}
			r.send(1, a, Recipient{Name: "a"}, fmt.Sprintf("tick%d", k))
			r.rotate(1, false)
			r.acked(a)
		}
		if ms := history(a, c); len(ms) != 1 || ms[0].Content != "for c, offline" {
			t.Fatalf("the awaited message was not kept: %v", ms)
		}
		if s := r.nodes[0].q.Stats(); s.FailedVisits != 0 || s.Pruned < n {
			t.Errorf("stats %+v: want no failed visit, %d pruned at least", s, n)
		}
	})
}

// cutTx stops reads of several users' pending messages, and a single
// user's marks, made under Tx.Bound, as MariaDB stops a statement at its
// share of the visit's budget.
type cutTx struct {
	store.Tx
	cuts, marks *atomic.Int64
	bound       bool
	users       int
}

func (t *cutTx) Bound(until time.Time) func() {
	unbound := t.Tx.Bound(until)
	t.bound = true
	return func() { t.bound = false; unbound() }
}

func (t *cutTx) PendingFor(node int64, users []int64, perUser, limit int) ([]store.Delivery, error) {
	t.users = len(users)
	if t.bound && len(users) > 1 && t.cuts.Add(-1) >= 0 {
		return nil, fmt.Errorf("store: pending messages: %w", store.ErrOverBudget)
	}
	return t.Tx.PendingFor(node, users, perUser, limit)
}

func (t *cutTx) MarkDeliveredRows(node int64, rows []store.RecipientSeq) ([]store.RecipientSeq, int64, error) {
	if t.bound && t.users == 1 && t.marks.Add(-1) >= 0 {
		return nil, 0, fmt.Errorf("store: mark delivered: %w", store.ErrOverBudget)
	}
	return t.Tx.MarkDeliveredRows(node, rows)
}

// A fetch that runs over its share of the visit (several users' read, or
// a single user's marks) is dropped, not the visit: the message stored in
// it is answered at once, no visit fails, and the recipients get it from a
// smaller fetch.
func TestFetchOverItsShareIsDroppedNotTheVisit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		members     int
		cuts, marks int64
	}{{"several", 4, 3, 0}, {"single", 2, 0, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			forStores(t, 1, func(t *testing.T, st store.Store) {
				r := newTestRing(t, st, 1, nil)
				var cuts, marks atomic.Int64
				var members []*fakeSession
				for i := range tc.members {
					members = append(members, r.login(1, fmt.Sprintf("m%d", i), protocol.V2))
				}
				r.join("lab", members...)
				r.rotate(1, false)
				cuts.Store(tc.cuts)
				marks.Store(tc.marks)
				r.fenced = func(_ int64, f store.Fence, fn func(store.Tx) error) error {
					return r.st.Fenced(context.Background(), f, func(tx store.Tx) error { return fn(&cutTx{Tx: tx, cuts: &cuts, marks: &marks}) })
				}
				to := Recipient{Name: "lab", Group: true}
				if tc.members == 2 {
					to = Recipient{Name: "m1"}
				}
				r.send(1, members[0], to, "hello")
				if _, err := r.visit(1); err != nil {
					t.Fatal(err)
				}
				if rs := members[0].takeReceipts(); len(rs) != 1 || rs[0].Seq == 0 {
					t.Fatalf("receipts after the cut visit: %+v", rs)
				}
				got := func() bool {
					for _, m := range members[1:] {
						if len(m.contents()) == 0 {
							return false
						}
					}
					return true
				}
				for i := 0; i < 50 && !got(); i++ { // smaller fetches take turns
					r.rotate(1, false)
				}
				for _, m := range members[1:] {
					wantContents(t, "a member", m, []string{"hello"})
				}
				s := r.nodes[0].q.Stats()
				if s.FailedVisits != 0 {
					t.Errorf("%d visits failed", s.FailedVisits)
				}
				if s.FetchesCut != uint64(tc.cuts+tc.marks) || cuts.Load() >= 0 && tc.cuts > 0 || marks.Load() >= 0 && tc.marks > 0 {
					t.Errorf("%d fetches cut (cuts left %d, marks left %d), want %d", s.FetchesCut, cuts.Load(), marks.Load(), tc.cuts+tc.marks)
				}
			})
		})
	}
}

// A fetch cut at its share because the visit had little time left (a wait
// for the fence's lock, held by a node whose visit failed on a lossy
// link, took the rest) keeps its size once, so the next visit delivers
// to every member; a second such cut in a row shrinks it, so a fetch too
// big for a small budget still gets smaller. With the size quartered at
// the first cut, the next visit reached one member of three (seen at 20 %
// loss on one node: its successor's users waited 2 s for what was
// stored).
func TestFetchCutForLackOfTimeKeepsItsSize(t *testing.T) {
	forStores(t, 1, func(t *testing.T, st store.Store) {
		r := newTestRing(t, st, 1, nil)
		var cuts, marks atomic.Int64
		var members []*fakeSession
		for i := range 4 {
			members = append(members, r.login(1, fmt.Sprintf("m%d", i), protocol.V2))
		}
		r.join("lab", members...)
		r.rotate(1, false)
		q := r.nodes[0].q
		size := q.v.fetchMax
		r.fenced = func(_ int64, f store.Fence, fn func(store.Tx) error) error {
			return r.st.Fenced(context.Background(), f, func(tx store.Tx) error { return fn(&cutTx{Tx: tx, cuts: &cuts, marks: &marks}) })
		}
		// The visit's budget is 20 ms: its fetch has at most 12 ms, less
		// than shortFetch, whatever the machine's speed.
		r.budget = 20 * time.Millisecond
		cuts.Store(1)
		r.send(1, members[0], Recipient{Name: "lab", Group: true}, "hello")
		if _, err := r.visit(1); err != nil {
			t.Fatal(err)
		}
		if s := q.Stats(); s.FetchesCut != 1 || q.v.fetchMax != size {
			t.Fatalf("after a cut with little time: %d fetches cut, size %d, want 1 and %d (kept)", s.FetchesCut, q.v.fetchMax, size)
		}
		r.budget = 0
		if _, err := r.visit(1); err != nil {
			t.Fatal(err)
		}
		for _, m := range members[1:] {
			wantContents(t, "a member, one visit after the cut", m, []string{"hello"})
		}
		// Two such cuts in a row: the second shrinks the fetch.
		r.budget = 20 * time.Millisecond
		cuts.Store(2)
		r.send(1, members[0], Recipient{Name: "lab", Group: true}, "again")
		for range 2 {
			if _, err := r.visit(1); err != nil {
				t.Fatal(err)
			}
		}
		if s := q.Stats(); s.FetchesCut != 3 || q.v.fetchMax >= size {
			t.Errorf("after two cuts in a row: %d fetches cut, size %d, want 3 and less than %d", s.FetchesCut, q.v.fetchMax, size)
		}
	})
}
