package chat

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// countingStore counts the transactions running at once and holds each
// until release is closed.
type countingStore struct {
	store.Store
	now, peak atomic.Int64
	release   chan struct{}
}

func (c *countingStore) run(ctx context.Context) error {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	select {
	case <-c.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *countingStore) Update(ctx context.Context, _ func(store.Tx) error) error { return c.run(ctx) }
func (c *countingStore) View(ctx context.Context, _ func(store.Tx) error) error   { return c.run(ctx) }

// A storm of client transactions (logins after a restart) runs at most
// StoreSlots at once; the rest wait their turn and all complete, and one
// that cannot get a slot before its deadline fails with a clear error.
func TestClientTransactionsTakeTurns(t *testing.T) {
	inner := &countingStore{release: make(chan struct{})}
	g := newGatedStore(inner, 2)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			if i%2 == 0 {
				errs <- g.Update(ctx, nil)
			} else {
				errs <- g.View(ctx, nil)
			}
		})
	}
	eventually(t, "two transactions running", func() bool { return inner.now.Load() == 2 })
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := g.Update(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a transaction with no slot before its deadline: %v", err)
	}
	close(inner.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := inner.peak.Load(); p != 2 {
		t.Fatalf("%d client transactions ran at once; want at most 2", p)
	}
}
