package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// testHealth: a node's health line is read back with its age on the
// store's clock; a node that never reported has a negative age; a new
// report replaces the old one and restarts its age; an unknown node
// changes nothing; a line over MaxHealthLen is refused and changes
// nothing.
func testHealth(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	mustNodes(t, st)
	byID := func() map[int64]store.NodeRow {
		t.Helper()
		nodes, err := st.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]store.NodeRow{}
		for _, n := range nodes {
			out[n.ID] = n
		}
		return out
	}
	if n := byID()[2]; n.Health != "" || n.HealthAge >= 0 {
		t.Fatalf("before any report: health %q age %v, want none and a negative age", n.Health, n.HealthAge)
	}
	if err := st.SetHealth(ctx, 2, "most critical sections fail"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetHealth(ctx, 3, ""); err != nil {
		t.Fatal(err)
	}
	if err := st.SetHealth(ctx, 99, "nowhere"); err != nil {
		t.Errorf("unknown node: %v, want nothing changed and no error", err)
	}
	if err := st.SetHealth(ctx, 2, strings.Repeat("x", store.MaxHealthLen+1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a line of %d bytes: %v, want ErrInvalid", store.MaxHealthLen+1, err)
	}
	got := byID()
	if n := got[2]; n.Health != "most critical sections fail" || n.HealthAge < 0 || n.HealthAge > time.Minute {
		t.Errorf("node 2: health %q age %v, want the line, just now", n.Health, n.HealthAge)
	}
	if n := got[3]; n.Health != "" || n.HealthAge < 0 || n.HealthAge > time.Minute {
		t.Errorf("node 3: health %q age %v, want it serving, just now", n.Health, n.HealthAge)
	}
	if n := got[4]; n.HealthAge >= 0 {
		t.Errorf("node 4 never reported: age %v", n.HealthAge)
	}
	if len(got) != 5 {
		t.Errorf("%d nodes, want 5", len(got))
	}
}
