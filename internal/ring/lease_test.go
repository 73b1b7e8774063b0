package ring

import (
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/election"
)

// leaseNodeAsking is node 5 of a lease ring 1 -> 3 -> 5 -> 1 whose
// coordinator, its successor 1 at epoch 4, failed: it has asked the store
// for the lease, and the acquire is the operation returned.
func leaseNodeAsking(t *testing.T) (*Machine, Op) {
	t.Helper()
	cfg := TestConfig(5)
	cfg.Election.Method = election.Lease
	n := NewMachine(cfg)
	n.SetPeers([]int64{1, 3, 5})
	n.phase, n.coord, n.epoch = PhaseInRing, 1, 4
	n.succ, n.succUp, n.ringPred = 1, true, 3
	n.SuccessorDown(1)
	for _, op := range n.Ready().Ops {
		if op.Kind == OpLease && op.Lease.Kind == election.LeaseAcquire {
			return n, op
		}
	}
	t.Fatal("no lease acquire after the coordinator failed")
	return nil, Op{}
}

// TestRefusedLeaseAdoptsTheStoresHolder: the store refuses the lease and
// names its holder, which the node adopts at once (its COORDINATOR may be
// lost, and the election machine, told of a newer holder, does not ask
// again), and asks that node for a successor: the holder another node
// took meanwhile (a newer epoch), or one at a lower epoch than the node's
// (the store, the truth, lost the newer one in a failover: every claim
// over the node's epoch would lose). A failed operation names nobody and
// changes nothing.
func TestRefusedLeaseAdoptsTheStoresHolder(t *testing.T) {
	for _, tc := range []struct {
		name         string
		res          Result
		coord, epoch int64
		lowered      bool
	}{
		{"newer holder", Result{Coord: 3, Epoch: 5, LeaseRemaining: 20 * time.Millisecond}, 3, 5, false},
		{"store lost an epoch", Result{Coord: 3, Epoch: 3, LeaseRemaining: 20 * time.Millisecond}, 3, 3, true},
		{"failed", Result{Outcome: Failed}, 1, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, op := leaseNodeAsking(t)
			tc.res.Op = op
			n.StoreDone(tc.res)
			r := n.Ready()
			if c, e := n.Coordinator(); c != tc.coord || e != tc.epoch {
				t.Errorf("coordinator %d epoch %d after the lease's answer, want %d epoch %d", c, e, tc.coord, tc.epoch)
			}
			lowered := false
			for _, note := range r.Notes {
				lowered = lowered || note.Event == EventEpochLowered
			}
			if lowered != tc.lowered {
				t.Errorf("epoch lowered: %v, want %v", lowered, tc.lowered)
			}
			// Without a successor, the node asks the coordinator it knows
			// for one (its watchdog).
			for range 4 * n.cfg.FailTicks {
				n.Tick()
				for _, m := range n.Ready().Msgs {
					if m.Type == MsgSuccessorRequest {
						if m.To != tc.coord {
							t.Errorf("SUCCESSOR_REQUEST to %d, want %d", m.To, tc.coord)
						}
						return
					}
				}
			}
			t.Errorf("no SUCCESSOR_REQUEST within %d ticks", 4*n.cfg.FailTicks)
		})
	}
}
