package electsim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/election"
)

// quietBound is how long after the last fault every live node must agree:
// a participation timing out and a new round (2·ResultTicks), a challenge,
// a failure detection, a store read, and a lease running out, with room for
// a second restart.
func quietBound(s *Sim) int {
	c := s.cfg
	return 5*c.Elect.ResultTicks + c.Elect.ChallengeTicks + 2*c.DetectTicks + c.StoreReadEvery + 2*c.Elect.LeaseTicks
}

// settle runs s until it has converged, then on for 2·ResultTicks: the
// coordinator must not change any more (a late election may make it claim
// a new epoch, after which all must agree again). It fails the test if
// that takes longer than quietBound or a safety invariant breaks.
func settle(t testing.TB, s *Sim, what string) int64 {
	t.Helper()
	if err := s.Settle(quietBound(s)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return s.Now
}

type scenario struct {
	name string
	// run drives the fault period (from t=0) and returns when faults stop.
	run func(s *Sim)
	// crash: the scenario crashes a node, so it needs two.
	crash bool
}

func startAll(s *Sim) {
	for _, id := range s.IDs() {
		s.Start(id)
	}
}

func lowest(s *Sim) int64  { return s.IDs()[0] }
func highest(s *Sim) int64 { ids := s.IDs(); return ids[len(ids)-1] }

var scenarios = []scenario{
	{name: "one initiator", run: func(s *Sim) { s.Start(lowest(s)) }},
	{name: "all initiate", run: startAll},
	{name: "candidate crashes", crash: true, run: func(s *Sim) {
		s.Start(lowest(s))
		if s.cfg.Method == election.Lease { // the candidate is the one acquiring: crash it holding
			s.RunUntil(func() bool { return s.Node(lowest(s)).M.Holding() }, 100)
			s.Crash(lowest(s))
			return
		}
		s.Run(2)
		s.Crash(highest(s))
	}},
	{name: "initiator crashes", crash: true, run: func(s *Sim) {
		s.Start(lowest(s))
		s.Run(s.cfg.MaxDelay)
		s.Crash(lowest(s))
	}},
	{name: "20% loss", run: func(s *Sim) {
		s.Loss = 0.2
		s.Start(lowest(s))
		s.Run(300)
		s.Loss = 0
	}},
	{name: "duplication", run: func(s *Sim) {
		s.Dup = 0.3
		startAll(s)
		s.Run(200)
		s.Dup = 0
	}},
	{name: "coordinator crashes", crash: true, run: func(s *Sim) {
		startAll(s)
		settleQuick(s)
		if s.cfg.Method == election.Lease {
			for _, n := range s.Nodes {
				if n.M.Holding() {
					s.Crash(n.ID)
				}
			}
			return
		}
		s.Crash(highest(s))
	}},
	{name: "higher node joins", crash: true, run: func(s *Sim) {
		s.Crash(highest(s))
		startAll(s)
		settleQuick(s)
		s.Restart(highest(s)) // it reads the lower coordinator from the store and challenges it
	}},
}

func settleQuick(s *Sim) { s.RunUntil(func() bool { return s.Converged() == nil }, 2000) }

func TestScenarios(t *testing.T) {
	for _, meth := range election.Methods {
		for _, sc := range scenarios {
			for _, n := range []int{1, 2, 3, 5, 8, 16} {
				if sc.crash && n == 1 {
					continue
				}
				name := fmt.Sprintf("%s/%s/n=%d", meth, sc.name, n)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					s := New(Config{Method: meth, N: n, Seed: uint64(n) * 7919, MaxDelay: 2, BootDetect: true, DetectTicks: 40})
					sc.run(s)
					start := s.Now
					settle(t, s, name)
					t.Logf("%s: settled %d ticks after the faults (t=%d), %d msgs, %d acks, %d claims", name, s.Now-start, s.Now, s.Stats.Msgs(), s.Stats.Sent[election.KindAck], s.Stats.Claims)
				})
			}
		}
	}
}

// A lazy run (AdvanceTo at deadlines) is identical to an eager one (Tick
// every tick): the same trace, the same traffic.
func TestLazyEqualsEager(t *testing.T) {
	for _, meth := range election.Methods {
		var traces [2][]string
		var stats [2]string
		for i, lazy := range []bool{false, true} {
			s := New(Config{Method: meth, N: 6, Seed: 42, MaxDelay: 3, Loss: 0.1, Dup: 0.1, BootDetect: true, Lazy: lazy})
			s.Trace = func(line string) { traces[i] = append(traces[i], line) }
			startAll(s)
			s.Run(150)
			coord := s.Store.Coord
			if meth == election.Lease {
				coord = s.Lease.Holder
			}
			s.Crash(coord)
			s.Run(150)
			s.Restart(coord)
			s.Loss, s.Dup = 0, 0
			s.Run(600)
			stats[i] = fmt.Sprint(s.Stats, s.Store, s.Lease)
			if len(s.Violations) > 0 {
				t.Fatalf("%s: %v", meth, s.Violations)
			}
		}
		if strings.Join(traces[0], "\n") != strings.Join(traces[1], "\n") || stats[0] != stats[1] {
			t.Errorf("%s: lazy run differs from eager run\neager: %v %s\nlazy:  %v %s", meth, traces[0], stats[0], traces[1], stats[1])
		}
		if len(traces[0]) < 5 {
			t.Errorf("%s: trace too short to compare: %v", meth, traces[0])
		}
	}
}

// Measure reports the fault-free counts of the Machine doc comment.
func TestMeasure(t *testing.T) {
	for _, n := range []int{1, 2, 5, 16} {
		want := map[election.Method][2]int{ // one initiator (the lowest), all initiate
			election.Ring:         {2*n - 1, n*n + n*(n-1)},
			election.ChangRoberts: {3*n - 2, 3*n - 2},
			election.Bully:        {n*n - 1, n*n - 1},
			election.Lease:        {1, n},
		}
		for meth, w := range want {
			for i, all := range []bool{false, true} {
				msgs, acks, ticks, err := Measure(meth, n, all, 1)
				if err != nil {
					t.Fatal(err)
				}
				wantMsgs := w[i]
				if n == 1 && meth != election.Lease {
					wantMsgs = 0
				}
				wantAcks := wantMsgs
				if meth == election.Bully || meth == election.Lease {
					wantAcks = 0
				}
				if msgs != wantMsgs || acks != wantAcks || ticks < 1 {
					t.Errorf("%s n=%d all=%v: %d msgs %d acks in %d ticks; want %d msgs %d acks", meth, n, all, msgs, acks, ticks, wantMsgs, wantAcks)
				}
			}
		}
	}
}
