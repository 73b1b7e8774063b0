// Package electsim runs election.Machines in a deterministic simulation: a
// seeded datagram network (delay, loss, duplication, reordering), node
// crashes and restarts, a model of the store (the coordinator row claimed by
// compare-and-set on the epoch, and the lease row) and a model of the host —
// the ring node — around every machine: it claims the role on Win, calls
// Claimed or ClaimLost, broadcasts COORDINATOR, reads the store now and then
// and calls Start when it finds its coordinator gone. Tests drive it tick by
// tick; the same seed gives the same run.
package electsim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/ringchat/ringchat/internal/election"
)

// Config describes a simulation.
type Config struct {
	Method election.Method
	N      int     // nodes, ids 1..N, unless IDs is set
	IDs    []int64 // node ids
	Seed   uint64
	// MaxDelay: a datagram takes 1..MaxDelay ticks (at least 1).
	MaxDelay int
	// Loss and Dup are the initial datagram loss and duplication
	// probabilities (Sim.Loss and Sim.Dup change them later).
	Loss, Dup float64
	// Elect holds the machines' timeouts; zero means ElectConfig(n, MaxDelay).
	Elect election.Config
	// StoreDelay: ticks a store operation takes, there and back (≥1).
	StoreDelay int
	// StoreReadEvery: every host reads the coordinator from the store this
	// often (0: 20; negative: never).
	StoreReadEvery int
	// DetectTicks: a host whose coordinator is down (or that finds itself
	// recorded as coordinator without holding the role) calls Start after
	// this many ticks and again every DetectTicks while it stays so
	// (0: 15; negative: never). BootDetect: also when it knows no
	// coordinator at all.
	DetectTicks int
	BootDetect  bool
	// Lazy drives machines as a runtime does: AdvanceTo their next
	// deadline and before every input instead of a Tick every tick. A
	// correct NextDeadline makes a lazy run identical to an eager one.
	Lazy bool
}

// ElectConfig is the sim's machine configuration for n nodes and datagram
// delays up to maxDelay: an ACK round trip fits in TimeoutTicks and a
// fault-free election (two circles of the ring) in ResultTicks.
func ElectConfig(n, maxDelay int) election.Config {
	maxDelay = max(maxDelay, 1)
	return election.Config{
		TimeoutTicks:   2*maxDelay + 1,
		Retries:        3,
		ResultTicks:    30 + 4*n*maxDelay,
		ChallengeTicks: 10,
		LeaseTicks:     60,
	}
}

// Host is a simulated node: its machine and its host's state.
type Host struct {
	ID int64
	M  *election.Machine
	Up bool
	// View is the coordinator the host adopted last, with its epoch.
	View, ViewEpoch int64
	// Believes is the epoch for which the host acts as coordinator: its
	// own claim not yet superseded (voting methods), or the lease held.
	Believes int64
	Reports  []election.Report

	born     int64  // sim time at which the machine's clock read 0
	started  uint64 // machine counters last traced
	restarts uint64
	inc      int // incarnation
	claiming bool
	detectAt int64
}

// Store models the coordinator row: epoch and coordinator, set by
// compare-and-set; History records every epoch's coordinator.
type Store struct {
	Epoch, Coord int64
	History      map[int64]int64
}

// LeaseRow models the lease row.
type LeaseRow struct {
	Holder, Epoch, ExpiresAt int64
	History                  map[int64]int64
}

// Stats counts traffic.
type Stats struct {
	Sent       map[election.Kind]int // election datagrams sent, by kind (ACK included)
	LeaseOps   int
	Claims     int // successful claims
	ClaimsLost int
	Broadcasts int // COORDINATOR datagrams
}

// Msgs is the number of algorithm messages (all but ACKs).
func (st Stats) Msgs() int {
	n := 0
	for k, c := range st.Sent {
		if k != election.KindAck {
			n += c
		}
	}
	return n
}

// Sim is a simulation.
type Sim struct {
	Now       int64
	Loss, Dup float64
	Nodes     []*Host // ascending id
	Store     Store
	Lease     LeaseRow
	Stats     Stats
	// Violations lists broken safety invariants (checked every tick).
	Violations []string
	// Trace, if set, receives a line per event.
	Trace func(string)

	cfg  Config
	ids  []int64
	byID map[int64]*Host
	rng  *rand.Rand
	q    eventQueue
	seq  uint64
	// delivering: the events of this tick run (machines are still at the
	// previous tick).
	delivering bool
}

