package election

import (
	"fmt"
	"testing"
)

// TestDeferringNodeDoesNotStand: with every voting method, an election
// started by the lowest node while the highest defers (its store link is
// troubled) elects the best node that does not defer, and every live node
// agrees on it; without the deferral the highest wins.
func TestDeferringNodeDoesNotStand(t *testing.T) {
	for _, meth := range []Method{Ring, ChangRoberts, Bully} {
		for _, deferring := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s deferring %v", meth, deferring), func(t *testing.T) {
				c := newCluster(t, meth, seq(5)...)
				if deferring {
					c.ms[5].Defer(true)
				}
				c.ms[1].Start()
				c.deliver(500)
				want := int64(5)
				if deferring {
					want = 4
				}
				if c.coord != want {
					t.Fatalf("coordinator %d, want %d", c.coord, want)
				}
				for _, id := range c.ids {
					if m := c.ms[id]; m.coord != want || m.Electing() {
						t.Fatalf("node %d: coordinator %d electing %v, want %d", id, m.coord, m.Electing(), want)
					}
				}
			})
		}
	}
}

// TestTwoDeferringNodes: the two highest defer; the third is elected.
func TestTwoDeferringNodes(t *testing.T) {
	for _, meth := range []Method{Ring, ChangRoberts, Bully} {
		t.Run(string(meth), func(t *testing.T) {
			c := newCluster(t, meth, seq(5)...)
			c.ms[5].Defer(true)
			c.ms[4].Defer(true)
			c.ms[2].Start()
			c.deliver(500)
			if c.coord != 3 {
				t.Fatalf("coordinator %d, want 3", c.coord)
			}
		})
	}
}

// TestDeferringNodeDoesNotChallenge: a node that defers does not challenge
// a lower coordinator; once it stops deferring it does, after the
// challenge delay, and wins.
func TestDeferringNodeDoesNotChallenge(t *testing.T) {
	for _, meth := range []Method{Ring, ChangRoberts, Bully} {
		t.Run(string(meth), func(t *testing.T) {
			c := newCluster(t, meth, seq(4)...)
			c.ms[4].Defer(true)
			c.epoch, c.coord = 1, 3
			c.observeAll(3, 1)
			for range 50 {
				for _, id := range c.ids {
					c.ms[id].Tick()
				}
				c.collect()
			}
			if c.ms[4].Electing() || c.ms[4].challengeAt != 0 || c.coord != 3 {
				t.Fatalf("deferring node 4: electing %v, challenge at %d, coordinator %d", c.ms[4].Electing(), c.ms[4].challengeAt, c.coord)
			}
			c.ms[4].Defer(false)
			if got, want := c.ms[4].challengeAt, c.ms[4].Now()+int64(c.ms[4].cfg.ChallengeTicks); got != want {
				t.Fatalf("challenge armed at %d, want %d", got, want)
			}
			c.deliver(500)
			if c.coord != 4 {
				t.Fatalf("coordinator %d after the deferral, want 4", c.coord)
			}
		})
	}
}

// TestDeferringParticipantDoesNotRestartAsCandidate: a deferring node
// whose participation times out (its hops were acknowledged, but no result
// came) does not start a round of its own, in which it would stand; a node
// that does not defer does.
func TestDeferringParticipantDoesNotRestartAsCandidate(t *testing.T) {
	for _, deferring := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferring %v", deferring), func(t *testing.T) {
			m := New(testConfig(3, ChangRoberts))
			m.SetPeers(seq(3))
			m.Defer(deferring)
			// Every hop is acknowledged at once, and nothing else comes.
			ackAll := func() (cands []int64) {
				for _, out := range m.Ready().Msgs {
					if out.Kind == KindElection {
						cands = append(cands, out.Cand)
						m.Step(Msg{Method: out.Method, Kind: KindAck, Round: out.Round, Seq: out.Seq, From: out.To, To: 3})
					}
				}
				return cands
			}
			m.Step(Msg{Method: ChangRoberts, Kind: KindElection, Round: Round{Initiator: 1, N: 1}, Seq: 1, Cand: 2, From: 2, To: 3})
			first := ackAll()
			var later []int64
			for range 3 * int(m.cfg.ResultTicks) {
				m.Tick()
				later = append(later, ackAll()...)
			}
			if deferring {
				if fmt.Sprint(first) != "[2]" || len(later) != 0 || m.Electing() {
					t.Fatalf("deferring node 3 sent candidacies %v, then %v (electing %v); want [2] passed on, then none", first, later, m.Electing())
				}
				return
			}
			if fmt.Sprint(first) != "[3]" || len(later) == 0 {
				t.Fatalf("node 3 sent candidacies %v, then %v; want itself, and itself again after the result's deadline", first, later)
			}
		})
	}
}

// TestDeferringParticipantEndsOnTheNewCoordinator: a deferring node that
// passed candidacies on takes part until the new coordinator is observed,
// not until its result deadline, even when the ELECTED announcement never
// reaches it.
func TestDeferringParticipantEndsOnTheNewCoordinator(t *testing.T) {
	for _, meth := range []Method{Ring, ChangRoberts} {
		t.Run(string(meth), func(t *testing.T) {
			c := newCluster(t, meth, seq(5)...)
			c.ms[5].Defer(true)
			c.drop = func(m Msg) bool { return m.Kind == KindElected && m.To == 5 }
			c.ms[1].Start()
			c.deliver(10)
			if c.coord != 4 {
				t.Fatalf("coordinator %d, want 4", c.coord)
			}
			if c.ms[5].Electing() {
				t.Fatal("node 5 still takes part after coordinator 4 was observed")
			}
		})
	}
}
