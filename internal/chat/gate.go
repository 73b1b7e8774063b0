package chat

// runs on: the connections' reader goroutines and the presence check,
// which take the slots (a buffered channel, safe for all of them).

import (
	"context"
	"fmt"

	"github.com/ringchat/ringchat/internal/store"
)

// gatedStore bounds the transactions a node runs for its clients at once,
// outside the token: logins, joins, WHO, HISTORY, presence. A storm of
// them (a thousand clients reconnecting after a restart) waits here, in
// turn, instead of crowding the store with as many transactions as there
// are clients, which made every statement of the token's visits, at every
// node, wait behind theirs. The token's critical section (Fenced) never
// waits here, and always finds a free connection in the pool: the slots
// are fewer than its connections.
type gatedStore struct {
	store.Queue
	slots chan struct{}
}

func newGatedStore(st store.Queue, n int) gatedStore {
	return gatedStore{Queue: st, slots: make(chan struct{}, n)}
}

func (g gatedStore) acquire(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("chat: all %d of this node's store slots for clients stayed busy: %w", cap(g.slots), ctx.Err())
	}
}

func (g gatedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := g.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-g.slots }()
	return g.Queue.Update(ctx, fn)
}

func (g gatedStore) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := g.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-g.slots }()
	return g.Queue.View(ctx, fn)
}
