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
