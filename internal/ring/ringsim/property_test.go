package ringsim

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/ring"
)

// TestRandomFaultSchedules: under random crashes, stalls, restarts, clean
// leaves, a node cut off from the others (not from the store) for a while,
// slow store replies and a lossy, duplicating, reordering network, there is
// never more
// than one coordinator per epoch nor more than one critical section with the
// newest token, critical sections commit in token order, and once the faults
// stop the ring heals: one cycle of the running nodes, one coordinator that
// everyone knows, the token moving through every node. The election method
// is drawn too (or a mix of the voting methods, one per node); with voting
// methods the healed ring's coordinator is the highest id.
func TestRandomFaultSchedules(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(rt, "nodes")
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(i + 1)
		}
		s := New(rapid.Uint64().Draw(rt, "seed"), ids...)
		s.Loss = rapid.Float64Range(0, 0.3).Draw(rt, "loss")
		s.Dup = rapid.Float64Range(0, 0.3).Draw(rt, "dup")
		s.MaxDelay = rapid.Int64Range(0, 5).Draw(rt, "delay")
		s.HoldTicks = rapid.Int64Range(1, 3).Draw(rt, "hold")
		s.OpDelay = rapid.Int64Range(0, 3).Draw(rt, "store reply delay")
		s.Lazy = rapid.Bool().Draw(rt, "lazy")
		method := rapid.SampledFrom(election.Methods).Draw(rt, "method")
		mixed := method != election.Lease && rapid.Bool().Draw(rt, "mixed methods")
		methods := map[int64]election.Method{}
		for _, id := range ids {
			methods[id] = method
			if mixed {
				methods[id] = rapid.SampledFrom([]election.Method{election.Ring, election.ChangRoberts, election.Bully}).Draw(rt, "node method")
			}
		}
		s.Cfg = func(id int64) ring.Config {
			c := ring.TestConfig(id)
			c.Election.Method = methods[id]
			return c
		}
		var log []string
		s.Trace = func(line string) {
			log = append(log, line)
			if len(log) > 100000 {
				log = log[1:]
			}
		}
		fail := func(format string, args ...any) {
			for _, id := range s.IDs() {
				p := s.Procs[id]
				if p.Node == nil {
					continue
				}
				c, e := p.Node.Coordinator()
				succ, up := p.Node.Successor()
				req, _ := p.Node.PendingRequest()
				log = append(log, fmt.Sprintf("state %d: %v phase=%s coord=%d epoch=%d isCoord=%v succ=%d up=%v req=%s holds=%v",
					id, p.State, p.Node.Phase(), c, e, p.Node.IsCoordinator(), succ, up, req, p.Node.HoldsToken()))
			}
			log = append(log, fmt.Sprintf("store: coord=%d epoch=%d topo=%v gen=%d", s.Store.Coord, s.Store.Epoch, s.Store.Topo, s.Store.Gen))
			if path := os.Getenv("RINGSIM_TRACE"); path != "" {
				_ = os.WriteFile(path, []byte(strings.Join(log, "\n")), 0o644)
			}
			rt.Fatalf(format, args...)
		}
		check := func() {
			if err := invariantError(s); err != nil {
				fail("t=%d: %v", s.Now, err)
			}
		}
		order := rapid.Permutation(ids).Draw(rt, "start order")
		for _, id := range order {
			s.Start(id)
			for range rapid.IntRange(0, 10).Draw(rt, "gap") {
				s.Step()
				check()
			}
		}
		// lasting puts a fault on victim, runs ticks steps and lifts it.
		lasting := func(victim int64, ticks int, start, end func(int64)) {
			start(victim)
			for range ticks {
				s.Step()
				check()
			}
			end(victim)
		}
		faults := rapid.IntRange(0, 6).Draw(rt, "faults")
		for i := range faults {
			live := s.Live()
			kind := rapid.IntRange(0, 10).Draw(rt, fmt.Sprint("fault ", i))
			switch {
			case kind == 0 && len(live) > 0:
				s.Crash(rapid.SampledFrom(live).Draw(rt, "crash"))
			case kind == 1 && s.Procs[s.Store.Coord] != nil:
				s.Crash(s.Store.Coord)
			case kind == 2 && len(live) > 0:
				lasting(rapid.SampledFrom(live).Draw(rt, "stall"), rapid.IntRange(0, 80).Draw(rt, "stalled for"), s.Stall, s.Wake)
			case kind == 3 && len(live) > 0:
				s.Leave(rapid.SampledFrom(live).Draw(rt, "leave"))
			case kind == 4:
				s.Start(rapid.SampledFrom(ids).Draw(rt, "restart"))
			case kind == 5:
				if h := s.Holders(); len(h) > 0 {
					s.Crash(h[0])
				}
			case kind == 6 && len(live) > 0:
				lasting(rapid.SampledFrom(live).Draw(rt, "cut off"), rapid.IntRange(0, 200).Draw(rt, "cut off for"), s.Isolate, s.Heal)
			case kind >= 7 && len(ids) > 1:
				netFault(rt, s, kind, ids, check)
			}
			for range rapid.IntRange(0, 60).Draw(rt, "after fault") {
				s.Step()
				check()
			}
		}
		// Faults stop: every node that is down is started again, the
		// network becomes reliable.
		s.Loss, s.Dup = 0, 0
		for _, id := range ids {
			if s.Procs[id].State != Running {
				s.Start(id)
			}
		}
		var err error
		healed := false
		for range 2000 {
			s.Step()
			check()
			if err = s.Healthy(); err == nil {
				healed = true
				break
			}
		}
		if !healed {
			fail("ring did not heal within 2000 ticks: %v", err)
		}
		if live := s.Live(); method != election.Lease && len(live) > 0 {
			top := slices.Max(live)
			if !s.RunUntil(2000, func() bool { return s.Store.Coord == top && s.Healthy() == nil }) {
				fail("voting methods: coordinator %d, not the highest live node %d, 2000 ticks after healing (%v)",
					s.Store.Coord, top, s.Healthy())
			}
		}
		since := s.Now
		moving := false
		for range 2000 {
			s.Step()
			check()
			c := s.CommitsSince(since)
			if !slices.ContainsFunc(s.Live(), func(id int64) bool { return c[id] < 2 }) {
				moving = true
				break
			}
		}
		if !moving {
			fail("token not moving through every node after healing: %v", s.CommitsSince(since))
		}
	})
}

// invariantError is checkInvariants as an error, for rapid.
func invariantError(s *Sim) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	ft := &fakeT{}
	checkInvariants(ft, s)
	return ft.err
}

// netFault makes one network fault of the simulation (kind 7: a link cut
// one way; 8: both ways; 9: a node cut from the store; 10: a split or lost
// packets) for a while, checking the invariants at every tick, then heals
// the network.
func netFault(rt *rapid.T, s *Sim, kind int, ids []int64, check func()) {
	a := rapid.SampledFrom(ids).Draw(rt, "net a")
	b := rapid.SampledFrom(ids).Draw(rt, "net b")
	switch kind {
	case 7:
		s.CutLink(a, b)
	case 8:
		s.CutBoth(a, b)
	case 9:
		s.CutStore(a)
	default:
		if rapid.Bool().Draw(rt, "split") {
			s.Split(ids[:rapid.IntRange(1, len(ids)-1).Draw(rt, "split at")])
		} else {
			s.Lose(a, rapid.Float64Range(0.01, 0.3).Draw(rt, "packet loss"))
		}
	}
	for range rapid.IntRange(0, 300).Draw(rt, "net fault for") {
		s.Step()
		check()
	}
	s.HealNet()
}
