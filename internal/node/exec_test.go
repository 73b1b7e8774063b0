package node

import (
	"context"
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/ring"
)

// A node taken out of the ring loses its presence rows (it died: its
// users may log in elsewhere at once), unless it is only being moved: the
// coordinator takes out a node it cannot reach and places it again at once
// (ring.Op.Move). That node never learns it was out, so nothing would
// restore its rows, and its users would get no messages until the next
// presence check (seen in the chaos suite: 5 s without a delivery to
// every user of one node after a cut between it and the coordinator).
func TestMovedNodeKeepsItsPresence(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, 1, 2, 3)
	var cleared []int64
	clear := func(_ context.Context, node int64) error {
		cleared = append(cleared, node)
		return nil
	}
	do := func(op ring.Op) ring.Result {
		t.Helper()
		r := execOp(ctx, st, clear, 3, op)
		if r.Outcome != ring.OK {
			t.Fatalf("%v: %v (%v)", op, r.Outcome, r.Err)
		}
		return r
	}
	r := do(ring.Op{Kind: ring.OpClaim})
	epoch := r.Epoch
	for _, id := range []int64{3, 1, 2} {
		do(ring.Op{Kind: ring.OpJoin, Node: id, Epoch: epoch})
	}

	do(ring.Op{Kind: ring.OpLeave, Node: 1, Epoch: epoch, Move: true})
	if len(cleared) != 0 {
		t.Fatalf("presence cleared for %v when node 1 was moved; want none", cleared)
	}
	r = do(ring.Op{Kind: ring.OpJoin, Node: 1, Epoch: epoch})
	if !slices.Contains(r.Members, 1) {
		t.Fatalf("node 1 not placed again: members %v", r.Members)
	}

	do(ring.Op{Kind: ring.OpLeave, Node: 1, Epoch: epoch})
	if !slices.Equal(cleared, []int64{1}) {
		t.Fatalf("presence cleared for %v when node 1 left; want [1]", cleared)
	}
}
