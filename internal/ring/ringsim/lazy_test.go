package ringsim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/ring"
)

// TestLazyEqualsEager: a runtime that sleeps until the next deadline
// (AdvanceTo) behaves exactly like one that ticks every tick. The same
// seeded scenario runs both ways and must produce the same trace, event
// for event; a late NextDeadline would show as a divergence. The scenario
// runs with a voting method and with the lease, and reaches every deadline
// NextDeadline knows: crashes, a stall, clean leaves (members, some
// holding the token when LEAVE_OK comes, and the coordinator, which hands
// the role over), assignments the coordinator resends until acknowledged,
// the store down for a while (operations retried), and a node that cannot
// reach its coordinator and relays its requests through other nodes.
func TestLazyEqualsEager(t *testing.T) {
	scenario := func(method election.Method, lazy bool, seed uint64) []string {
		s := New(seed, 1, 2, 3, 4, 5, 6)
		s.Cfg = func(id int64) ring.Config {
			c := ring.TestConfig(id)
			c.Election.Method = method
			return c
		}
		s.Lazy = lazy
		s.Loss, s.Dup, s.MaxDelay, s.HoldTicks = 0.1, 0.1, 3, 2
		var trace []string
		s.Trace = func(l string) { trace = append(trace, l) }
		// work: every running node has a client's message every few ticks,
		// so that tokens are held (and a leave may find its node holding).
		work := func(n int) {
			for i := range n {
				if i%4 == 0 {
					for _, id := range s.IDs() {
						s.Work(id)
					}
				}
				s.Step()
			}
		}
		for _, id := range []int64{3, 1, 6, 2, 5, 4} {
			s.Start(id)
			s.Run(4)
		}
		s.Run(200)
		s.Crash(6)
		s.Run(150)
		s.Stall(2)
		s.Run(60)
		s.Wake(2)
		s.Run(150)
		s.Leave(3)
		s.Run(150)
		s.Start(6)
		s.Start(3)
		s.Run(300)
		// Leaves under load: members, then the coordinator.
		for _, id := range []int64{1, 4} {
			work(40)
			s.Leave(id)
		}
		work(150)
		s.Leave(s.Store.Coord)
		work(200)
		for _, id := range s.IDs() {
			if s.Procs[id].State == Down {
				s.Start(id)
				work(4)
			}
		}
		work(300)
		// The store unreachable for a while.
		s.Store.Down = true
		work(60)
		s.Store.Down = false
		work(200)
		// A node cut off from its coordinator (not from the others) whose
		// successor dies: it relays its request for a new one.
		coord := s.Store.Coord
		var cut int64
		for _, id := range s.IDs() {
			if id != coord && s.Store.Topo[id] != coord && s.Store.Topo[id] != 0 && s.Procs[id].State == Running {
				cut = id
				break
			}
		}
		if cut != 0 {
			s.CutBoth(cut, coord)
			work(20)
			s.Crash(s.Store.Topo[cut])
			work(300)
			s.HealNet()
		}
		work(300)
		return trace
	}
	for _, method := range []election.Method{election.Default, election.Lease} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprint(method, "/", seed), func(t *testing.T) {
				eager, lazy := scenario(method, false, seed), scenario(method, true, seed)
				for i := range min(len(eager), len(lazy)) {
					if eager[i] != lazy[i] {
						lo := max(0, i-15)
						t.Fatalf("runs diverge at event %d:\neager: %s\nlazy:  %s\ncontext (eager):\n%s", i, eager[i], lazy[i],
							strings.Join(eager[lo:i+1], "\n"))
					}
				}
				if len(eager) != len(lazy) {
					t.Fatalf("eager run has %d events, lazy %d", len(eager), len(lazy))
				}
			})
		}
	}
}
