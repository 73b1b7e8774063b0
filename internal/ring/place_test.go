package ring

import "testing"

// TestCoordinatorTakesNoPlaceFromAMemberCheck: a node that cannot reach
// its coordinator (relay) takes its place in the ring from the store,
// where the coordinator wrote it. A node that took the role over while
// relaying still relays (nothing from a coordinator of its epoch clears
// it), but as coordinator it places itself: its own changes (a repair, a
// join) are what the store's ring says of it, and a member check's answer
// (one queued before the claim, or a token's check) does not move it. Here
// the answer names the successor whose failure the coordinator's repair is
// about to handle, and the ring's place of a coordinator still joining:
// the coordinator neither dials the failed node again nor forgets that it
// failed, and a joining one stays joining until its own join is done.
func TestCoordinatorTakesNoPlaceFromAMemberCheck(t *testing.T) {
	for _, phase := range []Phase{PhaseInRing, PhaseJoining} {
		t.Run(phase.String(), func(t *testing.T) {
			n := NewMachine(TestConfig(4))
			n.SetPeers([]int64{1, 2, 3, 4, 5})
			n.phase, n.isCoord, n.coord, n.epoch, n.relay = phase, true, 4, 3, true
			if phase == PhaseInRing {
				n.succ, n.succUp, n.failedSucc = 5, false, 5 // its link to 5 failed; a repair is queued
			}
			n.inFlight = &Op{ID: 7, Kind: OpCheckMember}
			n.StoreDone(Result{Op: Op{ID: 7, Kind: OpCheckMember}, Coord: 4, Epoch: 3,
				Members: []int64{1, 2, 3, 4, 5}, Pred: 3, Succ: 5})
			r := n.Ready()
			if r.Connect != nil {
				t.Errorf("the coordinator dials %d from a member check", *r.Connect)
			}
			if n.Phase() != phase {
				t.Errorf("the coordinator went from %s to %s on a member check", phase, n.Phase())
			}
			if phase == PhaseInRing && n.failedSucc != 5 {
				t.Errorf("the coordinator forgot that its successor 5 failed (failedSucc %d)", n.failedSucc)
			}
		})
	}
}
