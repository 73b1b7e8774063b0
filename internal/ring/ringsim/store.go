package ringsim

import (
	"fmt"
	"slices"
	"time"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/token"
)

// Store models the store's ring rules in memory: compare-and-set epochs with
// a history, coordinator-fenced topology changes and generations, and the
// token fence. It answers ring.Ops the way the runtime's store executor does
// with a real store.
type Store struct {
	Coord   int64
	Epoch   int64
	History map[int64]int64 // epoch -> node that claimed it
	Topo    ring.Topology
	Gen     int64
	Fence   token.Stamp
	Holder  int64 // node that used Fence
	Down    bool  // the store is unreachable: every operation fails

	// The coordinator lease (lease election): valid until LeaseUntil on
	// the store's clock, Now (sim ticks of Tick each).
	LeaseUntil int64
	Now        func() int64
	Tick       time.Duration

	// Fenced critical sections that committed, in order.
	Commits []Commit
	// Refused counts critical sections refused by the fence.
	Refused int
	// Cleared counts, per node, the times a change took it out of the
	// ring for good (not Op.Move): the real store then clears the presence
	// rows of the users logged in there.
	Cleared map[int64]int
	// Moved counts, per node, the times it was taken out only to be
	// placed again (Op.Move): its presence rows are kept.
	Moved map[int64]int
	// Changes lists the ring changes (joins, repairs, leaves) in the
	// order the store made them.
	Changes []ring.Op
}

// Commit is one critical section that the fence let through.
type Commit struct {
	Node  int64
	Stamp token.Stamp
	Tick  int64
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{History: map[int64]int64{}, Topo: ring.Topology{}, Cleared: map[int64]int{}, Moved: map[int64]int{}, Now: func() int64 { return 0 }, Tick: time.Millisecond}
}

func (s *Store) coordinatorCheck(op ring.Op, from int64) (ring.Result, bool) {
	if s.Coord != from || s.Epoch != op.Epoch {
		return ring.Result{Op: op, Outcome: ring.Lost, Coord: s.Coord, Epoch: s.Epoch}, false
	}
	return ring.Result{}, true
}

// Do executes op for node from.
func (s *Store) Do(from int64, op ring.Op) ring.Result {
	if s.Down {
		return ring.Result{Op: op, Outcome: ring.Failed}
	}
	switch op.Kind {
	case ring.OpReadCoordinator:
		return ring.Result{Op: op, Coord: s.Coord, Epoch: s.Epoch, LeaseRemaining: s.leaseRemaining(s.Now()), LeaseKnown: true}
	case ring.OpCheckMember:
		return ring.Result{Op: op, Coord: s.Coord, Epoch: s.Epoch, Members: s.Topo.Members(), Pred: s.Topo.Predecessor(from), Succ: s.Topo[from], Gen: s.Gen, Secret: Secret(s.Gen)}
	case ring.OpReadFence:
		return ring.Result{Op: op, Gen: s.Gen, Secret: Secret(s.Gen)}
	case ring.OpAlive:
		if r := s.lease(from, ring.Op{Lease: election.LeaseOp{Kind: election.LeaseRenew, Epoch: op.Epoch}, LeaseTTL: op.LeaseTTL}); !r.LeaseOK {
			return ring.Result{Op: op, Outcome: ring.Lost, Coord: s.Coord, Epoch: s.Epoch}
		}
		return ring.Result{Op: op}
	case ring.OpClaim:
		if m := s.Topo.Members(); op.InRing && !slices.Contains(m, from) {
			return ring.Result{Op: op, Outcome: ring.Lost, Coord: s.Coord, Epoch: s.Epoch}
		}
		if op.IfStale {
			r := s.lease(from, ring.Op{Lease: election.LeaseOp{Kind: election.LeaseAcquire}, LeaseTTL: op.LeaseTTL})
			if !r.LeaseOK {
				return ring.Result{Op: op, Outcome: ring.Lost, Coord: s.Coord, Epoch: s.Epoch, LeaseRemaining: r.LeaseRemaining}
			}
			return ring.Result{Op: op, Coord: from, Epoch: s.Epoch, Gen: s.Gen, Secret: Secret(s.Gen)}
		}
		if s.Epoch != op.PrevEpoch {
			return ring.Result{Op: op, Outcome: ring.Lost, Coord: s.Coord, Epoch: s.Epoch}
		}
		s.claim(from)
		s.LeaseUntil = 0
		if op.LeaseTTL > 0 {
			s.LeaseUntil = s.Now() + int64(op.LeaseTTL/s.Tick)
		}
		return ring.Result{Op: op, Coord: from, Epoch: s.Epoch, Gen: s.Gen, Secret: Secret(s.Gen)}
	case ring.OpLease:
		return s.lease(from, op)
	case ring.OpRegenerate:
		if r, ok := s.coordinatorCheck(op, from); !ok {
			return r
		}
		s.Gen++
		s.Fence, s.Holder = token.Stamp{Gen: s.Gen}, from
		return ring.Result{Op: op, Stamp: s.Fence, Secret: Secret(s.Gen)}
	}
	if r, ok := s.coordinatorCheck(op, from); !ok {
		return r
	}
	res := ring.Result{Op: op}
	if op.Kind != ring.OpSync {
		s.Changes = append(s.Changes, op)
	}
	switch op.Kind {
	case ring.OpJoin:
		res.WasEmpty = len(s.Topo) == 0
		res.Changes = ring.PlanJoinAvoiding(s.Topo, op.Node, op.AvoidRank)
	case ring.OpRepair:
		res.Changes, res.NotInRing = ring.PlanRepair(s.Topo, op.Node, op.Failed)
	case ring.OpLeave:
		res.Changes = ring.PlanRemove(s.Topo, op.Node)
	case ring.OpSync:
		res.Changes = ring.PlanSync(s.Topo)
		res.Members, res.Pred = s.Topo.Members(), s.Topo.Predecessor(from)
		return res
	}
	s.Topo = s.Topo.Apply(res.Changes)
	res.Members, res.Pred = s.Topo.Members(), s.Topo.Predecessor(from)
	for _, c := range res.Changes {
		if c.Succ != 0 {
			continue
		}
		if op.Moves(c.Node) {
			s.Moved[c.Node]++
		} else {
			s.Cleared[c.Node]++
		}
	}
	return res
}

