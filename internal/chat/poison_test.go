package chat

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// poisonAfter is the queue's count of failures after a probe before a
// piece of work may be set aside.
const poisonAfter = 3

// badMessageStore fails every visit that stores a message with the content
// "bad" with a data error (while failing > 0, counting down; -1: always).
type badMessageStore struct {
	store.Store
	failing atomic.Int64
}

func (b *badMessageStore) Fenced(ctx context.Context, f store.Fence, fn func(store.Tx) error) error {
	return b.Store.Fenced(ctx, f, func(tx store.Tx) error { return fn(badMessageTx{tx, b}) })
}

type badMessageTx struct {
	store.Tx
	b *badMessageStore
}

func (t badMessageTx) InsertMessages(ms []store.NewMessage, rcpts [][]int64) ([]store.Inserted, error) {
	for _, m := range ms {
		if m.Content != "bad" {
			continue
		}
		if n := t.b.failing.Load(); n != 0 {
			if n > 0 {
				t.b.failing.Add(-1)
			}
			// An error about the data, as MariaDB gives for a string its
			// column cannot hold.
			return nil, fmt.Errorf("store: insert messages: %w", &mysql.MySQLError{Number: 1366, Message: "Incorrect string value for column `content`"})
		}
	}
	return t.Tx.InsertMessages(ms, rcpts)
}

// A message whose storing fails on its own with a data error, visit after
// visit right after the store took a probe, for longer than PoisonStreak
// is set aside: refused to its sender with NOT_STORED (not UNAVAILABLE,
// which a client answers by sending again), counted, and the node's other
// messages flow.
func TestMessageThatFailsAloneIsSetAside(t *testing.T) {
	st := &badMessageStore{Store: newStore(t, 1)}
	st.failing.Store(-1)
	r := newRingOn(t, st, 1, func(c *Config) { c.PoisonStreak = 100 * time.Millisecond })
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "bad"); err == nil {
		t.Fatal("the bad message was stored")
	} else if se := (*client.ServerError)(nil); !errors.As(err, &se) || se.Code != protocol.CodeNotStored {
		t.Fatalf("refusal %v, want %s", err, protocol.CodeNotStored)
	}
	if _, err := a.SendWait(ctx, client.ToUser("b"), "fine"); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, b); m.Content != "fine" {
		t.Fatalf("b got %q", m.Content)
	}
	if p := r.servers[0].Stats().Poisoned; p != 1 {
		t.Fatalf("%d pieces of work set aside, want 1", p)
	}
}

// A message that fails alone for less than PoisonStreak (the store busy
// for a moment) is not set aside: it waits and is stored once the store
// takes it.
func TestMessageFailingBrieflyIsStored(t *testing.T) {
	st := &badMessageStore{Store: newStore(t, 1)}
	st.failing.Store(4 * poisonAfter)
	r := newRingOn(t, st, 1, func(c *Config) { c.PoisonStreak = time.Minute })
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "bad"); err != nil {
		t.Fatalf("a message that failed %d times: %v", 4*poisonAfter, err)
	}
	if m := nextChat(t, b); m.Content != "bad" {
		t.Fatalf("b got %q", m.Content)
	}
	if n := st.failing.Load(); n != 0 {
		t.Fatalf("%d failures left: the visits never retried it", n)
	}
	if p := r.servers[0].Stats().Poisoned; p != 0 {
		t.Fatalf("%d pieces of work set aside, want none", p)
	}
}

// cutStore stops the first reads of several users' pending messages made
// under Tx.Bound, as MariaDB stops a statement at its share of the
// visit's budget.
type cutStore struct {
	store.Store
	cuts  atomic.Int64 // reads still to stop
	marks atomic.Int64 // marks of a single user's fetch still to stop
}

func (c *cutStore) Fenced(ctx context.Context, f store.Fence, fn func(store.Tx) error) error {
	return c.Store.Fenced(ctx, f, func(tx store.Tx) error { return fn(&cutTx{Tx: tx, c: c}) })
}

type cutTx struct {
	store.Tx
	c     *cutStore
	bound bool
	users int // of the last PendingFor
}

func (t *cutTx) Bound(until time.Time) func() {
	unbound := t.Tx.Bound(until)
	t.bound = true
	return func() { t.bound = false; unbound() }
}

func (t *cutTx) PendingFor(node int64, users []int64, perUser, limit int) ([]store.Delivery, error) {
	t.users = len(users)
	if t.bound && len(users) > 1 && t.c.cuts.Add(-1) >= 0 {
		return nil, fmt.Errorf("store: pending messages: %w", store.ErrOverBudget)
	}
	return t.Tx.PendingFor(node, users, perUser, limit)
}

func (t *cutTx) MarkDeliveredRows(node int64, rows []store.RecipientSeq) ([]store.RecipientSeq, int64, error) {
	if t.bound && t.users == 1 && t.c.marks.Add(-1) >= 0 {
		return nil, 0, fmt.Errorf("store: mark delivered: %w", store.ErrOverBudget)
	}
	return t.Tx.MarkDeliveredRows(node, rows)
}

// A single user's fetch whose marks run over the visit's budget (a
// backlog's batch on a busy store) is dropped, not the visit: the sender's
// message stored in it is STORED, nothing fails, and the recipient gets it
// from a smaller fetch.
func TestSingleUsersFetchOverTheBudgetIsDroppedNotTheVisit(t *testing.T) {
	st := &cutStore{Store: newStore(t, 1)}
	st.marks.Store(2)
	r := newRingOn(t, st, 2, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	if _, err := b.SendWait(ctx, client.ToUser("a"), "hello a"); err != nil {
		t.Fatal(err)
	}
	if got := nextChat(t, a); got.Content != "hello a" {
		t.Fatalf("a got %q", got.Content)
	}
	stats := r.servers[0].Stats()
	if stats.FailedVisits != 0 {
		t.Errorf("%d visits failed; a single user's fetch over the budget must not fail its visit", stats.FailedVisits)
	}
	if stats.FetchesCut != 2 || st.marks.Load() >= 0 {
		t.Errorf("%d fetches cut (%d cuts left), want 2", stats.FetchesCut, st.marks.Load())
	}
}

// A fetch of several users that runs over its share of the visit is
// dropped, not the visit: the message stored in it is STORED at once, the
// visit counts as no failure, and the members get it in a later visit.
func TestFetchOverItsShareIsDroppedNotTheVisit(t *testing.T) {
	st := &cutStore{Store: newStore(t, 1)}
	st.cuts.Store(3)
	r := newRingOn(t, st, 1, nil)
	ctx := ctxT(t)
	var members []*client.Conn
	for _, name := range []string{"a", "b", "c", "d"} {
		c := dialV2(t, r.addr(1), name, "", client.Options{AutoAck: true})
		if err := c.Join(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
		members = append(members, c)
	}
	if _, err := members[0].SendWait(ctx, client.ToGroup("lab"), "hello lab"); err != nil {
		t.Fatal(err)
	}
	for _, m := range members[1:] {
		if got := nextChat(t, m); got.Content != "hello lab" {
			t.Fatalf("%s got %q", m.User(), got.Content)
		}
	}
	stats := r.servers[0].Stats()
	if stats.FailedVisits != 0 {
		t.Errorf("%d visits failed; a fetch over its share must not fail its visit", stats.FailedVisits)
	}
	if stats.FetchesCut != 3 || st.cuts.Load() >= 0 {
		t.Errorf("%d fetches cut (%d cuts left), want 3", stats.FetchesCut, st.cuts.Load())
	}
}
