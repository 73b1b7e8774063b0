package ringsim

import (
	"fmt"
	"strings"
	"testing"
)

// TestLazyEqualsEager: a runtime that sleeps until the next deadline
// (AdvanceTo) behaves exactly like one that ticks every tick. The same
// seeded scenario runs both ways and must produce the same trace, event
// for event; a late NextDeadline would show as a divergence.
func TestLazyEqualsEager(t *testing.T) {
	scenario := func(lazy bool, seed uint64) []string {
		s := New(seed, 1, 2, 3, 4, 5, 6)
		s.Lazy = lazy
		s.Loss, s.Dup, s.MaxDelay, s.HoldTicks = 0.1, 0.1, 3, 2
		var trace []string
		s.Trace = func(l string) { trace = append(trace, l) }
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
		return trace
	}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			eager, lazy := scenario(false, seed), scenario(true, seed)
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
