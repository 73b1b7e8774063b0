package ringsim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ringchat/ringchat/internal/ring"
)

// quietSetup describes a quiet ring: n nodes whose quiet token rests rest
// ticks once a lap; a critical section takes hold ticks, and a hop's budget
// (token HopTicks) covers laps times a hop and a critical section, so a
// hurried rotation (how long a WAKE hurries the token, and the WAKE's rate
// limit) lasts that many laps that nobody rests. The default 20 ms per hop
// covers several loopback hops and empty visits.
type quietSetup struct {
	seed                uint64
	n, rest, hold, laps int
	lazy                bool
}

// quietRing is a settled quiet ring to which work arrives.
type quietRing struct {
	s     *Sim
	cfg   ring.Config // node 1's; the token timeouts are the same everywhere
	order []int64     // the ring, from the coordinator
	gen   int64       // the token's generation once settled: nothing fails, so it stays
	log   []string    // arrivals and when their work was done, for a failure
	trace []string    // the last events, for a failure
}

// startQuiet starts a quiet ring and runs it until the election has
// settled and the token rests at the coordinator.
func startQuiet(t fatalf, q quietSetup) *quietRing {
	t.Helper()
	ids := make([]int64, q.n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	s := New(q.seed, ids...)
	r := &quietRing{s: s}
	s.Trace = func(line string) {
		if r.trace = append(r.trace, line); len(r.trace) > 60 {
			r.trace = r.trace[1:]
		}
	}
	s.HoldTicks = int64(q.hold)
	s.Lazy = q.lazy
	s.Cfg = func(id int64) ring.Config {
		c := restingConfig(q.rest)(id)
		c.Token.HopTicks = q.laps * (1 + q.hold)
		return c
	}
	r.cfg = s.Cfg(1)
	for _, id := range ids {
		s.Start(id)
		s.Run(5)
	}
	// The election settles (a voting method makes the highest id the
	// coordinator) and the coordinator's token goes round.
	s.Run(bound + 2*q.rest)
	if err := s.Healthy(); err != nil {
		t.Fatalf("ring of %d not healthy after %d ticks: %v", q.n, s.Now, err)
	}
	order, _ := ring.Order(s.Store.Topo)
	i := slices.Index(order, s.Store.Coord)
	r.order = append(slices.Clone(order[i:]), order[:i]...)
	// Resting: the coordinator holds the token, not visiting, and its
	// successor has not had it, for two ticks running (a token on its way
	// reaches the successor in a tick).
	resting := 0
	if !s.RunUntil(4*bound, func() bool {
		c := s.Procs[s.Store.Coord].Node
		tok, ok := c.HeldToken()
		succ, _ := c.Successor()
		if ok && !c.Visiting() && s.Procs[succ].Node.LastStamp() != tok.Stamp {
			resting++
		} else {
			resting = 0
		}
		return resting >= 2
	}) {
		t.Fatalf("the token of a quiet ring of %d never rested at the coordinator %d", q.n, s.Store.Coord)
	}
	r.gen = s.Store.Gen
	return r
}

// lap is the number of ticks a lap takes in the simulation when nobody
// rests the token: a hop and a critical section at every node.
func (r *quietRing) lap() int64 { return int64(len(r.order)) * (1 + r.s.HoldTicks) }

// bound is how soon work must be done after it arrives: a hurried
// rotation (at least a lap), a tick for the WAKE's datagram and one more.
// The rest is far longer.
func (r *quietRing) bound() int64 {
	return int64(r.cfg.Token.HurriedRotation(len(r.order))) + 2
}

// work brings work to node id, as a client's message does, and runs until
// a critical section there has done it. It returns an error if that takes
// longer than the bound.
func (r *quietRing) work(id int64) error {
	s, p := r.s, r.s.Procs[id]
	before, at := p.Worked, s.Now
	holders := s.Holders()
	s.Work(id)
	ok := s.RunUntil(int(r.bound()), func() bool { return p.Worked > before })
	done := "not done"
	if ok {
		done = fmt.Sprintf("done at t=%d", p.WorkedAt)
	}
	r.log = append(r.log, fmt.Sprintf("t=%d work at node %d (token at %v): %s", at, id, holders, done))
	if ok && s.Store.Gen == r.gen {
		return nil
	}
	if ok {
		return fmt.Errorf("the token was made anew (generation %d -> %d) on a healthy ring while work arrived at node %d at t=%d; ring %v from the coordinator; arrivals:\n%s\nlast events:\n%s",
			r.gen, s.Store.Gen, id, at, r.order, strings.Join(r.log, "\n"), strings.Join(r.trace, "\n"))
	}
	return fmt.Errorf("work that arrived at node %d at t=%d (token at %v) not done within %d ticks (a hurried rotation is %d, the rest %d); ring %v from the coordinator; arrivals:\n%s\nlast events:\n%s",
		id, at, holders, r.bound(), r.cfg.Token.HurriedRotation(len(r.order)), r.cfg.Token.IdleHoldTicks, r.order,
		strings.Join(r.log, "\n"), strings.Join(r.trace, "\n"))
}

// Work that arrives at a node of a quiet ring is done within a hurried
// rotation, never after the quiet token's rest, wherever the token is when
// it arrives: resting at the coordinator, hurrying round after other work,
// or about to rest again. The arrivals make a conversation between two
// nodes (work at a, done; d ticks later work at b; done; d ticks later at
// a again ...), for every pair of nodes (a node with itself too) and every
// delay up to two laps. Some of them arrive while the node's last WAKE is
// within its rate limit, just after the token passed the node, or while
// the token visits the coordinator that wants it.
func TestWorkNeverWaitsForTheQuietRest(t *testing.T) {
	const n = 5
	for a := int64(1); a <= n; a++ {
		for b := int64(1); b <= n; b++ {
			for d := range 2*n*2 + 1 {
				r := startQuiet(t, quietSetup{seed: 21, n: n, rest: 100, hold: 1, laps: 4})
				if r.bound() >= int64(r.cfg.Token.IdleHoldTicks) {
					t.Fatalf("bound %d not below the rest %d", r.bound(), r.cfg.Token.IdleHoldTicks)
				}
				for i := range 6 {
					r.s.Run(d)
					id := a
					if i%2 == 1 {
						id = b
					}
					if err := r.work(id); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

// TestWorkArrivalsNeverWaitForTheQuietRest: on quiet rings of any size,
// critical sections of any length and hurried rotations of one to four
// laps, work that arrives at any node at any moment (at once after the
// previous work was done, within a lap or two, or after a rest or more),
// alone or as a conversation between two nodes, is done within a hurried
// rotation, never after a rest.
func TestWorkArrivalsNeverWaitForTheQuietRest(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 7).Draw(rt, "nodes")
		hold := rapid.IntRange(1, 2).Draw(rt, "hold")
		laps := rapid.IntRange(1, 4).Draw(rt, "laps per hurried rotation")
		hurried := n * laps * (1 + hold)
		r := startQuiet(rt, quietSetup{
			seed: rapid.Uint64().Draw(rt, "seed"),
			n:    n,
			rest: rapid.IntRange(2*hurried, 4*hurried).Draw(rt, "rest"),
			hold: hold,
			laps: laps,
			lazy: rapid.Bool().Draw(rt, "lazy"),
		})
		ids := r.s.IDs()
		conversation := rapid.Bool().Draw(rt, "conversation")
		var a, b int64
		if conversation {
			a = rapid.SampledFrom(ids).Draw(rt, "a")
			b = rapid.SampledFrom(ids).Draw(rt, "b")
		}
		rest := r.cfg.Token.IdleHoldTicks
		for i := range rapid.IntRange(1, 12).Draw(rt, "arrivals") {
			var d int
			switch rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("when ", i)) {
			case 0: // at once
			case 1:
				d = rapid.IntRange(0, int(2*r.lap())).Draw(rt, "within two laps")
			case 2:
				d = rapid.IntRange(0, rest+int(2*r.lap())).Draw(rt, "up to a rest and two laps")
			}
			r.s.Run(d)
			id := a
			switch {
			case !conversation:
				id = rapid.SampledFrom(ids).Draw(rt, "node")
			case i%2 == 1:
				id = b
			}
			if err := r.work(id); err != nil {
				rt.Fatal(err)
			}
		}
	})
}
