package chaos

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// A ring of nodes 1-3 in an embedded store, coordinated by node 3, with a
// token generation made.
func ringStore(t *testing.T) (store.Store, store.Coordinator) {
	t.Helper()
	ctx := context.Background()
	d, err := store.ParseDSN("sqlite:" + filepath.Join(t.TempDir(), "ring.db"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []nodelist.Entry{{ID: 1, Host: "127.0.0.1", CoordPort: 1, ClientPort: 2},
		{ID: 2, Host: "127.0.0.1", CoordPort: 3, ClientPort: 4}, {ID: 3, Host: "127.0.0.1", CoordPort: 5, ClientPort: 6}}
	st, _, err := store.Prepare(ctx, d, nodes, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	epoch, err := st.ClaimCoordinator(ctx, 3, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	coord := store.Coordinator{NodeID: 3, Epoch: epoch}
	if err := st.SetSuccessors(ctx, coord, []store.SuccessorChange{{NodeID: 1, Successor: 2}, {NodeID: 2, Successor: 3}, {NodeID: 3, Successor: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.NewGeneration(ctx, coord); err != nil {
		t.Fatal(err)
	}
	return st, coord
}

// hops advances the token fence as holders would, every few milliseconds,
// until ctx ends.
func hops(ctx context.Context, t *testing.T, st store.Store, gen int64) {
	for seq := int64(1); ctx.Err() == nil; seq++ {
		err := st.Fenced(ctx, store.Fence{Generation: gen, Seq: seq, Holder: 1 + seq%3}, func(store.Tx) error { return nil })
		if err != nil && ctx.Err() == nil {
			t.Errorf("fence %d/%d: %v", gen, seq, err)
			return
		}
		wait(ctx, 5*time.Millisecond)
	}
}

func TestSettledWaitsForTheTokenToMove(t *testing.T) {
	st, _ := ringStore(t)
	o := &observer{st: st, poll: 5 * time.Millisecond}
	ctx := context.Background()
	// Right ring, but no token moves: not settled.
	_, err := o.settled(ctx, []int64{1, 2, 3}, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("a still token settled: %v", err)
	}
	f, _ := st.Fence(ctx)
	hctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); hops(hctx, t, st, f.Generation) }()
	defer func() { stop(); <-done }()
	start := time.Now()
	rep, err := o.settled(ctx, []int64{1, 2, 3}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moving.Before(start) || rep.Settled.Before(rep.Moving) || len(rep.State.order) != 3 {
		t.Errorf("repair %+v", rep)
	}
	// Node 2 is dead but still in the store's ring: not settled.
	_, err = o.settled(ctx, []int64{1, 3}, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "live nodes [1 3]") {
		t.Errorf("a ring with a dead node settled: %v", err)
	}
}

func TestSettledNeedsALiveCoordinator(t *testing.T) {
	st, coord := ringStore(t)
	ctx := context.Background()
	// Node 3 leaves the ring; the coordinator row still names it.
	if err := st.SetSuccessors(ctx, coord, []store.SuccessorChange{{NodeID: 2, Successor: 1}, {NodeID: 3, Successor: 0}}); err != nil {
		t.Fatal(err)
	}
	o := &observer{st: st, poll: 5 * time.Millisecond}
	_, err := o.settled(ctx, []int64{1, 2}, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "coordinator 3") {
		t.Errorf("a ring without a live coordinator settled: %v", err)
	}
}
