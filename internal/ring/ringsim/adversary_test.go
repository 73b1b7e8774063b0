package ringsim

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/token"
)

// The adversary holds the cluster key: at any moment it sends any frame
// type, in any node's name, with any field values (the edges of int64 as
// well as values near the true ones), as a datagram to any node, or on a
// node's inbound link that it opened in any node's name (its HELLO
// authenticates), or on an outbound link in the name of the node at its
// other end. Frames only propose; the store decides. On every schedule:
//
//   - no two critical sections that can commit run at once, and the
//     store's commits follow the token's order (checkInvariants, every tick);
//   - no work is lost: every piece of work a node was given is done once
//     (the work model of Sim.Work: a client's message waits for the node's
//     next committed critical section);
//   - within 2 s of the adversary's last frame, work given then to every
//     node is done everywhere;
//   - the attack costs at most a bounded number of new token generations.
//
// RINGSIM_ADVERSARY_CHECKS sets the number of schedules (make
// test-adversary runs many more than make test).

// adversaryChecks is the number of schedules a run of make test tries.
const adversaryChecks = 1500

// maxForgedFrames bounds the adversary's frames in one schedule.
const maxForgedFrames = 100

func TestAdversary(t *testing.T) {
	defer adversaryChecksFlag(t)()
	rapid.Check(t, func(rt *rapid.T) { runAdversary(rt, frameTypes) })
}

// adversaryChecksFlag sets rapid's number of checks for an adversary test
// (unless -rapid.checks was given) and returns what puts it back.
func adversaryChecksFlag(t *testing.T) func() {
	checks := adversaryChecks
	if testing.Short() {
		checks = 200
	}
	if v := os.Getenv("RINGSIM_ADVERSARY_CHECKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RINGSIM_ADVERSARY_CHECKS=%q: want a positive number", v)
		}
		checks = n
	}
	f := flag.Lookup("rapid.checks")
	if f == nil || f.Value.String() != "100" {
		return func() {}
	}
	_ = f.Value.Set(strconv.Itoa(checks))
	return func() { _ = f.Value.Set("100") }
}

// TestAdversaryTokens is the adversary of TestAdversary with forged TOKEN
// frames only (any stamp, on links it opened in any node's name): the
// attacks of a key holder on the token itself.
func TestAdversaryTokens(t *testing.T) {
	defer adversaryChecksFlag(t)()
	rapid.Check(t, func(rt *rapid.T) { runAdversary(rt, []ring.MsgType{ring.MsgToken}) })
}

// edges are the values a forger tries first: the ends of int64 and those
// next to them.
var edges = []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, 2, math.MaxInt64 - 1, math.MaxInt64}

// around draws a value near v, or an edge of int64.
func around(rt *rapid.T, v int64, label string) int64 {
	if rapid.Bool().Draw(rt, label+" at an edge") {
		return rapid.SampledFrom(edges).Draw(rt, label)
	}
	d := rapid.Int64Range(-3, 1000).Draw(rt, label+" offset")
	if d > 3 {
		d = rapid.SampledFrom([]int64{4, 10, 100, 1000}).Draw(rt, label+" jump")
	}
	if (d > 0 && v > math.MaxInt64-d) || (d < 0 && v < math.MinInt64-d) {
		return v
	}
	return v + d
}

var frameTypes = []ring.MsgType{
	ring.MsgJoin, ring.MsgSuccessor, ring.MsgSuccessorAck, ring.MsgSuccessorRequest, ring.MsgRejoin,
	ring.MsgLeave, ring.MsgLeaveOK, ring.MsgCoordinator, ring.MsgHandoff, ring.MsgToken, ring.MsgTokenAck,
	ring.MsgPing, ring.MsgPong, ring.MsgWake, ring.MsgElection,
}

