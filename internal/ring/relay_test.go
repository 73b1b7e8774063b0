package ring

import (
	"testing"
	"time"
)

// storeView answers a node's store operations as a store whose ring is
// 1 -> 5 -> 3 -> 1 and whose coordinator is node 5 at epoch 2 (alive: its
// lease runs). It returns the claims made if-stale, which it leaves
// unanswered.
func storeView(n *Machine) (staleClaims []Op) {
	for {
		ops := n.Ready().Ops
		if len(ops) == 0 {
			return staleClaims
		}
		for _, op := range ops {
			switch op.Kind {
			case OpClaim:
				if op.IfStale {
					staleClaims = append(staleClaims, op)
				}
			case OpCheckMember:
				n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2, Members: []int64{1, 3, 5}, Pred: 3, Succ: 5, Gen: 1, Secret: "s"})
			case OpReadCoordinator:
				n.StoreDone(Result{Op: op, Coord: 5, Epoch: 2})
			default:
				n.StoreDone(Result{Op: op})
			}
		}
	}
}

// TestRelayClaimsAgainWhenTheLeaseEnds: node 1's successor, coordinator 5,
// fails: node 1 claims the role if 5's lease has run out. The store refuses
// (5 is alive, only the link is cut) and tells how long the lease still
// runs. Node 1 relays and claims again once, the tick after that lease
// ends: not before (the store would refuse again: a write for nothing),
// not later (a coordinator that died then would be replaced later than
// the store allows). A partial tick counts as a whole one. A figure longer
// than a lease (AliveTicks) is not believed, and a refusal without one (an
// older store's answer) waits a whole lease.
func TestRelayClaimsAgainWhenTheLeaseEnds(t *testing.T) {
	cfg := TestConfig(1)
	for _, tc := range []struct {
		name      string
		remaining time.Duration
		after     int64 // ticks from the refusal to the next claim
	}{
		{"four ticks", 4 * cfg.Tick, 5},
		{"a whole tick count and a nanosecond", 4*cfg.Tick + 1, 6},
		{"one tick", cfg.Tick, 2},
		{"longer than a lease", 100 * cfg.Tick, int64(cfg.AliveTicks)},
		{"no figure", 0, int64(cfg.AliveTicks)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NewMachine(cfg)
			n.SetPeers([]int64{1, 3, 5})
			n.phase, n.coord, n.epoch = PhaseInRing, 5, 2
			n.succ, n.succUp, n.ringPred = 5, true, 3
			n.now = 100
			n.SuccessorDown(5)
			claims := storeView(n)
			if len(claims) != 1 {
				t.Fatalf("%d claims once the coordinator failed, want 1", len(claims))
			}
			refused := n.Now()
			n.StoreDone(Result{Op: claims[0], Outcome: Lost, Coord: 5, Epoch: 2, LeaseRemaining: tc.remaining})
			if c := storeView(n); len(c) != 0 {
				t.Fatalf("claims again at once after the refusal: %v", c)
			}
			for n.Now() < refused+int64(cfg.AliveTicks)+5 {
				n.Tick()
				if c := storeView(n); len(c) != 0 {
					if at := n.Now() - refused; at != tc.after || len(c) != 1 {
						t.Errorf("%d claims %d ticks after the refusal (lease left: %v), want 1 after %d ticks", len(c), at, tc.remaining, tc.after)
					}
					return
				}
			}
			t.Errorf("no claim within %d ticks of the refusal (lease left: %v), want one after %d ticks", n.Now()-refused, tc.remaining, tc.after)
		})
	}
}

