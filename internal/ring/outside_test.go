package ring

import (
	"testing"

	"github.com/ringchat/ringchat/internal/election"
)

// TestMembersReplaceACoordinatorOutsideTheRing: the store names node 3
// coordinator, but its ring is {1, 2}: node 3 claimed the role cut off
// from the others, while they took it out, and left; its hand-off never
// arrived. It is nobody's successor, so no link failure shows it. A
// member's periodic check sees it and claims the role once node 3's lease
// has run out (IfStale: the store refuses while the lease runs; with the
// lease method it asks for the lease); a coordinator the ring holds gets
// no such claim.
//
// Two hand mutants of checkDone survive, both equivalent: without the
// `r.Coord != 0` guard a store naming no coordinator would be claimed
// from too, but the store names none only before the first claim, and
// the first node claims before any node joins; without the `return`
// after an orphaned role's take-over, the check that follows finds the
// store's coordinator, this node, in the ring (a member not in it joins
// again before either).
func TestMembersReplaceACoordinatorOutsideTheRing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []int64
		method  election.Method
		claim   bool
	}{
		{"coordinator outside the ring", []int64{1, 2}, election.ChangRoberts, true},
		{"coordinator in the ring", []int64{1, 2, 3}, election.ChangRoberts, false},
		{"lease method", []int64{1, 2}, election.Lease, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := TestConfig(1)
			cfg.Election.Method = tc.method
			n := NewMachine(cfg)
			n.SetPeers([]int64{1, 2, 3})
			n.phase, n.coord, n.epoch, n.succ, n.succUp = PhaseInRing, 3, 2, 2, true
			n.inFlight = &Op{ID: 7, Kind: OpCheckMember}
			n.checkJoins = n.joins
			n.StoreDone(Result{Op: Op{ID: 7, Kind: OpCheckMember}, Coord: 3, Epoch: 2,
				Members: tc.members, Pred: 2, Succ: 2})
			var claim, lease *Op
			for _, op := range n.Ready().Ops {
				switch op.Kind {
				case OpClaim:
					claim = &op
				case OpLease:
					lease = &op
				}
			}
			if tc.method == election.Lease {
				if lease == nil || lease.Lease.Kind != election.LeaseAcquire {
					t.Errorf("lease method: member does not ask for the lease of coordinator 3 outside the ring: %v", lease)
				}
				return
			}
			if !tc.claim {
				if claim != nil {
					t.Fatalf("member claims the role from coordinator 3 (ring %v): %v", tc.members, claim)
				}
				return
			}
			if claim == nil || !claim.IfStale {
				t.Fatalf("member does not claim the role (once the lease ran out) from coordinator 3 outside the ring %v: claim %v", tc.members, claim)
			}
			n.StoreDone(Result{Op: *claim, Coord: 1, Epoch: 3, Gen: 1, Secret: "s"})
			if !n.IsCoordinator() || n.epoch != 3 {
				t.Errorf("after the claim: coordinator %v epoch %d, want coordinator at epoch 3", n.IsCoordinator(), n.epoch)
			}
		})
	}
}
