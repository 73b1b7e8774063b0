package ring

import "testing"

// claimingNode is node 5 in the ring 1 -> 3 -> 5 -> 1 whose coordinator
// is node 1 at epoch 2 (a lower node: 5 came back and has not challenged
// it yet), with claim op in flight.
func claimingNode(op Op) *Machine {
	n := NewMachine(TestConfig(5))
	n.SetPeers([]int64{1, 3, 5})
	n.phase, n.coord, n.epoch = PhaseInRing, 1, 2
	n.succ, n.succUp, n.ringPred = 1, true, 3
	op.ID = 7
	n.inFlight, n.claimQueue = &op, true
	return n
}

func claims(r Ready) []Op {
	var out []Op
	for _, op := range r.Ops {
		if op.Kind == OpClaim {
			out = append(out, op)
		}
	}
	return out
}

// TestLostTakeOverIsNoWin: a node whose successor, the coordinator, failed
// claims the role if that coordinator's lease ran out; the store refuses,
// as the coordinator renews it (only the link between them is cut). The
// node is not an election's winner: even above the coordinator it does
// not claim over it (the challenge's election decides that), but asks the
// coordinator for a successor through another node.
func TestLostTakeOverIsNoWin(t *testing.T) {
	n := claimingNode(Op{Kind: OpClaim, PrevEpoch: 2, IfStale: true})
	n.succUp, n.failedSucc = false, 1
	n.StoreDone(Result{Op: Op{ID: 7, Kind: OpClaim, PrevEpoch: 2, IfStale: true}, Outcome: Lost, Coord: 1, Epoch: 2})
	r := n.Ready()
	if c := claims(r); len(c) != 0 {
		t.Fatalf("a refused take-over claimed over the live coordinator: %v", c)
	}
	var relayed bool
	for _, m := range r.Msgs {
		relayed = relayed || (m.Type == MsgSuccessorRequest && m.Relay && m.To == 3)
	}
	if !relayed {
		t.Errorf("no SUCCESSOR_REQUEST through node 3: %v", r.Msgs)
	}
	if c, e := n.Coordinator(); c != 1 || e != 2 || n.IsCoordinator() {
		t.Errorf("coordinator %d epoch %d (acting: %v), want 1 epoch 2", c, e, n.IsCoordinator())
	}
}

// TestBeatenWinnerClaimsAgain: node 5 won an election and claims the role
// over epoch 2; a lower node's claim got in first (epoch 3: node 3 took
// over, finding node 1 dead). The winner claims again at once, over epoch 3, rather
// than wait for a new challenge and election.
func TestBeatenWinnerClaimsAgain(t *testing.T) {
	n := claimingNode(Op{Kind: OpClaim, PrevEpoch: 2, InRing: true})
	n.winClaims = maxWinClaims
	n.StoreDone(Result{Op: Op{ID: 7, Kind: OpClaim, PrevEpoch: 2, InRing: true}, Outcome: Lost, Coord: 3, Epoch: 3})
	c := claims(n.Ready())
	if len(c) != 1 || c[0].PrevEpoch != 3 || !c[0].InRing || c[0].IfStale {
		t.Fatalf("claims after the lost one: %v, want one over epoch 3 (in the ring, not if stale)", c)
	}
	if n.winClaims != maxWinClaims-1 {
		t.Errorf("%d claims left, want %d", n.winClaims, maxWinClaims-1)
	}
}
