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
)

// pendingSpy records the users of every PendingFor a visit runs.
type pendingSpy struct {
	store.Store
	mu    sync.Mutex
	calls [][]int64
}

func (p *pendingSpy) Fenced(ctx context.Context, f store.Fence, fn func(store.Tx) error) error {
	return p.Store.Fenced(ctx, f, func(tx store.Tx) error { return fn(spyTx{tx, p}) })
}

// take returns the calls recorded since the last take.
func (p *pendingSpy) take() [][]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

type spyTx struct {
	store.Tx
	p *pendingSpy
}

func (t spyTx) PendingFor(node int64, users []int64, perUser, limit int) ([]store.Delivery, error) {
	t.p.mu.Lock()
	t.p.calls = append(t.p.calls, slices.Clone(users))
	t.p.mu.Unlock()
	return t.Tx.PendingFor(node, users, perUser, limit)
}

// A user logging in at a node where 30 others are logged in, with a
// backlog of 1,200 messages stored while away: every fetch until the
// backlog is drained reads that user's rows alone (not the 30 others'
// at every visit), and the backlog arrives whole and in order.
func TestFetchReadsOnlyTheUsersWhoAsked(t *testing.T) {
	spy := &pendingSpy{Store: newStore(t, 1)}
	r := newRingOn(t, spy, 1, func(c *Config) { c.MaxClientsPerIP = 100 })
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
	r.rotations(2)
	spy.take()
	away := dialV2(t, r.addr(1), "away", "", client.Options{AutoAck: true})
	for k := range backlog {
		if m := nextChat(t, away); m.Content != fmt.Sprintf("b%d", k) {
			t.Fatalf("message %d of the backlog is %q", k, m.Content)
		}
	}
	r.rotations(2)
	calls := spy.take()
	if len(calls) < backlog/DefaultConfig(1).FetchPerClient {
		t.Fatalf("%d fetches for a backlog of %d", len(calls), backlog)
	}
	for _, users := range calls {
		if !slices.Equal(users, []int64{awayID}) {
			t.Fatalf("a fetch read users %v; want only the one logging in (%d): fetches %v", users, awayID, calls)
		}
	}
}
