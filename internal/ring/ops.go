package ring

import (
	"fmt"
	"time"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/token"
)

// OpKind names a store operation the node asks its runtime to run.
type OpKind uint8

// Store operations. Join, Repair, Leave, Regenerate and Sync are coordinator
// operations: the runtime runs them only if the node is still the
// coordinator of Epoch (the store refuses them otherwise).
const (
	OpReadCoordinator OpKind = iota + 1 // read the coordinator row
	OpClaim                             // become coordinator with PrevEpoch+1 (compare-and-set)
	OpJoin                              // splice Node in (PlanJoin) and report the changes
	OpRepair                            // Node's successor Failed (PlanRepair)
	OpLeave                             // splice Node out on its request (PlanRemove)
	OpRegenerate                        // create a new token generation
	OpSync                              // read the ring; every member is told its successor again
	OpLease                             // acquire or renew the coordinator lease (lease election)
	OpCheckMember                       // read the ring's members and the coordinator (a member's own check)
	OpReadFence                         // read the newest token generation the store issued (a token's check)
	OpAlive                             // (coordinator, voting methods) renew the coordinator's lease: its ring works
)

func (k OpKind) String() string {
	switch k {
	case OpReadCoordinator:
		return "read-coordinator"
	case OpClaim:
		return "claim"
	case OpJoin:
		return "join"
	case OpRepair:
		return "repair"
	case OpLeave:
		return "leave"
	case OpRegenerate:
		return "regenerate"
	case OpSync:
		return "sync"
	case OpLease:
		return "lease"
	case OpCheckMember:
		return "check-member"
	case OpReadFence:
		return "read-fence"
	case OpAlive:
		return "alive"
	}
	return "?"
}

// Op is a store operation requested by the machine.
type Op struct {
	ID     uint64
	Kind   OpKind
	Node   int64 // subject of join/repair/leave
	Failed int64 // repair: the failed successor
	// Move (leave): the node is taken out only to be placed again at once
	// (a join follows): it is alive, and its users stay logged in there,
	// so its presence rows are kept. A node moved this way never learns
	// it was out, so nothing would restore them.
	Move      bool
	PrevEpoch int64 // claim: the epoch the claimant saw
	// IfStale (claim): take the role only if the coordinator's lease ran
	// out (a take-over from a coordinator that does not answer), whatever
	// the epoch; otherwise Lost names the coordinator.
	IfStale bool
	// InRing (claim): take the role only if the store's ring holds the
	// claimant (an election's winner: one spliced out, cut off alone or on
	// the far side of a split, never takes the role).
	InRing   bool
	Epoch    int64 // coordinator operations: the coordinator's epoch
	Lease    election.LeaseOp
	LeaseTTL time.Duration // lease: the lease duration (LeaseTicks of the node's tick)
	// Avoid (join): links that failed again and again lately, each a pair
	// of nodes (either way), the one that failed longest ago first; the
	// joining node is placed where it uses none, or else where the links
	// it uses failed longest ago (PlanJoinAvoiding).
	Avoid [][2]int64
	// Ask (read fence): the token machine's number of the question
	// (token.Action.Ask), which its answer names.
	Ask uint64
}

// Moves reports whether o takes node out of the ring only to place it
// again (Move): its users' presence rows are kept.
func (o Op) Moves(node int64) bool { return o.Move && o.Node == node }

// AvoidRank ranks the link between a and b among o.Avoid: 0 if it is not
// there, and the later it failed, the higher (1 for the one that failed
// longest ago).
func (o Op) AvoidRank(a, b int64) int {
	for i, p := range o.Avoid {
		if p == [2]int64{a, b} || p == [2]int64{b, a} {
			return i + 1
		}
	}
	return 0
}

func (o Op) String() string {
	return fmt.Sprintf("op#%d %s node=%d failed=%d prev=%d epoch=%d", o.ID, o.Kind, o.Node, o.Failed, o.PrevEpoch, o.Epoch)
}

// Outcome classifies a store operation's result.
type Outcome uint8

// Outcomes.
const (
	OK     Outcome = iota // done
	Lost                  // the coordinator role is someone else's (Coord, Epoch say whose)
	Failed                // the store could not be reached; try again later
)

// Result reports a finished store operation.
type Result struct {
	Op      Op
	Outcome Outcome
	Err     error // for logs

	// Coordinator as the store has it (read-coordinator, and Lost).
	Coord int64
	Epoch int64 // the new epoch for claim

	Changes []Change // join/repair/leave: what was applied
	Members []int64  // join/repair/leave: ring members afterwards
	// Pred is the requesting node's predecessor in the store's ring
	// (check-member, and join/repair/leave/sync afterwards); 0 if none.
	Pred int64
	// Succ is the requesting node's successor in the store's ring
	// (check-member); 0 if it is not in the ring.
	Succ      int64
	WasEmpty  bool // join: the ring was empty (a new ring needs a token)
	NotInRing bool // repair: the requester is not in the ring

	Stamp token.Stamp // regenerate: the new generation's first stamp
	Gen   int64       // claim, acquired lease, check-member and read-fence: the store's current token generation
	// Secret is the secret of Gen (of Stamp's generation for regenerate):
	// tokens of that generation prove their stamps under it.
	Secret string

	// Lease: whether acquired or renewed, and the lease afterwards
	// (Coord and Epoch hold its holder and epoch).
	LeaseOK        bool
	LeaseRemaining time.Duration
	// LeaseKnown (read-coordinator): LeaseRemaining is the coordinator's
	// lease as the store measured it at the read (0: it ran out).
	LeaseKnown bool
}