// forge draws one frame and delivers it the way the adversary can. It
// reports false if no frame went out (the node's decoder would refuse it,
// or the path does not exist).
func forge(rt *rapid.T, s *Sim, ids []int64, types []ring.MsgType) bool {
	live := s.Live()
	if len(live) == 0 {
		return false
	}
	to := rapid.SampledFrom(live).Draw(rt, "to")
	q := s.Procs[to]
	names := append(slices.Clone(ids), ids[len(ids)-1]+1) // a node of no node table too
	m := ring.Msg{
		Type:  rapid.SampledFrom(types).Draw(rt, "type"),
		From:  rapid.SampledFrom(names).Draw(rt, "from"),
		To:    to,
		Epoch: around(rt, s.Store.Epoch, "epoch"),
		Via:   ring.Via(rapid.IntRange(0, 2).Draw(rt, "via")),
	}
	switch m.Type {
	case ring.MsgToken:
		m.Token = &token.Token{
			Stamp: token.Stamp{Gen: around(rt, s.Store.Gen, "gen"), Seq: around(rt, s.Store.Fence.Seq, "seq")},
			Busy:  int(rapid.SampledFrom(edges[3:]).Draw(rt, "busy")),
			Quiet: int(rapid.SampledFrom(edges[3:]).Draw(rt, "quiet")),
			Coord: rapid.SampledFrom(names).Draw(rt, "gossip coordinator"),
			Epoch: around(rt, s.Store.Epoch, "gossip epoch"),
		}
	case ring.MsgTokenAck:
		m.Stamp = &token.Stamp{Gen: around(rt, s.Store.Gen, "gen"), Seq: around(rt, s.Store.Fence.Seq, "seq")}
		m.Stale = rapid.Bool().Draw(rt, "stale")
	case ring.MsgPing:
		// The link proof the adversary can make: none, or one under a
		// secret it guessed (it knows no store's).
		if rapid.Bool().Draw(rt, "ping stamp") {
			st := token.Stamp{Gen: around(rt, s.Store.Gen, "gen"), Seq: around(rt, s.Store.Fence.Seq, "seq")}
			m.Stamp = &st
			m.Proof = rapid.SampledFrom([]string{"", token.ProveLink("", st), token.ProveLink("guess", st), token.Prove("", st)}).Draw(rt, "proof")
		}
	case ring.MsgSuccessor, ring.MsgSuccessorAck:
		m.Succ = rapid.SampledFrom(names).Draw(rt, "succ")
		m.Ver = around(rt, 1, "ver")
	case ring.MsgSuccessorRequest:
		m.Failed = rapid.SampledFrom(append(names, 0)).Draw(rt, "failed")
	case ring.MsgHandoff:
		m.Troubled = rapid.Bool().Draw(rt, "troubled")
	case ring.MsgElection:
		m.Election = &election.Msg{
			Method: rapid.SampledFrom([]election.Method{election.Ring, election.ChangRoberts, election.Bully}).Draw(rt, "method"),
			Kind:   rapid.SampledFrom([]election.Kind{election.KindElection, election.KindOK, election.KindElected, election.KindAck}).Draw(rt, "kind"),
			Round:  election.Round{Initiator: rapid.SampledFrom(names).Draw(rt, "initiator"), N: uint64(around(rt, 1, "round"))},
			Seq:    uint64(around(rt, 1, "hop")),
			Cand:   rapid.SampledFrom(names).Draw(rt, "candidate"),
			Leader: rapid.SampledFrom(names).Draw(rt, "leader"),
			Hops:   int(rapid.Int64Range(0, 3).Draw(rt, "hops")),
		}
		m.Election.From, m.Election.To = m.From, to
	}
	// What the node's decoder refuses never reaches the protocol.
	payload, err := m.Payload()
	if err != nil {
		return false
	}
	parsed, err := ring.ParseMsg(string(m.Type), m.From, m.Epoch, payload, m.Via)
	if err != nil {
		return false
	}
	parsed.To = to
	switch m.Via {
	case ring.ViaPred:
		if q.pred != m.From {
			s.DialAs(to, m.From)
			s.Step() // the link is up before the frame
		}
	case ring.ViaSucc:
		if q.succ == 0 {
			return false
		}
		parsed.From = q.succ // only the dialled node's name passes on that link
		if parsed.Election != nil {
			parsed.Election.From = q.succ
		}
	}
	s.Inject(to, parsed)
	return true
}

// pendingWork reports whether node p has work not yet done.
func pendingWork(p *Proc) bool {
	return p.work || slices.ContainsFunc(p.visits, func(v visit) bool { return v.work })
}

func runAdversary(rt *rapid.T, types []ring.MsgType) {
	n := rapid.IntRange(2, 6).Draw(rt, "nodes")
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	s := New(rapid.Uint64().Draw(rt, "seed"), ids...)
	s.Cfg = ring.DefaultConfig
	s.IdleVisits = true // as the chat service: no work, no store
	s.Lazy = rapid.Bool().Draw(rt, "lazy")
	var trace []string
	s.Trace = func(line string) {
		trace = append(trace, line)
		if len(trace) > 300 {
			trace = trace[1:]
		}
	}
	fail := func(format string, args ...any) {
		rt.Fatalf("%s\nlast events:\n%s", fmt.Sprintf(format, args...), joinLines(trace))
	}
	check := func() {
		if err := invariantError(s); err != nil {
			fail("%v", err)
		}
	}
	for _, id := range ids {
		s.Start(id)
	}
	if !s.RunUntil(2000, func() bool { return s.Healthy() == nil && s.Store.Gen > 0 }) {
		fail("the ring did not form: %v", s.Healthy())
	}
	genBefore := s.Store.Gen
	frames, tokens := 0, 0
	for i := range rapid.IntRange(1, maxForgedFrames).Draw(rt, "frames") {
		for range rapid.IntRange(0, 30).Draw(rt, fmt.Sprint("gap ", i)) {
			s.Step()
			check()
		}
		if rapid.IntRange(0, 3).Draw(rt, "work now") == 0 {
			s.Work(rapid.SampledFrom(ids).Draw(rt, "work at"))
		}
		if forge(rt, s, ids, types) {
			frames++
		}
	}
	for _, id := range ids {
		if s.Procs[id].State != Running {
			fail("node %d is not running (%v): a frame stopped it", id, s.Procs[id].State)
		}
	}
	// Within 2 s of the last frame, work given now is done everywhere, and
	// so is every earlier piece (nothing lost).
	last := s.Now
	worked := map[int64]int{}
	for _, id := range ids {
		worked[id] = s.Procs[id].Worked
		s.Work(id)
	}
	done := func() bool {
		for _, id := range ids {
			p := s.Procs[id]
			if p.State != Running || pendingWork(p) || p.Worked == worked[id] {
				return false
			}
		}
		return true
	}
	for !done() {
		if s.Now-last > int64(within2s(s)) {
			pend := map[int64]bool{}
			for _, id := range ids {
				pend[id] = pendingWork(s.Procs[id])
			}
			fail("work not done within 2 s of the adversary's last frame (%d frames, %d tokens): pending %v; healthy: %v",
				frames, tokens, pend, s.Healthy())
		}
		s.Step()
		check()
	}
	// The bound: each forged frame may cost the ring at most one
	// generation (a copy of the current generation that takes the real
	// token's place and ends at the largest sequence), plus one.
	if regen := s.Store.Gen - genBefore; regen > int64(frames)+1 {
		fail("%d new token generations for %d forged frames", regen, frames)
	}
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
