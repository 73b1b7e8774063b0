package electsim

import (
	"fmt"
	"math"
	"strings"

	"github.com/ringchat/ringchat/internal/election"
)

// Invariants, convergence and measurement.

func (s *Sim) violate(format string, args ...any) {
	v := fmt.Sprintf("t=%d: ", s.Now) + fmt.Sprintf(format, args...)
	s.tracef("VIOLATION %s", v)
	if len(s.Violations) < 20 {
		s.Violations = append(s.Violations, v)
	}
}

// check verifies the safety invariants: no two live nodes act as
// coordinator for one epoch; with the lease, at most one live node holds it
// and a holder's lease is valid in the store.
func (s *Sim) check() {
	believers := map[int64]int64{}
	holders := 0
	for _, n := range s.Nodes {
		if !n.Up {
			continue
		}
		if n.Believes != 0 {
			if other, ok := believers[n.Believes]; ok {
				s.violate("nodes %d and %d both coordinator for epoch %d", other, n.ID, n.Believes)
			}
			believers[n.Believes] = n.ID
		}
		if s.cfg.Method != election.Lease {
			continue
		}
		s.sync(n)
		if n.M.Holding() {
			holders++
			if l := s.Lease; l.Holder != n.ID || l.ExpiresAt <= s.Now {
				s.violate("node %d holds a lease the store gives to %d until %d", n.ID, l.Holder, l.ExpiresAt)
			}
		}
	}
	if holders > 1 {
		s.violate("%d nodes hold the lease", holders)
	}
}

// Converged reports whether every live node's host has adopted the
// expected coordinator — the highest live id (voting methods) or the live
// lease holder (lease, exactly one) — and the coordinator acts for the
// epoch the others know. The error says what is missing.
func (s *Sim) Converged() error {
	live := s.Live()
	if len(live) == 0 {
		return nil
	}
	want := live[len(live)-1]
	if s.cfg.Method == election.Lease {
		want = 0
		for _, id := range live {
			if s.byID[id].M.Holding() {
				if want != 0 {
					return fmt.Errorf("nodes %d and %d hold the lease", want, id)
				}
				want = id
			}
		}
		if want == 0 {
			return fmt.Errorf("no live node holds the lease")
		}
	}
	c := s.byID[want]
	if c.Believes == 0 || c.Believes != c.ViewEpoch {
		return fmt.Errorf("node %d does not act as coordinator (view %d@%d, believes %d)", want, c.View, c.ViewEpoch, c.Believes)
	}
	for _, id := range live {
		if n := s.byID[id]; n.View != want || n.ViewEpoch != c.Believes {
			return fmt.Errorf("node %d sees coordinator %d@%d, want %d@%d", id, n.View, n.ViewEpoch, want, c.Believes)
		}
	}
	return nil
}

// coordinator is who acts as coordinator in the store: the last claimant
// (voting methods) or the lease holder while the lease is valid.
func (s *Sim) coordinator() int64 {
	if s.cfg.Method == election.Lease {
		if s.Lease.ExpiresAt > s.Now {
			return s.Lease.Holder
		}
		return 0
	}
	return s.Store.Coord
}

// Settle runs the simulation, the faults over, until it has converged and
// the faults' aftermath has drained (elections already under way when they
// stopped may still end with a node that missed the highest one: they
// finish or restart within ResultTicks and their retries); then for
// 2·ResultTicks more the coordinator must not change, and at the end all
// must agree again. limit bounds the ticks to convergence. Settle reports
// what went wrong, including any safety violation.
func (s *Sim) Settle(limit int) error {
	start := s.Now
	c := s.cfg.Elect
	drain := int64(c.ResultTicks + c.Retries*c.TimeoutTicks + 2*s.cfg.MaxDelay)
	settled := func() bool { return s.Now-start >= drain && s.Converged() == nil }
	if !s.RunUntil(settled, limit) {
		return fmt.Errorf("not converged %d ticks after the faults: %v", s.Now-start, s.Converged())
	}
	took, coord := s.Now-start, s.coordinator()
	for range 2 * c.ResultTicks {
		s.Step()
		if now := s.coordinator(); now != coord {
			return fmt.Errorf("converged on %d after %d ticks, then the coordinator became %d at t=%d", coord, took, now, s.Now)
		}
	}
	if !s.RunUntil(func() bool { return s.Converged() == nil }, limit) {
		return fmt.Errorf("converged on %d after %d ticks, then lost it: %v", coord, took, s.Converged())
	}
	if len(s.Violations) > 0 {
		return fmt.Errorf("safety: %s", strings.Join(s.Violations, "; "))
	}
	return nil
}

// Quiet reports whether nothing is in flight and no live machine has a
// deadline pending (voting methods; a lease holder always has one).
func (s *Sim) Quiet() bool {
	if s.q.Len() > 0 {
		return false
	}
	for _, n := range s.Nodes {
		if n.Up && n.M.NextDeadline() != math.MaxInt64 {
			return false
		}
	}
	return true
}

// Measure runs one election on a fresh fault-free simulation with n nodes
// and 1-tick delays: the lowest node starts it (every node, if
// allInitiate). It returns the algorithm messages sent by all nodes (for
// the lease: store operations), the hop ACKs, and the ticks until every
// node had adopted the winner. Voting methods are measured until the
// network is quiet, so an announcement still on its way is counted.
func Measure(method election.Method, n int, allInitiate bool, seed uint64) (msgs int, acks int, ticks int64, err error) {
	if n < 1 {
		return 0, 0, 0, fmt.Errorf("electsim: %d nodes", n)
	}
	s := New(Config{Method: method, N: n, Seed: seed, MaxDelay: 1, StoreReadEvery: -1, DetectTicks: -1})
	for _, id := range s.ids {
		if allInitiate || id == s.ids[0] {
			s.Start(id)
		}
	}
	limit := 100 * (n + 10)
	if !s.RunUntil(func() bool { return s.Converged() == nil }, limit) {
		return 0, 0, 0, fmt.Errorf("electsim: %s with %d nodes did not converge in %d ticks: %v", method, n, limit, s.Converged())
	}
	ticks = s.Now
	if method == election.Lease {
		return s.Stats.LeaseOps, 0, ticks, nil
	}
	if !s.RunUntil(s.Quiet, limit) {
		return 0, 0, 0, fmt.Errorf("electsim: %s with %d nodes still busy after %d ticks", method, n, s.Now)
	}
	if len(s.Violations) > 0 {
		return 0, 0, 0, fmt.Errorf("electsim: %s", s.Violations[0])
	}
	return s.Stats.Msgs(), s.Stats.Sent[election.KindAck], ticks, nil
}
