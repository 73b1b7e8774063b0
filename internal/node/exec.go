package node

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

// execOp carries out a ring store operation for node id against st. It is
// what ringsim.Store models in memory.
func execOp(ctx context.Context, st store.Control, clearNode presenceClearer, id int64, op ring.Op) ring.Result {
	res, err := execOpErr(ctx, st, clearNode, id, op)
	if err == nil {
		return res
	}
	if errors.Is(err, store.ErrEpochChanged) || errors.Is(err, store.ErrNotCoordinator) {
		c, rerr := st.Coordinator(ctx)
		if rerr != nil {
			return ring.Result{Op: op, Outcome: ring.Failed, Err: rerr}
		}
		res := ring.Result{Op: op, Outcome: ring.Lost, Err: err, Coord: c.NodeID, Epoch: c.Epoch}
		var held leaseHeldError
		if errors.As(err, &held) && held.lease.Holder == c.NodeID && held.lease.Epoch == c.Epoch {
			// A take-over refused for a live lease: how long it still
			// runs, so that the next claim comes when it ends.
			res.LeaseRemaining = held.lease.Remaining
		}
		return res
	}
	return ring.Result{Op: op, Outcome: ring.Failed, Err: err}
}

// leaseHeldError: a take-over refused because the coordinator's lease
// still runs (it wraps store.ErrEpochChanged).
type leaseHeldError struct{ lease store.Lease }

func (e leaseHeldError) Error() string {
	return fmt.Sprintf("%v: node %d holds a live lease at epoch %d for %v more", store.ErrEpochChanged, e.lease.Holder, e.lease.Epoch, e.lease.Remaining)
}

func (e leaseHeldError) Unwrap() error { return store.ErrEpochChanged }

func execOpErr(ctx context.Context, st store.Control, clearNode presenceClearer, id int64, op ring.Op) (ring.Result, error) {
	res := ring.Result{Op: op}
	coord := store.Coordinator{NodeID: id, Epoch: op.Epoch}
	switch op.Kind {
	case ring.OpReadCoordinator:
		l, err := st.CoordinatorLease(ctx)
		res.Coord, res.Epoch, res.LeaseRemaining, res.LeaseKnown = l.Holder, l.Epoch, l.Remaining, err == nil
		return res, err
	case ring.OpCheckMember:
		nodes, err := st.Nodes(ctx)
		if err != nil {
			return res, err
		}
		topo := ring.Topology(store.Successors(nodes))
		res.Members, res.Pred, res.Succ = topo.Members(), topo.Predecessor(id), topo[id]
		f, err := st.Fence(ctx)
		if err != nil {
			return res, err
		}
		res.Gen, res.Secret = f.Generation, f.Secret
		c, err := st.Coordinator(ctx)
		res.Coord, res.Epoch = c.NodeID, c.Epoch
		return res, err
	case ring.OpClaim:
		epoch, err := claim(ctx, st, id, op)
		if err != nil {
			return res, err
		}
		f, err := st.Fence(ctx)
		if err != nil {
			return res, err
		}
		res.Coord, res.Epoch, res.Gen, res.Secret = id, epoch, f.Generation, f.Secret
		return res, nil
	case ring.OpAlive:
		ok, _, err := st.RenewLease(ctx, id, op.Epoch, op.LeaseTTL)
		if err == nil && !ok {
			err = fmt.Errorf("%w: node %d epoch %d is not the coordinator", store.ErrNotCoordinator, id, op.Epoch)
		}
		return res, err
	case ring.OpReadFence:
		f, err := st.Fence(ctx)
		res.Gen, res.Secret = f.Generation, f.Secret
		return res, err
	case ring.OpRegenerate:
		f, err := st.NewGeneration(ctx, coord)
		res.Stamp, res.Secret = token.Stamp{Gen: f.Generation, Seq: f.Seq}, f.Secret
		return res, err
	case ring.OpJoin, ring.OpRepair, ring.OpLeave, ring.OpSync:
		return execTopology(ctx, st, clearNode, coord, op)
	case ring.OpLease:
		return execLease(ctx, st, id, op)
	}
	return res, fmt.Errorf("node: unknown store operation %v", op.Kind)
}

// presenceClearer removes a node's presence rows (Config.ClearPresence).
type presenceClearer = func(ctx context.Context, node int64) error

