package ring

import (
	"time"

	"github.com/ringchat/ringchat/internal/election"
)

// How the ring uses the election machine (package election):
//
//   - Voting methods (ring, chang-roberts, bully): a node that finds the
//     coordinator dead takes the role at once by compare-and-set (the
//     acting coordinator), repairs the ring, and then starts an election.
//     The winner claims the role with a new epoch (unless it already holds
//     it) and announces it; everyone adopts it from the epoch-carrying
//     COORDINATOR broadcast. A node that sees a coordinator with a lower id
//     than its own (a higher node joined or came back) starts an election
//     after a short challenge delay.
//   - Lease: a node that finds the coordinator dead tries to acquire the
//     lease; the store grants it once the holder's lease has expired. The
//     holder renews it and steps down when it cannot.

// maxWinClaims bounds how often an election winner retries a claim that
// lost to a lower node's concurrent claim.
const maxWinClaims = 3

// Elections returns the election machine's counters.
func (n *Machine) Elections() election.Counters { return n.el.Counters() }

// Electing reports whether an election runs here.
func (n *Machine) Electing() bool { return n.el.Electing() }

func (n *Machine) leaseMethod() bool { return n.cfg.Election.Method == election.Lease }

// takeOver is what a node does when it must become coordinator without an
// election first: the first node of a ring, a node whose coordinator is
// dead, a node handed the role. With a lease it acquires the lease; with a
// voting method it claims the role at once and holds an election once the
// ring is repaired.
func (n *Machine) takeOver(elect bool) {
	if n.leaseMethod() {
		n.el.Start()
		return
	}
	if elect {
		// Taking over from a failed coordinator (elect): the quiet token
		// rested there, and is probably gone with it. The store lets it
		// only once that coordinator's lease ran out (it is dead or cut
		// off from its ring, not only from this node).
		n.electAfter = true
		n.coordLost = true
		n.claimIfStale()
		return
	}
	n.claim()
}

// drainElection carries out the election machine's outputs.
func (n *Machine) drainElection() {
	for {
		r := n.el.Ready()
		if r.Empty() {
			return
		}
		for _, m := range r.Msgs {
			em := m
			n.send(Msg{Type: MsgElection, Via: ViaUDP, To: m.To, Election: &em})
		}
		for _, op := range r.LeaseOps {
			n.enqueue(Op{Kind: OpLease, Lease: op, LeaseTTL: time.Duration(n.cfg.Election.LeaseTicks) * n.cfg.Tick})
		}
		for _, rep := range r.Reports {
			rp := rep
			n.ready.Notes = append(n.ready.Notes, Note{Event: EventElection, Peer: rep.Leader, Epoch: n.epoch, Election: &rp})
			if !rep.Won && rep.Method == election.Lease && n.phase == PhaseStarting && !n.isCoord {
				// Another node got the lease while this one started: read
				// who, and join it (a voting method's lost claim does so).
				n.enqueue(Op{Kind: OpReadCoordinator})
			}
		}
		if r.LeaseLost && n.isCoord {
			n.note(EventLeaseLost, 0)
			n.stepDown()
		}
		if r.LeaseWon {
			n.becomeLeaseHolder(r.LeaseEpoch)
		}
		if r.Win {
			n.electionWon()
		}
	}
}

// electionWon claims the role for the election's winner (this node).
func (n *Machine) electionWon() {
	if n.phase == PhaseLeaving || n.phase == PhaseLeft {
		return
	}
	n.note(EventElectionWon, 0)
	if n.isCoord {
		// Already the coordinator (the acting one won): no new claim, but
		// everyone must see the result, which they adopt only from an
		// epoch-carrying COORDINATOR.
		n.el.Claimed(n.epoch)
		n.broadcastCoordinator()
		return
	}
	n.winClaims = maxWinClaims
	n.claimAsWinner()
}

// claimAsWinner claims the role for an election this node won, over the
// epoch it saw, if the store's ring holds it (Op.InRing):
// a node the ring spliced out (cut off alone, or on the far side of a
// split) that "won" an election nobody else answered never takes the role
// from a ring that works.
func (n *Machine) claimAsWinner() {
	if n.claimQueue {
		return
	}
	n.claimQueue = true
	n.enqueue(Op{Kind: OpClaim, PrevEpoch: n.epoch, InRing: true, LeaseTTL: n.aliveTTL()})
}

// becomeLeaseHolder takes the coordinator role for a lease acquired at
// epoch.
func (n *Machine) becomeLeaseHolder(epoch int64) {
	if epoch < n.epoch || (n.isCoord && epoch == n.epoch) {
		return
	}
	if n.isCoord {
		n.stepDown()
	}
	n.tok.Confirm(n.leaseGen, n.leaseSecret)
	n.drainToken()
	n.becomeCoordinator(epoch, n.leaseGen == 0)
}

// leaseDone passes a lease operation's result to the election machine.
func (n *Machine) leaseDone(r Result) {
	lr := election.LeaseResult{Op: r.Op.Lease, Failed: r.Outcome == Failed, OK: r.LeaseOK,
		Holder: r.Coord, Epoch: r.Epoch}
	if tick := n.cfg.Tick; tick > 0 {
		lr.RemainingTicks = int(r.LeaseRemaining / tick)
	}
	if r.LeaseOK && r.Op.Lease.Kind == election.LeaseAcquire {
		n.leaseGen, n.leaseSecret = r.Gen, r.Secret
	}
	if r.Outcome != Failed && !r.LeaseOK && r.Coord != 0 {
		n.adoptStore(r.Coord, r.Epoch)
	}
	n.el.LeaseDone(lr)
}
