package ringsim

import (
	"fmt"
	"slices"

	"github.com/ringchat/ringchat/internal/ring"
)

// Network faults beyond Isolate: links cut one way, nodes cut from the
// store, a split, and packet loss on one node's traffic. They model what
// nft does on a real network: packets are dropped, nothing is reset, so a
// node finds out only by its own timeouts (a TOKEN not acknowledged, a
// PING not answered, a dial that times out, a store operation that fails).

// dialTimeoutTicks is how long a dial across a cut takes to fail (the
// SYN or its answer is dropped): longer than a node's successor watchdog
// (2 × FailTicks), as the transport's 2-s DialTimeout is against the
// product's 600-ms watchdog. A newer dial (a new assignment) abandons it.
const dialTimeoutTicks = 40

// rtoTicks is what one lost packet on a TCP link costs: the frame arrives
// after a retransmission (about 200 ms at the 20-ms tick).
const rtoTicks = 10

// storeTimeoutTicks is how long a store operation of a node cut from the
// store takes to fail: 1.1 s, as a dial into an nft cut times out in the
// chaos runs ("connect: connection timed out").
const storeTimeoutTicks = 55

// net holds the faults (directed: from -> to).
type netFaults struct {
	cut      map[[2]int64]bool
	storeCut map[int64]bool
	loss     map[int64]float64 // share of a node's packets (either way) dropped
}

func (f *netFaults) init() {
	if f.cut == nil {
		f.cut, f.storeCut, f.loss = map[[2]int64]bool{}, map[int64]bool{}, map[int64]float64{}
	}
}

// CutLink drops every packet from a to b (one way).
func (s *Sim) CutLink(a, b int64) {
	s.nf.init()
	s.tracef("cut %d->%d", a, b)
	s.nf.cut[[2]int64{a, b}] = true
}

// CutBoth drops every packet between a and b, both ways.
func (s *Sim) CutBoth(a, b int64) {
	s.CutLink(a, b)
	s.CutLink(b, a)
}

// Split cuts every node of side from every node not in it, both ways.
func (s *Sim) Split(side []int64) {
	for _, a := range side {
		for _, b := range s.IDs() {
			if !slices.Contains(side, b) {
				s.CutBoth(a, b)
			}
		}
	}
}

// CutStore cuts node id from the store: its operations and critical
// sections fail after a timeout.
func (s *Sim) CutStore(id int64) {
	s.nf.init()
	s.tracef("cut %d from the store", id)
	s.nf.storeCut[id] = true
}

// Lose drops share p of node id's packets, both ways (UDP datagrams are
// lost; a TCP frame arrives late, after a retransmission).
func (s *Sim) Lose(id int64, p float64) {
	s.nf.init()
	s.tracef("lose %.0f%% of node %d's packets", 100*p, id)
	s.nf.loss[id] = p
}

// HealNet undoes every CutLink, CutBoth, Split, CutStore and Lose.
func (s *Sim) HealNet() {
	s.tracef("heal the network")
	s.nf = netFaults{}
}

// blocked reports whether packets from a to b are dropped (an Isolate or a
// cut).
func (s *Sim) blocked(a, b int64) bool {
	return s.apart(a, b) || (a != b && s.nf.cut[[2]int64{a, b}])
}

// lost reports whether one packet between a and b is lost to loss.
func (s *Sim) lost(a, b int64) bool {
	p := max(s.nf.loss[a], s.nf.loss[b])
	return p > 0 && s.rng.Float64() < p
}

// tcpDelay is the delay of one frame from a to b: a hop, and a
// retransmission for every packet lost on the way.
func (s *Sim) tcpDelay(a, b int64) int64 {
	d := int64(1)
	for i := 0; i < 5 && s.lost(a, b); i++ {
		d += rtoTicks << i
	}
	return d
}

// storeCutFor reports whether node id cannot reach the store.
func (s *Sim) storeCutFor(id int64) bool { return s.nf.storeCut[id] }

// String describes the faults in force.
func (f netFaults) String() string {
	return fmt.Sprintf("cuts %v, store cut %v, loss %v", f.cut, f.storeCut, f.loss)
}

// Trouble tells node id whether its store link is troubled, as the
// runtime judges it from its visits (internal/node: visits that fail or
// run out of their budget while the store works). judgeTrouble calls it
// for a node whose visits run out of their budget under Lose; a test may
// call it itself.
func (s *Sim) Trouble(id int64, t bool) {
	p := s.Procs[id]
	if p == nil || p.State != Running {
		return
	}
	s.tracef("node %d troubled=%v", id, t)
	if s.Lazy {
		p.Node.AdvanceTo(p.clock(s.Now))
		s.flush(p)
	}
	p.Node.SetTroubled(t)
	s.flush(p)
}

// storeRoundTrips is how many round trips to the store one operation or
// visit makes (a statement or two, the COMMIT).
const storeRoundTrips = 3

// visitBudgetTicks is a visit's time budget: a visit whose store lag is
// longer fails at it. 300 ms: two lost packets fail a visit, so that at
// 20 % loss about two in five of a lossy node's visits fail, as about a
// third did in the chaos suite's network runs.
const visitBudgetTicks = 15

// troubleTicks is the runtime's trouble window (2 s): two visits over
// budget within it make a node troubled, and a window without one clears
// it (internal/node's visitTrouble).
const troubleTicks = 100

// storeLag is what loss on node id's packets adds to one exchange with
// the store: each of its packets lost costs a retransmission.
func (s *Sim) storeLag(id int64) int64 {
	if !s.StoreLoss || s.nf.loss[id] == 0 {
		return 0
	}
	var d int64
	for range 2 * storeRoundTrips {
		d += s.tcpDelay(id, 0) - 1
	}
	return d
}

// judgeTrouble judges p's store link as the runtime does, after a visit
// over its budget (over) or at the end of its visits' step, and tells the
// node when the verdict changes.
func (s *Sim) judgeTrouble(p *Proc, over bool) {
	if over {
		p.overBudget = append(p.overBudget, s.Now)
	}
	for len(p.overBudget) > 0 && s.Now-p.overBudget[0] > troubleTicks {
		p.overBudget = p.overBudget[1:]
	}
	switch {
	case !p.troubled && len(p.overBudget) >= 2:
		p.troubled = true
		s.Trouble(p.ID, true)
	case p.troubled && len(p.overBudget) == 0:
		p.troubled = false
		s.Trouble(p.ID, false)
	}
}

// opTimeoutTicks is how long a store operation of a lossy node takes at
// most before it fails: internal/node's CheckTimeout (200 ms) for a read
// a token waits on; for the rest, as a cut (storeTimeoutTicks): the
// node's sockets to the database server give up what stays
// unacknowledged for a second (TCP_USER_TIMEOUT).
func opTimeoutTicks(op ring.Op) int64 {
	if op.Kind == ring.OpCheckMember || op.Kind == ring.OpReadFence {
		return 10
	}
	return storeTimeoutTicks
}
