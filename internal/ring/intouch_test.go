package ring

import (
	"testing"

	"github.com/ringchat/ringchat/internal/token"
)

// coordWithBusyPredecessor is coordinator 5 of the ring 1 -> 3 -> 5 -> 1
// at generation 2, long after its predecessor 3 last proved itself (a busy
// ring: the link carries tokens, never PINGs): out of touch but for its
// successor link, whose lease runs for a while yet.
func coordWithBusyPredecessor(t *testing.T) *Machine {
	t.Helper()
	n := NewMachine(TestConfig(5))
	n.SetPeers([]int64{1, 3, 5})
	n.phase, n.isCoord, n.coord, n.epoch = PhaseInRing, true, 5, 4
	n.members = []int64{1, 3, 5}
	n.succ, n.succUp, n.ringPred, n.pred = 1, true, 3, 3
	n.tok.Confirm(2, "secret of 2")
	n.now = 1000
	n.leaseUntil = n.now + 100
	return n
}

// TestTheCoordinatorCountsOnlyProofFromItsPredecessor: the coordinator
// whose successor link fails takes its successor out at once if its
// predecessor has just shown it knows the generation's secret (a genuine
// TOKEN, a PING with the link proof): it is in touch with its ring. On a
// frame that proves nothing (a key holder's forged TOKEN or a PING without
// the proof, on a link it opened in the predecessor's name), it waits
// for its lease to run out instead, as a coordinator cut from every node.
func TestTheCoordinatorCountsOnlyProofFromItsPredecessor(t *testing.T) {
	s := token.Stamp{Gen: 2, Seq: 7}
	for _, tc := range []struct {
		name     string
		m        Msg
		takesOut bool
	}{
		{"genuine token", Msg{Type: MsgToken, Token: &token.Token{Stamp: s, Proof: token.Prove("secret of 2", s)}}, true},
		{"ping with the link proof", Msg{Type: MsgPing, Stamp: &s, Proof: token.ProveLink("secret of 2", s)}, true},
		{"forged token", Msg{Type: MsgToken, Token: &token.Token{Stamp: s, Proof: token.Prove("guess", s)}}, false},
		{"ping without proof", Msg{Type: MsgPing}, false},
		{"ping with a token's proof", Msg{Type: MsgPing, Stamp: &s, Proof: token.Prove("secret of 2", s)}, false},
		{"a new link (HELLO) alone", Msg{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := coordWithBusyPredecessor(t)
			n.PredecessorUp(3)
			if tc.m.Type != "" {
				tc.m.From, tc.m.Epoch, tc.m.Via = 3, 4, ViaPred
				n.Step(tc.m)
			}
			n.Ready()
			n.Tick()
			n.SuccessorDown(1)
			// The store answers every other operation (a sync the tick
			// made); the repair would come next in line.
			repair := false
			for range 3 {
				for _, op := range n.Ready().Ops {
					repair = repair || (op.Kind == OpRepair && op.Failed == 1)
					if op.Kind != OpRepair {
						n.StoreDone(Result{Op: op})
					}
				}
			}
			if repair != tc.takesOut {
				t.Errorf("after %s, successor 1 taken out at once: %v, want %v", tc.name, repair, tc.takesOut)
			}
		})
	}
}

// TestNewCoordinatorCutOffKeepsItsSuccessorWhileItsLeaseRuns: node 5 has
// just claimed the role (a won election's claim, which gives it the lease
// for AliveTicks); then its successor link fails, and its predecessor has
// proved nothing. Out of touch with both neighbours, it cannot tell its
// successor's failure from its own cut: it takes the successor out only
// once the lease its claim gave has run out, with a relay's retry (a
// quarter of AliveTicks) to spare, at its watchdog's next round (every
// 2 FailTicks); not at once.
func TestNewCoordinatorCutOffKeepsItsSuccessorWhileItsLeaseRuns(t *testing.T) {
	n := claimingNode(Op{Kind: OpClaim, PrevEpoch: 2, InRing: true})
	n.winClaims = maxWinClaims
	n.now = 1000
	n.StoreDone(Result{Op: Op{ID: 7, Kind: OpClaim, PrevEpoch: 2, InRing: true}, Coord: 5, Epoch: 3, Gen: 1, Secret: "s"})
	if !n.IsCoordinator() {
		t.Fatal("the claim did not make node 5 coordinator")
	}
	claimed := n.Now()
	n.SuccessorDown(1)
	cfg := n.Config()
	lease, pace, watchdog := int64(cfg.AliveTicks), int64(cfg.AliveTicks/4), int64(2*cfg.FailTicks)
	for {
		repair := false
		for again := true; again; {
			again = false
			for _, op := range n.Ready().Ops {
				if op.Kind == OpRepair && op.Failed == 1 {
					repair = true
					continue
				}
				// The store answers the rest (the claim's sync, the token's
				// generation): the repair would come next in line.
				n.StoreDone(Result{Op: op, Members: []int64{1, 3, 5}, Pred: 3, Stamp: token.Stamp{Gen: 2}, Secret: "s2"})
				again = true
			}
		}
		at := n.Now() - claimed
		if repair {
			if at <= lease {
				t.Errorf("successor 1 taken out %d ticks after the claim, within the claim's lease (%d ticks)", at, lease)
			}
			return
		}
		if at > lease+pace+watchdog+1 {
			t.Fatalf("successor 1 not taken out %d ticks after the claim (lease %d, relay's pace %d, watchdog %d)", at, lease, pace, watchdog)
		}
		n.Tick()
	}
}