func (s *Store) claim(from int64) {
	s.Epoch++
	s.Coord = from
	if _, dup := s.History[s.Epoch]; dup {
		panic("ringsim: epoch claimed twice")
	}
	s.History[s.Epoch] = from
}

// leaseRemaining is how long the coordinator's lease still runs at tick
// now (0: it ran out).
func (s *Store) leaseRemaining(now int64) time.Duration {
	return time.Duration(max(s.LeaseUntil-now, 0)) * s.Tick
}

// lease models store.AcquireLease and store.RenewLease.
func (s *Store) lease(from int64, op ring.Op) ring.Result {
	now, ttl := s.Now(), int64(op.LeaseTTL/s.Tick)
	res := func(ok bool) ring.Result {
		return ring.Result{Op: op, LeaseOK: ok, Coord: s.Coord, Epoch: s.Epoch, Gen: s.Gen, Secret: Secret(s.Gen),
			LeaseRemaining: s.leaseRemaining(now)}
	}
	switch op.Lease.Kind {
	case election.LeaseAcquire:
		if s.Coord != 0 && s.Coord != from && s.LeaseUntil > now {
			return res(false)
		}
		s.claim(from)
	case election.LeaseRenew:
		if s.Coord != from || s.Epoch != op.Lease.Epoch {
			return res(false)
		}
	}
	s.LeaseUntil = now + ttl
	return res(true)
}

// Accepts reports whether a critical section of node with stamp would
// commit now: the stamp is of the generation the store issued last (never
// above it), not older than the fence, and not a stamp another node used.
func (s *Store) Accepts(node int64, stamp token.Stamp) bool {
	return !s.Down && stamp.Gen <= s.Gen && !s.Fence.Newer(stamp) && (s.Fence != stamp || s.Holder == node || s.Holder == 0)
}

// Secret is the simulated store's secret of generation gen. The adversary
// of the tests never calls it: it knows the cluster key, not the store.
func Secret(gen int64) string { return fmt.Sprintf("store secret %d", gen) }

// Commit runs a fenced critical section for node with stamp at tick: it
// commits only if no newer stamp, and no other node with the same stamp,
// has committed (the store's Fenced rule).
func (s *Store) Commit(node int64, stamp token.Stamp, tick int64) bool {
	if !s.Accepts(node, stamp) {
		s.Refused++
		return false
	}
	s.Fence, s.Holder = stamp, node
	s.Commits = append(s.Commits, Commit{Node: node, Stamp: stamp, Tick: tick})
	return true
}
