package chat

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
)

// pendingSpy records the node and users of every PendingFor a visit runs.
type pendingSpy struct {
	store.Store
	mu    sync.Mutex
	calls []pendingCall
	gens  map[int64]int64 // node: the token generation of its last fetch
}

type pendingCall struct {
	node  int64
	users []int64
	gen   int64
	// newGen: the node's first fetch under a new token generation, which
	// reads every user by design (a hint may have been lost with the old
	// token); a loaded machine can make a new generation at any moment.
	newGen bool
}

func (c pendingCall) String() string {
	return fmt.Sprintf("{node %d users %v gen %d new %t}", c.node, c.users, c.gen, c.newGen)
}

func (p *pendingSpy) Fenced(ctx context.Context, f store.Fence, fn func(store.Tx) error) error {
	return p.Store.Fenced(ctx, f, func(tx store.Tx) error { return fn(spyTx{tx, p, f.Generation}) })
}

// take returns the calls recorded since the last take.
func (p *pendingSpy) take() []pendingCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

type spyTx struct {
	store.Tx
	p   *pendingSpy
	gen int64
}

func (t spyTx) PendingFor(node int64, users []int64, perUser, limit int) ([]store.Delivery, error) {
	t.p.mu.Lock()
	if t.p.gens == nil {
		t.p.gens = map[int64]int64{}
	}
	prev, seen := t.p.gens[node]
	t.p.gens[node] = t.gen
	t.p.calls = append(t.p.calls, pendingCall{node, slices.Clone(users), t.gen, !seen || prev != t.gen})
	t.p.mu.Unlock()
	return t.Tx.PendingFor(node, users, perUser, limit)
}

// A user logging in at a node where 30 others are logged in, with a
// backlog of 1,200 messages stored while away: every fetch until the
// backlog is drained reads that user's rows alone (not the 30 others'
// at every visit), and the backlog arrives whole and in order. Also with a
// fetch smaller than the user's share (FetchLimit 64): each fetch stops
// at its limit, and the user is read again the next visit.
func TestFetchReadsOnlyTheUsersWhoAsked(t *testing.T) {
	for _, limit := range []int{DefaultConfig(1).FetchLimit, 64} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) { testFetchReadsOnlyAsked(t, limit) })
	}
}

