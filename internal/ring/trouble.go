package ring

import "slices"

// A node whose store link is troubled (its visits fail or run out of their
// time budget while the store serves other nodes; the runtime judges it
// and tells the machine with SetTroubled) is a poor coordinator: the lease,
// every repair and every new token go through that link. In the chaos
// suite's network runs, 20 % packet loss on the coordinator cost the ring
// 2.1-3.9 s without delivery in three of four such faults, and under 1 s
// on any other node. So:
//
//   - A troubled coordinator of a voting method hands its role to another
//     member (HANDOFF, Msg.Troubled set), the highest first and the next
//     one down at each retry; a member that is troubled itself, or defers
//     (below), declines.
//     The member claims the role in the store over the coordinator's
//     epoch, as for a leaving coordinator's hand-off, and the old one
//     steps down when it sees the new epoch.
//   - A troubled node defers to lower nodes (election.Machine.Defer): it
//     neither challenges a lower coordinator nor stands in elections
//     others start, and not for TroubleHoldTicks after its trouble ends;
//     otherwise the highest id would win the role straight back. If a
//     candidacy it sent before wins, it claims the role and hands it on.
//   - So does, for TroubleHoldTicks, a coordinator a lower node deposed (a
//     newer epoch: the others found it failed, or it handed the role on;
//     one a higher node's election deposed is the usual case, and does
//     not defer). Its links failed, whatever its visits say: in ringsim, a
//     coordinator losing a fifth of its packets was taken over from and
//     elected back again and again before its visits showed the trouble,
//     since out of the ring it had none.
//
// The lease method has no hand-off: its holder keeps the lease until it
// cannot renew it.

// SetTroubled tells the machine whether its store link is troubled now.
func (n *Machine) SetTroubled(t bool) {
	switch {
	case t && !n.troubled:
		n.troubled = true
		n.note(EventTroubled, 0)
		n.el.Defer(true)
		n.handOffTroubled()
	case !t && n.troubled:
		n.troubled = false
		n.deferUntil = max(n.deferUntil, n.now+int64(n.cfg.TroubleHoldTicks))
		n.note(EventTroubleOver, 0)
	}
}

// deferAfterFault: the others could not reach this node (a lower node
// deposed it as coordinator): it defers for TroubleHoldTicks from now.
func (n *Machine) deferAfterFault() {
	if n.phase == PhaseLeaving || n.phase == PhaseLeft {
		return
	}
	n.deferUntil = max(n.deferUntil, n.now+int64(n.cfg.TroubleHoldTicks))
	n.el.Defer(true)
}

// Troubled reports whether the runtime last said the store link is
// troubled.
func (n *Machine) Troubled() bool { return n.troubled }

// tickTrouble ends the deferral TroubleHoldTicks after the trouble, and
// has a troubled coordinator hand its role on (again, once a hand-off has
// run out of tries without anyone taking it).
func (n *Machine) tickTrouble() {
	if !n.troubled && n.deferUntil != 0 && n.now >= n.deferUntil {
		n.deferUntil = 0
		n.el.Defer(false)
	}
	n.handOffTroubled()
}

// troubleDeadlines passes the trouble's deadlines to at.
func (n *Machine) troubleDeadlines(at func(int64)) {
	if !n.troubled && n.deferUntil != 0 {
		at(n.deferUntil)
	}
	if n.troubledHandoffDue() {
		at(n.troubleHandoffAt)
	}
}

// troubledHandoffDue: a troubled coordinator of a voting method, in its
// ring or joining it (the ring took it out, and it won an election it
// stood in before its trouble), with another member, and no hand-off
// under way.
func (n *Machine) troubledHandoffDue() bool {
	return n.troubled && n.isCoord && n.handoff == nil && (n.phase == PhaseInRing || n.phase == PhaseJoining) && !n.leaseMethod() &&
		slices.ContainsFunc(n.members, func(id int64) bool { return id != n.id })
}

// handOffTroubled starts a troubled coordinator's hand-off, at most once
// per AliveTicks (a lease: the tries of one hand-off take about that).
func (n *Machine) handOffTroubled() {
	if !n.troubledHandoffDue() || n.now < n.troubleHandoffAt {
		return
	}
	n.troubleHandoffAt = n.now + int64(n.cfg.AliveTicks)
	n.sendHandoff(Msg{Type: MsgHandoff, Via: ViaUDP, To: n.handoffTarget(0), Troubled: true})
}

// handoffTarget is the member a troubled coordinator asks after prev: the
// highest member below prev other than itself, wrapping round to the
// highest (prev 0: the highest).
func (n *Machine) handoffTarget(prev int64) int64 {
	var best, top int64
	for _, id := range n.members {
		if id == n.id {
			continue
		}
		top = max(top, id)
		if (prev == 0 || id < prev) && id > best {
			best = id
		}
	}
	if best == 0 {
		return top
	}
	return best
}
