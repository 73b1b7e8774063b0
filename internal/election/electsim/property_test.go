package electsim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/election"
	"pgregory.net/rapid"
)

// Under any schedule of crashes, restarts, loss and duplication bursts and
// simultaneous starts: never two coordinators for one epoch (nor two lease
// holders), and once the faults stop every live node agrees on the highest
// live id (lease: on the one holder) within quietBound, and stays so.
func TestPropertyConverges(t *testing.T) {
	for _, meth := range election.Methods {
		t.Run(string(meth), func(t *testing.T) {
			t.Parallel()
			rapid.Check(t, func(rt *rapid.T) { runSchedule(rt, meth) })
		})
	}
}

func runSchedule(rt *rapid.T, meth election.Method) {
	n := rapid.IntRange(1, 16).Draw(rt, "nodes")
	// Sparse ids: the ring order is the id order whatever the gaps.
	ids := rapid.SliceOfNDistinct(rapid.Int64Range(1, 200), n, n, rapid.ID[int64]).Draw(rt, "ids")
	s := New(Config{
		Method:      meth,
		IDs:         ids,
		Seed:        rapid.Uint64().Draw(rt, "seed"),
		MaxDelay:    rapid.IntRange(1, 3).Draw(rt, "max delay"),
		StoreDelay:  rapid.IntRange(1, 4).Draw(rt, "store delay"),
		DetectTicks: rapid.IntRange(5, 40).Draw(rt, "detect ticks"),
		BootDetect:  true,
		Lazy:        rapid.Bool().Draw(rt, "lazy"),
	})
	ids = s.IDs()
	var log []string
	s.Trace = func(line string) {
		if len(log) < 100000 {
			log = append(log, line)
		}
	}
	down := func() []int64 {
		var out []int64
		for _, id := range ids {
			if !slices.Contains(s.Live(), id) {
				out = append(out, id)
			}
		}
		return out
	}
	for i := range rapid.IntRange(1, 10).Draw(rt, "faults") {
		switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprint("fault ", i)) {
		case 0:
			if live := s.Live(); len(live) > 0 {
				s.Crash(rapid.SampledFrom(live).Draw(rt, "crash"))
			}
		case 1:
			if d := down(); len(d) > 0 {
				s.Restart(rapid.SampledFrom(d).Draw(rt, "restart"))
			}
		case 2:
			s.Loss = rapid.Float64Range(0.05, 0.6).Draw(rt, "loss")
		case 3:
			s.Dup = rapid.Float64Range(0.05, 0.6).Draw(rt, "dup")
		case 4:
			s.Loss, s.Dup = 0, 0
		case 5:
			for _, id := range s.Live() {
				if rapid.Bool().Draw(rt, fmt.Sprint("start ", id)) {
					s.Start(id)
				}
			}
		}
		s.Run(rapid.IntRange(0, 60).Draw(rt, "then run"))
	}
	s.Loss, s.Dup = 0, 0
	if len(s.Live()) == 0 {
		s.Restart(rapid.SampledFrom(ids).Draw(rt, "survivor"))
	}
	fail := func(format string, args ...any) {
		if len(log) > 300 {
			log = log[len(log)-300:]
		}
		rt.Fatalf("%s\ntrace (last lines):\n%s", fmt.Sprintf(format, args...), strings.Join(log, "\n"))
	}
	if err := s.Settle(quietBound(s)); err != nil {
		fail("%v", err)
	}
}