func testFetchReadsOnlyAsked(t *testing.T, limit int) {
	spy := &pendingSpy{Store: newStore(t, 1)}
	r := newRingOn(t, spy, 1, func(c *Config) { c.MaxClientsPerIP, c.FetchLimit = 100, limit })
	ctx := ctxT(t)
	for i := range 30 {
		dialV2(t, r.addr(1), fmt.Sprintf("u%d", i), "", client.Options{AutoAck: true})
	}
	var awayID int64
	const backlog = 1200
	if err := spy.Update(ctx, func(tx store.Tx) error {
		away, _, err := tx.EnsureUser("away")
		if err != nil {
			return err
		}
		sender, err := tx.UserByName("u0")
		if err != nil {
			return err
		}
		awayID = away.ID
		var ms []store.NewMessage
		var rcpts [][]int64
		for k := range backlog {
			ms = append(ms, store.NewMessage{ID: uuid.NewString(), SenderID: sender.ID, ToUserID: away.ID,
				Content: fmt.Sprintf("b%d", k), SentAt: time.Now(), NodeID: 1})
			rcpts = append(rcpts, []int64{away.ID})
		}
		_, err = tx.InsertMessages(ms, rcpts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The 30 logins' own fetches are over (on a loaded machine one may be
	// cut and read everyone again) once two rotations read nobody.
	eventually(t, "the logins' fetches over", func() bool {
		spy.take()
		r.rotations(2)
		return len(spy.take()) == 0
	})
	away := dialV2(t, r.addr(1), "away", "", client.Options{AutoAck: true})
	for k := range backlog {
		if m := nextChat(t, away); m.Content != fmt.Sprintf("b%d", k) {
			t.Fatalf("message %d of the backlog is %q", k, m.Content)
		}
	}
	r.rotations(2)
	calls := spy.take()
	if len(calls) < backlog/min(limit, DefaultConfig(1).FetchPerClient) {
		t.Fatalf("%d fetches for a backlog of %d", len(calls), backlog)
	}
	for _, c := range calls {
		if !c.newGen && !slices.Equal(c.users, []int64{awayID}) {
			t.Fatalf("a fetch read users %v; want only the one logging in (%d): fetches %v", c.users, awayID, calls)
		}
	}
}

// A direct message to a user of a node where 30 others are logged in is
// fetched for its recipient alone, whether it was sent from another node
// (the token's hint names the user) or from the same one; a group message
// is fetched for every user there.
func TestDirectMessageFetchesItsRecipientAlone(t *testing.T) {
	spy := &pendingSpy{Store: newStore(t, 2)}
	r := newRingOn(t, spy, 2, func(c *Config) { c.MaxClientsPerIP = 100 })
	ctx := ctxT(t)
	var here []*client.Conn
	for i := range 30 {
		here = append(here, dialV2(t, r.addr(2), fmt.Sprintf("u%d", i), "", client.Options{AutoAck: true}))
	}
	for _, c := range here[:3] {
		if err := c.Join(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
	}
	far := dialV2(t, r.addr(1), "far", "", client.Options{AutoAck: true})
	var u7 int64
	if err := spy.View(ctx, func(tx store.Tx) error {
		u, err := tx.UserByName("u7")
		u7 = u.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The logins' own fetches go a few users a visit: they are done once
	// node 2's queue has no user left to fetch for. (A rotation that read
	// no queue there was not enough: a visit may leave the asked users
	// for the next, on a loaded machine.)
	eventually(t, "the logins' fetches at node 2 done", func() bool {
		return r.servers[1].q.Stats().FetchAsked == 0
	})
	r.rotations(1)
	for _, from := range []*client.Conn{far, here[3]} {
		spy.take()
		if _, err := from.SendWait(ctx, client.ToUser("u7"), "psst from "+from.User()); err != nil {
			t.Fatal(err)
		}
		if m := nextChat(t, here[7]); m.Content != "psst from "+from.User() {
			t.Fatalf("u7 got %q", m.Content)
		}
		for _, c := range spy.take() {
			if c.node == 2 && !c.newGen && !slices.Equal(c.users, []int64{u7}) {
				t.Fatalf("a direct message from %s to u7 read the queues of %v at node 2", from.User(), c.users)
			}
		}
	}
	if err := far.Join(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	spy.take()
	if _, err := far.SendWait(ctx, client.ToGroup("lab"), "all hands"); err != nil {
		t.Fatal(err)
	}
	for _, c := range here[:3] {
		if m := nextChat(t, c); m.Content != "all hands" {
			t.Fatalf("%s got %q", c.User(), m.Content)
		}
	}
	if !slices.ContainsFunc(spy.take(), func(c pendingCall) bool { return c.node == 2 && len(c.users) == len(here) }) {
		t.Fatal("no fetch of every user at node 2 for a group message")
	}
}

// Messages past the retention that everyone has are pruned by the visits,
// a slice at a time, while the node chats on; a message still awaited is
// kept.
func TestVisitsPruneOldHistory(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.Retention, c.PruneInterval = time.Millisecond, 10*time.Millisecond })
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	go func() {
		for range a.Events() { // the receipts of what a posts
		}
	}()
	b := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	const n = 150 // more than the first slices take (under the rate limit's burst)
	for k := range n {
		if _, err := a.Post(ctx, client.ToUser("b"), fmt.Sprintf("m%d", k)); err != nil {
			t.Fatal(err)
		}
	}
	for k := range n {
		if m := nextChat(t, b); m.Content != fmt.Sprintf("m%d", k) {
			t.Fatalf("b got %q", m.Content)
		}
	}
	c := dialV2(t, r.addr(1), "c", "", client.Options{AutoAck: true})
	c.Close()
	kept, err := a.SendWait(ctx, client.ToUser("c"), "for c, offline")
	if err != nil {
		t.Fatal(err)
	}
	history := func(x, y string) []store.Message {
		var ms []store.Message
		if err := r.st.View(ctx, func(tx store.Tx) error {
			ux, err := tx.UserByName(x)
			if err != nil {
				return err
			}
			uy, err := tx.UserByName(y)
			if err != nil {
				return err
			}
			ms, err = tx.History(store.Conversation{UserA: ux.ID, UserB: uy.ID}, 1000)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	// A node prunes in visits that have other work (an idle ring does not
	// touch the store): a chats on, to itself.
	eventually(t, "the delivered history pruned", func() bool {
		if _, err := a.Post(ctx, client.ToUser("a"), "tick"); err != nil {
			t.Fatal(err)
		}
		return len(history("a", "b")) == 0
	})
	if ms := history("a", "c"); len(ms) != 1 || ms[0].ID != kept.ID {
		t.Fatalf("the awaited message was not kept: %v", ms)
	}
	if f := r.servers[0].Stats().FailedVisits; f != 0 {
		t.Errorf("%d visits failed", f)
	}
}

// A protocol-2 member's ACKs of group messages move its cursor: nothing
// stays pending, and a new session of the member gets only what is new
// (not the group's whole history again, to be deduplicated).
func TestGroupAcksMoveTheCursor(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	for _, c := range []*client.Conn{a, b} {
		if err := c.Join(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 3 {
		if _, err := a.SendWait(ctx, client.ToGroup("lab"), fmt.Sprintf("g%d", k)); err != nil {
			t.Fatal(err)
		}
		if m := nextChat(t, b); m.Content != fmt.Sprintf("g%d", k) {
			t.Fatalf("b got %q", m.Content)
		}
	}
	eventually(t, "b's group messages acknowledged in the store", func() bool { return storetest.PendingFor(t, r.st, "b") == 0 })
	b.Close()
	eventually(t, "b logged out", func() bool { return r.servers[1].Stats().Sessions == 0 })
	b2 := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "new"); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, b2); m.Content != "new" {
		t.Fatalf("b's new session got %q first, want only what is new", m.Content)
	}
}

// A fetch of every user that reads them a slice at a time (its size is
// small: here FetchLimit 4, as after failures) goes on to the next slice
// even when one slice had nothing, until every user was read: a message
// for a user in a later slice is not left for the safety fetch.
func TestFetchSlicesReachEveryUser(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.FetchLimit, c.MaxClientsPerIP = 4, 100 })
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	var users []*client.Conn
	for i := range 12 {
		users = append(users, dialV2(t, r.addr(1), fmt.Sprintf("u%02d", i), "", client.Options{AutoAck: true}))
	}
	r.rotations(2)
	for i := len(users) - 1; i >= 0; i-- {
		text := fmt.Sprintf("to u%02d", i)
		if _, err := a.SendWait(ctx, client.ToUser(fmt.Sprintf("u%02d", i)), text); err != nil {
			t.Fatal(err)
		}
		if m := nextChat(t, users[i]); m.Content != text {
			t.Fatalf("u%02d got %q", i, m.Content)
		}
	}
}