// TestRelayTakesItsPlaceFromTheStore: node 2 of the ring 1 -> 2 -> 3 ->
// 4 -> 5 -> 1 cannot reach its coordinator, 5 (it relays), and its
// successor 3 fails. Its member check tells where the coordinator placed
// it: a new successor (4, 3 spliced out) is dialled at once. A store that
// still names 3 (the repair not made yet) does not make it dial 3 again at
// once, which would only fail again, but at the relay's pace: a quarter
// of AliveTicks later it is tried again.
func TestRelayTakesItsPlaceFromTheStore(t *testing.T) {
	relayPace := int64(TestConfig(2).AliveTicks / 4)
	for _, tc := range []struct {
		name  string
		after int64 // ticks from the failure to the check's answer
		succ  int64 // the store's successor of node 2
		dial  int64 // the successor dialled, 0 for none
	}{
		{"a new successor at once", 0, 4, 4},
		{"the failed successor at once", 0, 3, 0},
		{"the failed successor a tick later", 1, 3, 0},
		{"the failed successor after the relay's pace", relayPace + 1, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NewMachine(TestConfig(2))
			n.SetPeers([]int64{1, 2, 3, 4, 5})
			n.phase, n.coord, n.epoch, n.relay = PhaseInRing, 5, 3, true
			n.succ, n.succUp, n.ringPred = 3, true, 1
			n.now = 100
			n.SuccessorDown(3)
			n.Ready()
			n.now += tc.after
			n.inFlight, n.checkJoins = &Op{ID: 70, Kind: OpCheckMember}, n.joins
			n.StoreDone(Result{Op: Op{ID: 70, Kind: OpCheckMember}, Coord: 5, Epoch: 3,
				Members: []int64{1, 2, 3, 4, 5}, Pred: 1, Succ: tc.succ})
			var dial int64
			if c := n.Ready().Connect; c != nil {
				dial = *c
			}
			if dial != tc.dial {
				t.Errorf("store names successor %d %d ticks after 3 failed: node dials %d, want %d (0: none)", tc.succ, tc.after, dial, tc.dial)
			}
		})
	}
}

// TestRejoinTakesNoPlaceFromAnEarlierCheck: node 3 of the ring 1 -> 3 ->
// 5 -> 1 has a member check out when its coordinator, having taken it
// out, tells it to join again (REJOIN). The check's answer, read before
// that, still shows it between 1 and 5: whether it comes before the JOIN
// is retried or after (a store read slower than a retry), the node does
// not go back to that place (its JOIN would be dropped, and it would sit
// outside the store's ring until a link change or its next check), but
// waits for its JOIN's answer. A check asked after the REJOIN that shows
// its new place, while the JOIN goes unanswered, places it.
func TestRejoinTakesNoPlaceFromAnEarlierCheck(t *testing.T) {
	for _, retried := range []bool{false, true} {
		n := NewMachine(TestConfig(3))
		n.SetPeers([]int64{1, 3, 5})
		n.phase, n.coord, n.epoch, n.joins = PhaseInRing, 1, 2, 1
		n.succ, n.succUp, n.ringPred, n.pred = 5, true, 1, 1
		n.now = 100
		n.inFlight, n.checkJoins, n.nextOpID = &Op{ID: 7, Kind: OpCheckMember}, n.joins, 7
		n.Step(Msg{Type: MsgRejoin, Via: ViaUDP, From: 1, To: 3, Epoch: 2})
		n.Ready()
		if n.Phase() != PhaseJoining {
			t.Fatalf("retried %v: phase %s after REJOIN, want joining", retried, n.Phase())
		}
		if retried {
			for i := 0; n.req == nil || n.req.tries == 0; i++ {
				if i > 10*n.cfg.MaxRetryTicks {
					t.Fatal("the JOIN was never retried")
				}
				n.Tick()
				n.Ready()
			}
		}
		n.StoreDone(Result{Op: Op{ID: 7, Kind: OpCheckMember}, Coord: 1, Epoch: 2,
			Members: []int64{1, 3, 5}, Pred: 1, Succ: 5})
		r := n.Ready()
		if r.Connect != nil {
			t.Errorf("retried %v: the node dials %d from a check asked before its REJOIN", retried, *r.Connect)
		}
		if n.Phase() != PhaseJoining {
			t.Errorf("retried %v: phase %s after a check asked before the REJOIN, want joining", retried, n.Phase())
		}
		if typ, ok := n.PendingRequest(); !ok || typ != MsgJoin {
			t.Errorf("retried %v: pending request %q (%v), want its JOIN", retried, typ, ok)
		}
		if !retried {
			continue
		}
		// A check asked since, the JOIN still unanswered: the store's
		// ring holds the node again (the coordinator placed it), and the
		// node takes that place.
		n.nextOpID++
		check := Op{ID: n.nextOpID, Kind: OpCheckMember}
		n.inFlight = &check
		n.StoreDone(Result{Op: check, Coord: 1, Epoch: 2, Members: []int64{1, 3, 5}, Pred: 5, Succ: 1})
		r = n.Ready()
		if r.Connect == nil || *r.Connect != 1 {
			t.Errorf("a check asked after the REJOIN, with the JOIN unanswered: connect %v, want 1", r.Connect)
		}
	}
}