// execTopology reads the ring, plans the change, writes it under the
// coordinator's epoch and clears the presence of nodes it removed.
func execTopology(ctx context.Context, st store.Control, clearNode presenceClearer, coord store.Coordinator, op ring.Op) (ring.Result, error) {
	res := ring.Result{Op: op}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		return res, err
	}
	topo := ring.Topology(store.Successors(nodes))
	known := map[int64]bool{}
	for _, n := range nodes {
		known[n.ID] = true
	}
	switch op.Kind {
	case ring.OpJoin:
		if !known[op.Node] {
			return res, fmt.Errorf("node: join from node %d, which is not in the node table: %w", op.Node, store.ErrInvalid)
		}
		res.WasEmpty = len(topo) == 0
		res.Changes = ring.PlanJoinAvoiding(topo, op.Node, op.AvoidRank)
	case ring.OpRepair:
		res.Changes, res.NotInRing = ring.PlanRepair(topo, op.Node, op.Failed)
	case ring.OpLeave:
		res.Changes = ring.PlanRemove(topo, op.Node)
	case ring.OpSync:
		res.Changes = ring.PlanSync(topo)
		res.Members, res.Pred = topo.Members(), topo.Predecessor(coord.NodeID)
		return res, nil
	}
	var writes []store.SuccessorChange
	for _, c := range res.Changes {
		if topo[c.Node] != c.Succ || c.Succ == 0 {
			writes = append(writes, store.SuccessorChange{NodeID: c.Node, Successor: c.Succ})
		}
	}
	if len(writes) > 0 {
		if err := st.SetSuccessors(ctx, coord, writes); err != nil {
			return res, err
		}
	}
	after := topo.Apply(res.Changes)
	res.Members, res.Pred = after.Members(), after.Predecessor(coord.NodeID)
	for _, c := range res.Changes {
		if c.Succ != 0 {
			continue
		}
		// The node is out of the ring: nobody is logged in there any more,
		// unless it is only being moved (placed again at once, alive).
		if clearNode == nil || op.Moves(c.Node) {
			continue
		}
		if err := clearNode(ctx, c.Node); err != nil {
			return res, err
		}
	}
	return res, nil
}

// execLease acquires or renews the coordinator lease. A lease refused is an
// OK outcome with LeaseOK false; only an unreachable store fails.
func execLease(ctx context.Context, st store.Control, id int64, op ring.Op) (ring.Result, error) {
	res := ring.Result{Op: op}
	var (
		ok    bool
		lease store.Lease
		err   error
	)
	switch op.Lease.Kind {
	case election.LeaseAcquire:
		ok, lease, err = st.AcquireLease(ctx, id, op.LeaseTTL)
	case election.LeaseRenew:
		ok, lease, err = st.RenewLease(ctx, id, op.Lease.Epoch, op.LeaseTTL)
	default:
		return res, fmt.Errorf("node: unknown lease operation %v", op.Lease.Kind)
	}
	if err != nil {
		return res, err
	}
	res.LeaseOK, res.Coord, res.Epoch, res.LeaseRemaining = ok, lease.Holder, lease.Epoch, lease.Remaining
	if ok && op.Lease.Kind == election.LeaseAcquire {
		f, err := st.Fence(ctx)
		if err != nil {
			return res, err
		}
		res.Gen, res.Secret = f.Generation, f.Secret
	}
	return res, nil
}

// claim makes node id the coordinator: at once over the epoch the node
// saw (an election's winner, a first node), or, for a take-over from a
// coordinator that does not answer (op.IfStale), only if that
// coordinator's lease ran out.
func claim(ctx context.Context, st store.Control, id int64, op ring.Op) (int64, error) {
	if op.InRing {
		nodes, err := st.Nodes(ctx)
		if err != nil {
			return 0, err
		}
		if members := ring.Topology(store.Successors(nodes)).Members(); !slices.Contains(members, id) {
			return 0, fmt.Errorf("%w: node %d won an election outside the store's ring %v", store.ErrEpochChanged, id, members)
		}
	}
	if !op.IfStale {
		return st.ClaimCoordinator(ctx, id, op.PrevEpoch, op.LeaseTTL)
	}
	won, lease, err := st.AcquireLease(ctx, id, op.LeaseTTL)
	if err != nil {
		return 0, err
	}
	if !won {
		return 0, leaseHeldError{lease}
	}
	return lease.Epoch, nil
}