// New builds a simulation with every node up and no coordinator.
func New(cfg Config) *Sim {
	ids := slices.Clone(cfg.IDs)
	if len(ids) == 0 {
		for i := range cfg.N {
			ids = append(ids, int64(i+1))
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	cfg.MaxDelay = max(cfg.MaxDelay, 1)
	cfg.StoreDelay = max(cfg.StoreDelay, 1)
	if cfg.Elect.TimeoutTicks == 0 {
		cfg.Elect = ElectConfig(len(ids), cfg.MaxDelay)
	}
	if cfg.StoreReadEvery == 0 {
		cfg.StoreReadEvery = 20
	}
	if cfg.DetectTicks == 0 {
		cfg.DetectTicks = 15
	}
	s := &Sim{
		Loss: cfg.Loss, Dup: cfg.Dup,
		Store: Store{History: map[int64]int64{}},
		Lease: LeaseRow{History: map[int64]int64{}},
		Stats: Stats{Sent: map[election.Kind]int{}},
		cfg:   cfg, ids: ids, byID: map[int64]*Host{},
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
	}
	for _, id := range ids {
		n := &Host{ID: id}
		s.Nodes = append(s.Nodes, n)
		s.byID[id] = n
		s.boot(n)
	}
	return s
}

// IDs returns the node ids, ascending.
func (s *Sim) IDs() []int64 { return slices.Clone(s.ids) }

// Node returns node id (nil if unknown).
func (s *Sim) Node(id int64) *Host { return s.byID[id] }

func (s *Sim) tracef(format string, args ...any) {
	if s.Trace != nil {
		s.Trace(fmt.Sprintf("t=%d ", s.Now) + fmt.Sprintf(format, args...))
	}
}

func (s *Sim) boot(n *Host) {
	c := s.cfg.Elect
	c.ID, c.Method = n.ID, s.cfg.Method
	n.M = election.New(c)
	n.M.SetPeers(s.ids)
	n.Up, n.born = true, s.Now
	n.inc++
	n.View, n.ViewEpoch, n.Believes, n.claiming, n.detectAt = 0, 0, 0, false, 0
	n.started, n.restarts = 0, 0
}

// Crash stops node id: it no longer receives or ticks; its datagrams in
// flight still arrive.
func (s *Sim) Crash(id int64) {
	if n := s.byID[id]; n != nil && n.Up {
		s.tracef("crash %d", id)
		n.Up = false
	}
}

// Restart starts node id afresh (a new machine, an empty host state); the
// host reads the store at once.
func (s *Sim) Restart(id int64) {
	n := s.byID[id]
	if n == nil || n.Up {
		return
	}
	s.tracef("restart %d", id)
	s.boot(n)
	s.readStore(n)
}

// Start makes node id's host call Start (coordinator failure detected).
func (s *Sim) Start(id int64) {
	if n := s.byID[id]; n != nil && n.Up {
		s.sync(n)
		n.M.Start()
		s.process(n)
	}
}

// Live returns the ids of the nodes that are up.
func (s *Sim) Live() []int64 {
	var out []int64
	for _, n := range s.Nodes {
		if n.Up {
			out = append(out, n.ID)
		}
	}
	return out
}

// sync brings a lazy machine's clock to where an eager one is: the
// previous tick while deliveries run, this tick after the ticks.
func (s *Sim) sync(n *Host) {
	if s.cfg.Lazy {
		t := s.Now
		if s.delivering {
			t--
		}
		n.M.AdvanceTo(t - n.born)
		s.process(n)
	}
}

// Step advances the simulation by one tick: deliveries and store answers
// due, then every machine's tick, then the hosts' duties, then the checks.
func (s *Sim) Step() {
	s.Now++
	s.delivering = true
	for s.q.Len() > 0 && s.q[0].at <= s.Now {
		e := heap.Pop(&s.q).(*event)
		e.run()
	}
	s.delivering = false
	for _, n := range s.Nodes {
		if !n.Up {
			continue
		}
		if !s.cfg.Lazy {
			n.M.Tick()
		} else if n.M.NextDeadline() <= s.Now-n.born {
			n.M.AdvanceTo(s.Now - n.born)
		}
		s.process(n)
	}
	for _, n := range s.Nodes {
		if n.Up {
			s.host(n)
		}
	}
	s.check()
}

// Run steps the simulation ticks times.
func (s *Sim) Run(ticks int) {
	for range ticks {
		s.Step()
	}
}

// RunUntil steps until cond holds (checked before each step) or limit
// ticks have passed; it reports whether cond held.
func (s *Sim) RunUntil(cond func() bool, limit int) bool {
	for range limit {
		if cond() {
			return true
		}
		s.Step()
	}
	return cond()
}

// send puts an election message on the network.
func (s *Sim) send(msg election.Msg) {
	s.Stats.Sent[msg.Kind]++
	s.datagram(func() {
		n := s.byID[msg.To]
		if n == nil || !n.Up {
			return
		}
		s.sync(n)
		if s.Trace != nil {
			s.tracef("%d→%d %s %s %s seq=%d cands=%v cand=%d leader=%d hops=%d", msg.From, msg.To, msg.Method, msg.Kind, msg.Round, msg.Seq, msg.Cands, msg.Cand, msg.Leader, msg.Hops)
		}
		n.M.Heard(msg.From)
		n.M.Step(msg)
		s.process(n)
	})
}

// broadcast sends COORDINATOR(coord, epoch) from coord to every other node.
func (s *Sim) broadcast(coord, epoch int64) {
	for _, to := range s.ids {
		if to == coord {
			continue
		}
		s.Stats.Broadcasts++
		s.datagram(func() {
			n := s.byID[to]
			if n == nil || !n.Up {
				return
			}
			s.sync(n)
			n.M.Heard(coord)
			s.adopt(n, coord, epoch, true)
		})
	}
}

// datagram delivers run after a random delay, maybe twice, maybe never.
func (s *Sim) datagram(run func()) {
	if s.rng.Float64() < s.Loss {
		return
	}
	copies := 1
	if s.rng.Float64() < s.Dup {
		copies = 2
	}
	for range copies {
		s.after(1+s.rng.IntN(s.cfg.MaxDelay), run)
	}
}

func (s *Sim) after(d int, run func()) {
	s.seq++
	heap.Push(&s.q, &event{at: s.Now + int64(d), seq: s.seq, run: run})
}

// InFlight is the number of pending deliveries and store answers.
func (s *Sim) InFlight() int { return s.q.Len() }

type event struct {
	at  int64
	seq uint64
	run func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}
