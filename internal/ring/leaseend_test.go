package ring

import (
	"testing"
	"time"
)

// memberAsking is node 3 of a ring 1 -> 3 -> 4 -> 5 -> 1 whose
// coordinator is 5 at epoch 2: its successor 4 failed, it has asked 5
// for another, and the store read that follows is the operation
// returned.
func memberAsking(t *testing.T) (*Machine, Op) {
	t.Helper()
	n := NewMachine(TestConfig(3))
	n.SetPeers([]int64{1, 3, 4, 5})
	n.phase, n.coord, n.epoch, n.members = PhaseInRing, 5, 2, []int64{1, 3, 4, 5}
	n.succ, n.succUp, n.ringPred = 4, true, 1
	n.SuccessorDown(4)
	r := n.Ready()
	asked := false
	for _, m := range r.Msgs {
		asked = asked || (m.Type == MsgSuccessorRequest && m.To == 5 && m.Failed == 4)
	}
	if !asked {
		t.Fatal("no SUCCESSOR_REQUEST to the coordinator after the successor failed")
	}
	for _, op := range r.Ops {
		if op.Kind == OpReadCoordinator {
			return n, op
		}
	}
	t.Fatal("no store read after the successor failed")
	return nil, Op{}
}

// claimsIfStale reports whether ops hold a claim-if-stale.
func claimsIfStale(ops []Op) bool {
	for _, op := range ops {
		if op.Kind == OpClaim && op.IfStale {
			return true
		}
	}
	return false
}

// TestLeaseRunOutTakesOverAtOnce: the store read that follows a request
// for a successor shows the coordinator's lease run out (it renews only
// while in touch with its ring): the node claims the role (if stale: the
// store decides) without waiting for its requests to go unanswered. A
// lease still running does not make it claim.
func TestLeaseRunOutTakesOverAtOnce(t *testing.T) {
	n, op := memberAsking(t)
	n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2, LeaseKnown: true})
	if !claimsIfStale(n.Ready().Ops) {
		t.Fatal("the coordinator's lease ran out: want a claim-if-stale at once")
	}

	n, op = memberAsking(t)
	n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2, LeaseKnown: true, LeaseRemaining: 900 * time.Millisecond})
	if claimsIfStale(n.Ready().Ops) {
		t.Fatal("the coordinator's lease still runs: no claim")
	}

	n, op = memberAsking(t)
	n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2}) // a read without the lease (an older store)
	if claimsIfStale(n.Ready().Ops) {
		t.Fatal("no lease in the answer: no claim")
	}
}

// TestLeaseLookedAtAgainWhenItEnds: the lease still ran when the node
// read it, and the coordinator does not answer: the node reads it again
// the tick after it would end, not before, and claims if it ran out.
// Answered meanwhile, the node reads nothing more.
func TestLeaseLookedAtAgainWhenItEnds(t *testing.T) {
	cfg := TestConfig(3)
	ticks := cfg.AliveTicks / 2
	remaining := time.Duration(ticks) * cfg.Tick
	n, op := memberAsking(t)
	n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2, LeaseKnown: true, LeaseRemaining: remaining})
	n.Ready()
	var read Op
	for i := 1; i <= ticks+1 && read.Kind == 0; i++ {
		n.Tick()
		for _, o := range n.Ready().Ops {
			if o.Kind == OpCheckMember { // the store's ring is as the node has it
				n.StoreDone(Result{Op: o, Coord: 5, Epoch: 2, Members: []int64{1, 3, 4, 5}, Pred: 1, Succ: 4})
				continue
			}
			if o.Kind == OpReadCoordinator {
				if i <= ticks {
					// The request's own retries read the store after
					// StoreCheckRetries unanswered tries; only those
					// may come before the lease's end.
					if n.req == nil || n.req.tries%n.cfg.StoreCheckRetries != 0 {
						t.Fatalf("store read %d ticks after the first, before the lease's end (%d)", i, ticks)
					}
					n.StoreDone(Result{Op: o, Coord: 5, Epoch: 2, LeaseKnown: true, LeaseRemaining: remaining - time.Duration(i)*n.cfg.Tick})
					continue
				}
				read = o
			}
		}
	}
	if read.Kind == 0 {
		t.Fatalf("no store read by the tick after the lease's end (%d ticks)", ticks+1)
	}
	n.StoreDone(Result{Op: read, Coord: 5, Epoch: 2, LeaseKnown: true})
	if !claimsIfStale(n.Ready().Ops) {
		t.Fatal("the lease ran out at the second read: want a claim-if-stale")
	}

	// Answered meanwhile: no read at the lease's end.
	n, op = memberAsking(t)
	n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2, LeaseKnown: true, LeaseRemaining: remaining})
	n.Ready()
	n.req = nil // the coordinator's SUCCESSOR came
	for range ticks + 5 {
		n.Tick()
		for _, o := range n.Ready().Ops {
			if o.Kind == OpCheckMember {
				n.StoreDone(Result{Op: o, Coord: 5, Epoch: 2, Members: []int64{1, 3, 4, 5}, Pred: 1, Succ: 4})
			}
			if o.Kind == OpReadCoordinator {
				t.Fatal("the request was answered: no read at the lease's end")
			}
		}
	}
}
