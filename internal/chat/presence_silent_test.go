package chat

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
)

// silentStore reports the nodes in silent as not heard from for that long
// (store.NodeRow.HealthAge), as a node cut from the store shows.
type silentStore struct {
	store.Store
	mu     sync.Mutex
	silent map[int64]time.Duration
}

func (s *silentStore) set(id int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent[id] = d
}

func (s *silentStore) Nodes(ctx context.Context) ([]store.NodeRow, error) {
	nodes, err := s.Store.Nodes(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range nodes {
		if d, ok := s.silent[n.ID]; ok {
			nodes[i].HealthAge = d
		}
	}
	return nodes, err
}

// TestLoginReplacesPresenceAtASilentNode: alice is logged in at node 3, in
// the ring, which has stopped reporting to the store (cut from it: it
// cannot clear her row when she leaves). A login at node 2 that names no
// node it left is refused while node 3 reported lately, or never did (no
// report to judge by), and replaces the row once node 3 has been silent
// for longer than presenceSilentAfter.
func TestLoginReplacesPresenceAtASilentNode(t *testing.T) {
	ctx := context.Background()
	st := &silentStore{Store: newStore(t, 3), silent: map[int64]time.Duration{}}
	storetest.Present(t, st, "alice", 3)
	r := newRingOn(t, st, 2, nil) // nodes 1 and 2 serve; node 3 is in the ring, silent
	c := dialRaw(t, r.addr(2))
	for _, age := range []time.Duration{-1, time.Second, presenceSilentAfter} {
		st.set(3, age)
		c.send(loginFailover)
		c.expectError(protocol.CodeUserOnline, "already logged in at node 3")
	}
	st.set(3, presenceSilentAfter+time.Millisecond)
	c.send(loginFailover)
	if m := c.obj(); m["messageType"] != "LOGIN" || m["node"] != float64(2) {
		t.Fatalf("login at node 2 with node 3 silent: %v", m)
	}
	on, err := st.Online(ctx)
	if err != nil || len(on) != 1 || on[0].NodeID != 2 {
		t.Fatalf("online after the login: %+v (%v)", on, err)
	}
}
