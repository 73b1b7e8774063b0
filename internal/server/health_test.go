package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestRingWatch: a node is out of the ring only after it was in and has
// been out for the grace; starting and leaving are not out.
func TestRingWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := ringWatch{grace: time.Second}
	steps := []struct {
		phase ring.Phase
		joins uint64
		at    time.Duration
		out   bool
	}{
		{ring.PhaseStarting, 0, 0, false},
		{ring.PhaseJoining, 0, 5 * time.Second, false}, // never in the ring yet: starting, not out
		{ring.PhaseInRing, 1, 6 * time.Second, false},
		{ring.PhaseJoining, 1, 7 * time.Second, false},         // spliced out just now
		{ring.PhaseInRing, 2, 7500 * time.Millisecond, false},  // back within the grace
		{ring.PhaseStarting, 2, 8 * time.Second, false},        // out again: the grace starts anew
		{ring.PhaseJoining, 2, 8900 * time.Millisecond, false}, // not yet
		{ring.PhaseJoining, 2, 9 * time.Second, true},
		{ring.PhaseLeaving, 2, 10 * time.Second, false}, // stopping: SHUTTING_DOWN tells the clients
	}
	for i, s := range steps {
		if got := w.observe(s.phase, s.joins, t0.Add(s.at)); got != s.out {
			t.Fatalf("step %d (%v at %v): out %v, want %v", i, s.phase, s.at, got, s.out)
		}
	}
}

// A node that joined and was cut off before the watch saw it in the ring
// (it samples every tick) is out once the grace has passed: the node's own
// count of joins says it was in. Before, such a node was never out, and
// TestOutOfRingMovesClients failed about one run in two when run alone.
func TestRingWatchTrustsTheNodesJoins(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := ringWatch{grace: time.Second}
	if w.observe(ring.PhaseStarting, 0, t0) {
		t.Fatal("out while starting")
	}
	if w.observe(ring.PhaseJoining, 1, t0.Add(100*time.Millisecond)) {
		t.Fatal("out before the grace")
	}
	if !w.observe(ring.PhaseJoining, 1, t0.Add(1100*time.Millisecond)) {
		t.Fatal("a node that joined and was cut off before the watch saw it in the ring is never out")
	}
}

// TestOutOfRingMovesClients: a node cut from the other nodes (not from
// the store) falls out of the ring; its protocol-2 client, which named
// that node only, is told, and moves to a node it learned at login.
func TestOutOfRingMovesClients(t *testing.T) {
	c := newCluster(t, 3)
	c.coordinator()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	s, err := client.StartSession(ctx, client.SessionConfig{Addrs: []string{c.addr(2)}, User: "alice",
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := []int64{}
	for _, n := range s.Nodes() {
		ids = append(ids, n.Node)
	}
	if !slices.Equal(ids, []int64{1, 2, 3}) {
		t.Fatalf("nodes learned at login: %v", s.Nodes())
	}
	c.net.Isolate(2)
	defer c.net.Unisolate(2)
	cut := time.Now()
	var moved client.Connected
	timeout := time.After(within)
	for moved.Node == 0 {
		select {
		case ev := <-s.Events():
			switch ev := ev.(type) {
			case client.Connected:
				moved = ev
			case client.Reconnecting:
				t.Logf("reconnecting: %+v", ev)
			}
		case <-timeout:
			t.Fatalf("no move within %v", within)
		}
	}
	t.Logf("node 2 cut from the ring: moved to node %d after %v: %v", moved.Node, time.Since(cut).Round(time.Millisecond), moved.Why)
	if moved.Node == 2 || !moved.Moved() || moved.Why == nil || !strings.Contains(moved.Why.Error(), "node 2 is out of the ring") {
		t.Fatalf("moved %+v, want from node 2 for its notice", moved)
	}
	if took := time.Since(cut); took > within/2 {
		t.Fatalf("moved after %v", took)
	}
	testutil.Eventually(t, within, "node 2 still out", func() bool { return !c.servers[2].Chat().Health().OK() })
	bob, err := client.Dial(ctx, c.addr(2), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	err = bob.LoginV2(ctx, "bob", "")
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != protocol.CodeUnavailable {
		t.Fatalf("login at the node out of the ring: %v, want UNAVAILABLE", err)
	}
}

// TestHealthVerdictsDoNotWaitForThePing: the store's ping hangs (a link
// that loses packets makes it slow, up to ProbeTimeout); the node's own
// verdicts, most visits failing and then out of the ring, still reach the
// chat service within a few ticks. A ping that fails says the store is
// down, and one that answers again says it is back. When the watch ends,
// so has its prober (the package's goleak check).
func TestHealthVerdictsDoNotWaitForThePing(t *testing.T) {
	var mu sync.Mutex
	var last chat.Health
	st := node.Status{Phase: ring.PhaseInRing, Joins: 1}
	pingErr := errors.New("hangs")
	hang := true
	hw := healthWatch{
		cfg: HealthConfig{Every: 5 * time.Millisecond, ProbeTimeout: time.Hour, OutGrace: 20 * time.Millisecond, NodesEvery: time.Hour},
		ping: func(ctx context.Context) error {
			mu.Lock()
			h, err := hang, pingErr
			mu.Unlock()
			if h {
				<-ctx.Done()
				return ctx.Err()
			}
			return err
		},
		nodes: func(context.Context) error { return nil },
		status: func(context.Context) (node.Status, bool) {
			mu.Lock()
			defer mu.Unlock()
			return st, true
		},
		set: func(h chat.Health) {
			mu.Lock()
			last = h
			mu.Unlock()
		},
	}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); hw.run(ctx) }()
		return func() { cancel(); <-done }
	}
	stop := start()
	defer func() { stop() }()
	is := func(want chat.Health) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return last == want }
	}
	// Set once at least: every tick tells the verdict.
	testutil.Eventually(t, 5*time.Second, "the first verdict: healthy", is(chat.Health{}))
	mu.Lock()
	st.VisitsFailing = true
	mu.Unlock()
	testutil.Eventually(t, 5*time.Second, "most visits failing told while the ping hangs", is(chat.Health{StoreDown: true}))
	mu.Lock()
	st.VisitsFailing, st.Phase = false, ring.PhaseJoining
	mu.Unlock()
	testutil.Eventually(t, 5*time.Second, "out of the ring told while the ping hangs", is(chat.Health{OutOfRing: true}))
	mu.Lock()
	st.Phase, hang = ring.PhaseInRing, false
	mu.Unlock()
	stop() // the hanging ping ends with the watch; start it again
	stop = start()
	testutil.Eventually(t, 5*time.Second, "a failing ping: the store is down", is(chat.Health{StoreDown: true}))
	mu.Lock()
	pingErr = nil
	mu.Unlock()
	testutil.Eventually(t, 5*time.Second, "the ping answers: healthy again", is(chat.Health{}))
}
