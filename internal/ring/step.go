package ring

import "slices"

// Step handles one message from another node (or from itself).
//
// Frames only propose; the store decides. A datagram meant for another
// node, and token traffic that did not come on the ring link it belongs to
// (TOKEN and PING from the current predecessor, TOKEN_ACK and PONG from the
// current successor), are dropped. An epoch above this node's is adopted
// only once the store confirms it: the node reads the coordinator from the
// store, and a command of the newer epoch waits for that answer.
func (n *Machine) Step(m Msg) {
	if n.phase == PhaseLeft || !n.admit(m) {
		return
	}
	if m.Epoch > n.epoch {
		n.confirmEpoch()
	}
	if m.From != n.id {
		n.el.Heard(m.From)
		delete(n.unheard, m.From)
	}
	if m.From == n.coord && m.Via == ViaUDP && m.Epoch == n.epoch {
		n.relay = false // the coordinator reaches this node again
	}
	switch m.Type {
	case MsgElection:
		n.el.Step(*m.Election)
	case MsgToken:
		n.predFrame(m)
		if m.From != n.ringPred {
			n.checkPred(m)
			return
		}
		n.stepToken(m)
	case MsgTokenAck:
		n.pingOut = false
		n.tok.Ack(*m.Stamp, m.Stale)
		n.drainToken()
		n.relinkDeferred()
	case MsgPing:
		n.predFrame(m)
		n.send(Msg{Type: MsgPong, Via: ViaPred})
	case MsgPong:
		n.pingOut = false
	case MsgWake:
		n.tok.Woken()
		n.drainToken()
	case MsgJoin, MsgSuccessorRequest, MsgLeave:
		n.stepRequest(m)
	case MsgSuccessorAck:
		if p := n.pendingSucc[m.From]; p != nil && p.msg.Ver == m.Ver {
			delete(n.pendingSucc, m.From)
		}
	default:
		n.stepCommand(m)
	}
}

// predFrame records a TOKEN or PING on the inbound link: the link is alive
// (predHeard), and if the frame is one only a node that read the
// generation's secret from the store can make (a token this node would
// take, a PING with the link proof), the predecessor is in touch
// (predProved, see inTouch).
func (n *Machine) predFrame(m Msg) {
	n.predHeard = n.now
	switch {
	case m.Type == MsgToken && n.tok.Genuine(*m.Token),
		m.Type == MsgPing && m.Stamp != nil && n.tok.ProvesLink(*m.Stamp, m.Proof):
		n.predProved = n.now
	}
}

// admit reports whether m may be acted on at all: a datagram meant for
// this node and not in its own name, a link frame on its link.
func (n *Machine) admit(m Msg) bool {
	switch {
	case m.Via == ViaUDP && m.To != n.id:
		n.note(EventMisdirected, m.From)
		return false
	case m.Via == ViaUDP && m.From == n.id && m.Type != MsgElection:
		// A node never sends itself a datagram (it does its own requests
		// in place): one in its own name is forged.
		n.note(EventOffLink, m.From)
		return false
	case !n.onItsLink(m):
		n.note(EventOffLink, m.From)
		return false
	}
	return true
}

// stepToken takes a TOKEN from the predecessor the store's ring names.
func (n *Machine) stepToken(m Msg) {
	if t := m.Token; t.Epoch > n.epoch && t.Coord != 0 {
		n.confirmEpoch() // the token's gossip proposes, like any frame
	}
	n.tok.Receive(*m.Token)
	n.drainToken()
}

// stepRequest handles a request addressed to the coordinator.
func (n *Machine) stepRequest(m Msg) {
	if m.Relay && !n.isCoord {
		// Its sender cannot reach the coordinator: pass it on.
		if n.coord != 0 && n.coord != n.id && n.coord != m.From && n.phase == PhaseInRing {
			n.send(Msg{Type: m.Type, Via: ViaUDP, To: n.coord, Failed: m.Failed, For: m.From})
		}
		return
	}
	if !n.isCoord || n.phase == PhaseLeaving {
		return // the sender finds the coordinator in the store after a few retries
	}
	if m.For != 0 && m.For != n.id {
		n.stepRelayed(m)
		return
	}
	if m.Type == MsgSuccessorRequest && m.Failed == n.id {
		// The coordinator is alive: the sender lost its link to it (a cut
		// that has healed, or a forgery). It is told its successor again.
		m.Failed = 0
	}
	if m.Type == MsgSuccessorRequest && m.Failed != 0 && slices.Contains(n.members, m.From) && n.blameReporter(m.From, m.Failed) {
		// The reporter's links fail with others too, its successor's with
		// nobody else: the reporter is the one in trouble (a lossy node
		// accuses each successor in turn). It is placed again, away from
		// the link; the successor, which works, stays where it is. Only a
		// member is: one already taken out (its predecessor reported it
		// first) is told to join again by the repair, and joining it
		// restores its users' presence, which taking it out cleared; moved
		// back in, it never learned it had been out, and its users got
		// nothing until its member check 10 s later (a chaos run, 5 %
		// loss).
		n.note(EventReporterMoved, m.From)
		n.linkFailed(m.From, m.Failed)
		n.enqueueMove(m.From)
		return
	}
	n.enqueue(requestOp(m.Type, m.From, m.Failed))
}

// stepRelayed handles a request another node passed on for m.For, which
// cannot reach this coordinator: the link between them is avoided from
// now on, and the node is placed where it
// uses no failed link: a JOIN as usual, a SUCCESSOR_REQUEST naming the
// coordinator (or none) by taking it out and placing it again.
func (n *Machine) stepRelayed(m Msg) {
	who := m.For
	n.avoidLink(n.id, who)
	if m.Type == MsgSuccessorRequest && (m.Failed == n.id || m.Failed == 0) {
		n.enqueueMove(who)
		return
	}
	n.enqueue(requestOp(m.Type, who, m.Failed))
}

// requestOp is the coordinator's store operation for a request (JOIN,
// SUCCESSOR_REQUEST or LEAVE) from node from.
func requestOp(typ MsgType, from, failed int64) Op {
	switch typ {
	case MsgJoin:
		return Op{Kind: OpJoin, Node: from}
	case MsgSuccessorRequest:
		return Op{Kind: OpRepair, Node: from, Failed: failed}
	default: // MsgLeave
		return Op{Kind: OpLeave, Node: from}
	}
}

// onItsLink reports whether m may be acted on given the path it came by:
// the token and the heartbeat travel only on the ring links, from the
// node at the other end of the link they belong to; everything else only
// by datagram.
func (n *Machine) onItsLink(m Msg) bool {
	switch m.Type {
	case MsgToken, MsgPing:
		return m.Via == ViaPred && n.pred != 0 && m.From == n.pred
	case MsgTokenAck, MsgPong:
		return m.Via == ViaSucc && n.succ != 0 && m.From == n.succ
	}
	return m.Via == ViaUDP // requests, commands, WAKE and elections travel by datagram only
}

// stepCommand handles a coordinator's command. A node obeys only the
// coordinator of its epoch: older epochs are ignored, and so are commands
// at the current epoch from a node that is not its coordinator (one epoch
// has one coordinator: such a command comes from a node deposed since,
// stamped with the epoch it learned). A command of a newer epoch (or of
// the current one when no coordinator is known) waits until the store
// confirms its sender as coordinator (propose).
func (n *Machine) stepCommand(m Msg) {
	if !n.obeys(m) {
		return
	}
	switch m.Type {
	case MsgSuccessor:
		n.stepSuccessor(m)
	case MsgRejoin:
		n.note(EventRejoin, m.From)
		n.rejoin()
	case MsgLeaveOK:
		if n.phase == PhaseLeaving {
			n.req = nil
			n.leaveOK = true
			if !n.tok.Holding() {
				n.finishLeave()
			}
		}
	case MsgCoordinator:
		// Nothing to do: the store confirmed the sender already.
	case MsgHandoff:
		n.stepHandoff(m)
	}
}

// obeys reports whether command m comes from the coordinator of this
// node's epoch (a HANDOFF from any node of the epoch counts). A command of
// an older epoch, or from another node at the current epoch, is noted as
// stale; one of a newer epoch, or at the current epoch when no coordinator
// is known, is proposed to the store.
func (n *Machine) obeys(m Msg) bool {
	switch {
	case m.Epoch < n.epoch:
		n.note(EventStaleCommand, m.From)
		return false
	case m.Epoch == n.epoch && n.coord != 0 && (m.From == n.coord || m.Type == MsgHandoff):
		return true
	case m.Epoch == n.epoch && n.coord != 0:
		n.note(EventStaleCommand, m.From)
		return false
	default:
		n.propose(m)
		return false
	}
}

// stepSuccessor acknowledges a SUCCESSOR command. An assignment the node
// already follows (the coordinator's periodic sync) changes nothing; any
// other waits for one read of the store's ring (the coordinator wrote it
// there before it sent the command) and is applied only if the store names
// that successor: a forged or reordered assignment, whatever its version,
// links nowhere.
func (n *Machine) stepSuccessor(m Msg) {
	n.send(Msg{Type: MsgSuccessorAck, Via: ViaUDP, To: m.From, Ver: m.Ver})
	if !n.mayLink() {
		return
	}
	if m.Succ == n.succ && n.succUp && n.phase != PhaseJoining && n.phase != PhaseStarting {
		return
	}
	n.pendingAssign = &parkedMsg{m: m, after: n.nextOpID}
	n.enqueue(Op{Kind: OpCheckMember})
}

// mayLink reports whether the node is in a phase to take a successor.
func (n *Machine) mayLink() bool {
	return n.phase == PhaseLeaving || n.phase == PhaseInRing || n.phase == PhaseJoining || n.phase == PhaseStarting
}

// settleAssign runs after a member check (operation readID; succ is the
// store's successor of this node, failed: the store could not be read): a
// SUCCESSOR assignment the store confirms is applied; one a read asked
// after it came does not confirm is dropped. Without the store, the
// coordinator's (epoch-confirmed) command is followed.
func (n *Machine) settleAssign(readID uint64, succ int64, failed bool) {
	p := n.pendingAssign
	if p == nil {
		return
	}
	n.pendingAssign = nil
	m := p.m
	switch {
	case !n.mayLink():
	case failed || (succ != 0 && succ == m.Succ):
		n.applySuccessor(m.Succ, m.Epoch, m.Ver)
	case readID <= p.after:
		n.pendingAssign = p
		n.enqueue(Op{Kind: OpCheckMember})
	default:
		n.note(EventAssignRefused, m.From)
	}
}

// stepHandoff handles a HANDOFF: a node in the ring takes the coordinator
// role over; one still starting or joining remembers the epoch it was
// handed over in.
func (n *Machine) stepHandoff(m Msg) {
	switch {
	case n.isCoord:
	case m.Troubled && (n.troubled || n.deferUntil > n.now):
		// Troubled too, or lately: the role would be no better served here.
		n.note(EventHandoffDeclined, m.From)
	case n.phase == PhaseInRing:
		n.adopt(n.coord, m.Epoch)
		n.handoffClaim = n.claimQueue // a take-over claim is out: claim at once if it loses
		n.takeOver(false)
	case n.phase == PhaseStarting || n.phase == PhaseJoining:
		n.handedOver = max(n.handedOver, m.Epoch)
	}
}

// enqueue adds a store operation; identical queued or running ones are
// not repeated.
func (n *Machine) enqueue(op Op) {
	if (n.inFlight != nil && op.same(*n.inFlight)) || slices.ContainsFunc(n.queue, op.same) {
		return
	}
	n.queue = append(n.queue, op)
	n.pump()
}

// same reports whether o asks the store for what p does.
func (o Op) same(p Op) bool {
	return o.Kind == p.Kind && o.Node == p.Node && o.Failed == p.Failed && o.Ask == p.Ask && o.Move == p.Move
}

// enqueueMove takes node who out of the ring and places it again: a leave
// that keeps its presence (Op.Move), then a join. The join must come after
// the leave: one already running, or queued before it, does not stand for
// it (the node would be left out of the ring until it noticed).
func (n *Machine) enqueueMove(who int64) {
	leave, join := Op{Kind: OpLeave, Node: who, Move: true}, Op{Kind: OpJoin, Node: who}
	n.enqueue(leave)
	after := n.queue // the leave is running: everything queued comes after it
	if i := slices.IndexFunc(n.queue, leave.same); i >= 0 {
		after = n.queue[i+1:]
	}
	if !slices.ContainsFunc(after, join.same) {
		n.queue = append(n.queue, join)
		n.pump()
	}
}

// pump starts the next queued operation if none is running.
func (n *Machine) pump() {
	for n.inFlight == nil && len(n.queue) > 0 && n.retryOpAt == 0 {
		op := n.queue[0]
		n.queue = n.queue[1:]
		switch op.Kind {
		case OpJoin, OpRepair, OpLeave, OpRegenerate, OpSync, OpAlive:
			if !n.isCoord {
				continue // deposed while it waited
			}
			op.Epoch = n.epoch
			if op.Kind == OpJoin {
				op.Avoid = n.avoidedLinks()
			}
		case OpClaim:
			op.PrevEpoch = n.epoch
		}
		n.nextOpID++
		op.ID = n.nextOpID
		n.inFlight = &op
		n.ready.Ops = append(n.ready.Ops, op)
	}
}

// StoreDone reports the result of an operation from Ready.Ops.
func (n *Machine) StoreDone(r Result) {
	if n.inFlight == nil || n.inFlight.ID != r.Op.ID {
		return
	}
	n.inFlight = nil
	if r.Op.Kind == OpLease { // the election machine retries by itself
		if n.phase != PhaseLeft {
			n.leaseDone(r)
		}
		n.pump()
		return
	}
	if r.Outcome == Failed {
		n.storeFailed(r)
		return
	}
	n.storeFailing = false
	if n.phase != PhaseLeft {
		switch r.Op.Kind {
		case OpReadCoordinator:
			n.readDone(r)
			n.settleParked(r.Op.ID)
		case OpCheckMember:
			n.checkDone(r)
			n.settleParked(r.Op.ID)
		case OpReadFence:
			n.tok.Checked(r.Op.Ask, r.Gen, r.Secret)
			n.drainToken()
		case OpClaim:
			n.claimDone(r)
		case OpAlive:
			if r.Outcome == Lost {
				n.adoptStore(r.Coord, r.Epoch)
				n.stepDown()
			} else {
				n.leaseUntil = max(n.leaseUntil, n.aliveSentAt+int64(n.cfg.AliveTicks))
			}
		case OpRegenerate:
			n.regenerateDone(r)
		default:
			switch {
			case r.Outcome == Lost:
				n.adoptStore(r.Coord, r.Epoch)
				n.stepDown()
			case !n.isCoord || r.Op.Epoch != n.epoch:
				// Deposed while it ran: the change is in the store, and
				// the coordinator of the newer epoch tells the nodes (its
				// sync reads the store after its claim). Commands sent now
				// would carry the newer epoch under this node's name.
				n.note(EventStaleResult, 0)
			default:
				n.changesDone(r)
			}
		}
	}
	n.pump()
}

// regenerateDone hands the token machine a new generation, or steps down
// if the store names another coordinator.
func (n *Machine) regenerateDone(r Result) {
	if r.Outcome == Lost {
		n.adoptStore(r.Coord, r.Epoch)
		n.stepDown()
		n.tok.RegenerateFailed()
	} else {
		n.note(EventTokenRegenerated, 0)
		n.tok.Generated(r.Stamp, r.Secret)
	}
	n.drainToken()
}

// storeFailed handles an operation the store could not carry out: it is
// tried again after RetryTicks, but for a regeneration (the loss timer
// asks again) and a token's check (the token goes on unchecked).
func (n *Machine) storeFailed(r Result) {
	n.note(EventStoreFailed, 0)
	n.storeFailing = true
	n.queue = append([]Op{r.Op}, n.queue...)
	n.retryOpAt = n.now + int64(n.cfg.RetryTicks)
	// A coordinator whose successor link was replaced waits for its repair,
	// which waits for the store (behind whatever operation failed here).
	n.relinkReplaced()
	switch r.Op.Kind {
	case OpRegenerate:
		n.queue = n.queue[1:]
		n.tok.RegenerateFailed()
	case OpReadFence:
		n.queue = n.queue[1:]
		n.note(EventTokenUnchecked, 0)
		n.tok.CheckFailed(r.Op.Ask)
		n.drainToken()
	case OpCheckMember:
		n.settleToken(r.Op.ID, true)
		n.settleAssign(r.Op.ID, 0, true)
	}
}

func (n *Machine) readDone(r Result) {
	suspect := n.suspect
	n.suspect = [2]int64{}
	failed := n.checkFailed
	n.checkFailed = 0
	switch {
	case n.phase == PhaseStarting:
		if r.Coord == 0 || r.Coord == n.id {
			n.epoch = max(n.epoch, r.Epoch)
			n.takeOver(false)
			return
		}
		n.adopt(r.Coord, r.Epoch)
		n.phase = PhaseJoining
		n.request(MsgJoin, 0)
	case failed != 0 && r.Coord == failed && failed == n.failedSucc && n.phase == PhaseInRing && !n.isCoord:
		// The successor that failed is the coordinator the store names.
		n.adopt(r.Coord, r.Epoch)
		n.note(EventCoordinatorFailed, failed)
		n.takeOver(true)
	case r.Epoch > n.epoch || (r.Epoch == n.epoch && r.Coord != n.coord):
		n.adopt(r.Coord, r.Epoch)
		if n.req != nil && n.phase != PhaseLeaving && (r.Coord == 0 || r.Coord == n.id) {
			n.takeOver(false)
		}
	default:
		n.stillAsking(r, failed, suspect)
	}
}

// stillAsking follows up a store read that names the coordinator this
// node knows, while a request to it is unanswered: failed is the
// successor whose replacement the request asks for (the read followed
// its failure), suspect the coordinator that left requests unanswered
// (the read followed those).
func (n *Machine) stillAsking(r Result, failed int64, suspect [2]int64) {
	if n.req == nil || n.isCoord {
		return
	}
	switch {
	case failed != 0 && r.LeaseKnown && n.phase == PhaseInRing && r.Coord == n.coord:
		n.awaitLeaseEnd(failed, r.LeaseRemaining)
	case n.phase != PhaseLeaving && suspect == [2]int64{r.Coord, r.Epoch}:
		// The coordinator we keep asking is still the one recorded: it is
		// dead or cut off. Take the role (compare-and-set on its epoch).
		n.note(EventCoordinatorUnresponsive, n.coord)
		n.takeOver(true)
	}
}

func (n *Machine) claimDone(r Result) {
	n.claimQueue = false
	if r.Outcome == Lost {
		n.claimLost(r)
		return
	}
	n.winAfterJoin = false
	n.tok.Confirm(r.Gen, r.Secret)
	n.drainToken()
	prev := n.coord
	// Taken over once the coordinator's lease ran out (however many claims
	// the store refused before): the token most likely rested with it.
	tookOver := r.Op.IfStale && prev != 0 && prev != n.id
	if tookOver {
		n.coordLost = true
	}
	n.becomeCoordinator(r.Epoch, r.Gen == 0)
	n.leaseUntil = n.now + int64(n.cfg.AliveTicks) // a claim gives the lease
	if tookOver {
		// The previous coordinator let its lease run out: dead, or cut off
		// from every node of its ring. It leaves the ring now (it joins
		// again, like any node, once it reaches the coordinator), so that
		// nobody links to it first and waits for a dial to time out.
		n.enqueue(Op{Kind: OpLeave, Node: prev})
	}
	if n.winClaims > 0 {
		n.winClaims = 0
		n.el.Claimed(r.Epoch)
	}
}

// claimLost handles a claim the store refused: the store's coordinator is
// adopted; an election's winner claims again over a lower node that got in
// first (or once joined, if it won while joining); otherwise the node asks
// for what it needs from the coordinator it now knows.
func (n *Machine) claimLost(r Result) {
	n.coordLost = false
	n.adoptStore(r.Coord, r.Epoch)
	if r.Op.InRing && n.winClaims > 0 {
		// The store's ring may not hold this node (it won while joining,
		// or was spliced out meanwhile): if it joins again while a lower
		// node is coordinator, it claims then.
		n.winAfterJoin = true
		if n.phase != PhaseInRing {
			n.winClaims = 0
		}
	}
	if n.winClaims > 0 {
		// This node won an election; a lower node's claim got in first.
		// Claim over it (compare-and-set on its epoch).
		n.winClaims--
		if r.Coord != 0 && r.Coord < n.id && n.phase != PhaseLeaving {
			n.claimAsWinner()
			return
		}
		n.winClaims = 0
		n.el.ClaimLost(r.Coord, r.Epoch)
	}
	n.electAfter = false
	if n.coord == 0 || n.coord == n.id {
		n.enqueue(Op{Kind: OpReadCoordinator})
		return
	}
	if n.handoffClaim && n.phase == PhaseInRing {
		// The coordinator handed the role here and left while the
		// take-over asked the store: claim it.
		n.handoffClaim = false
		n.claim()
		return
	}
	// A take-over the store refused because the coordinator holds a live
	// lease: it works, and this node cannot reach it.
	if r.Op.IfStale {
		n.relay = true
		n.staleRetryAt = n.now + n.leaseEndTicks(r.LeaseRemaining)
	}
	n.askAfterLostClaim(r.Op.IfStale)
}

// askAfterLostClaim asks the coordinator the store names for what the
// node needs after its claim lost: to join, a successor, or to leave.
func (n *Machine) askAfterLostClaim(ifStale bool) {
	switch {
	case n.phase == PhaseStarting || n.phase == PhaseJoining:
		n.phase = PhaseJoining
		n.request(MsgJoin, 0)
	case n.phase == PhaseInRing && n.failedSucc != 0 && n.failedSucc == n.coord && ifStale:
		// The coordinator this node cannot reach holds a live lease:
		// its ring works without this node. Ask it (retried until a
		// cut heals; every few tries the store is read again, and the
		// role taken if the lease has run out meanwhile).
		n.request(MsgSuccessorRequest, 0)
	case n.phase == PhaseInRing && n.failedSucc != 0 && n.failedSucc == n.coord:
		n.takeOver(true) // the newer coordinator is the successor that failed
	case n.phase == PhaseInRing && n.failedSucc != 0:
		n.request(MsgSuccessorRequest, n.failedSucc)
	case n.phase == PhaseLeaving:
		n.request(MsgLeave, 0)
	}
}

// changesDone carries out a change of the ring the store has made (a
// join, repair, leave or sync): it tells the nodes concerned, relinks this
// node, and finishes this node's own leave.
func (n *Machine) changesDone(r Result) {
	n.ringPred = r.Pred
	n.members = slices.Clone(r.Members)
	slices.Sort(n.members)
	if len(n.members) > 0 {
		n.tok.SetRingSize(len(n.members))
	}
	op := r.Op
	if op.Kind == OpRepair && n.repairDone(r) {
		return
	}
	if op.Kind == OpSync && n.rejoinStrays() {
		return
	}
	removed := false
	for _, c := range r.Changes {
		if op.Kind == OpSync {
			n.syncChange(c)
		} else if n.applyChange(op.Kind, c) {
			removed = true
		}
	}
	if op.Kind == OpLeave && op.Node != n.id && len(r.Changes) == 0 {
		n.send(Msg{Type: MsgLeaveOK, Via: ViaUDP, To: op.Node}) // already out
	}
	if op.Kind == OpJoin && r.WasEmpty {
		n.tok.SetCoordinator(true, len(n.members), true)
	}
	if removed {
		// The removed node may have taken the token with it: hurry the
		// token round so its absence shows within a hurried rotation.
		n.wakeAll()
		n.tok.Suspect()
	}
	n.drainToken()
	if n.electAfter {
		// The acting coordinator has repaired the ring: now the election
		// picks the coordinator to keep.
		n.electAfter = false
		n.el.Start()
	}
	if op.Kind == OpLeave && op.Node == n.id {
		n.leaveSplicedOut()
	}
}

// repairDone notes a link the repair found failed (it splices out the
// requester's successor) and, if the requester is not in the ring, has it
// join again; it reports whether nothing is left to do.
func (n *Machine) repairDone(r Result) bool {
	op := r.Op
	if op.Failed != 0 && len(r.Changes) > 0 && r.Changes[0].Node == op.Failed && r.Changes[0].Succ == 0 {
		n.linkFailed(op.Node, op.Failed)
	}
	if !r.NotInRing {
		return false
	}
	if op.Node == n.id {
		n.rejoin()
	} else {
		n.send(Msg{Type: MsgRejoin, Via: ViaUDP, To: op.Node})
	}
	return true
}

// rejoinStrays, after a sync, tells anyone who believes it is in the ring
// but is not in the store's ring (an assignment lost with a deposed
// coordinator) to join again. It reports whether this node is such a one
// and has started to rejoin.
func (n *Machine) rejoinStrays() bool {
	for _, p := range n.peers {
		if p != n.id && !slices.Contains(n.members, p) {
			n.send(Msg{Type: MsgRejoin, Via: ViaUDP, To: p})
		}
	}
	if !slices.Contains(n.members, n.id) && n.phase == PhaseInRing {
		n.rejoin()
		return true
	}
	return false
}

// syncChange brings one node's link in line with the store's ring after a
// sync: this node relinks if its successor differs or is down; another
// node is sent its successor unless that assignment is already pending.
func (n *Machine) syncChange(c Change) {
	if c.Node == n.id {
		if succ, up := n.Successor(); succ != c.Succ || !up {
			n.ver++
			n.applySuccessor(c.Succ, n.epoch, n.ver)
		}
		return
	}
	if p := n.pendingSucc[c.Node]; p == nil || p.msg.Succ != c.Succ {
		n.sendSuccessor(c.Node, c.Succ)
	}
}

// applyChange carries out one change of a join, repair or leave (kind):
// this node relinks, a node leaving is told it is out, another node is
// sent its new successor. It reports whether the change removed a node
// from the ring other than by its own leave.
func (n *Machine) applyChange(kind OpKind, c Change) (removed bool) {
	switch {
	case c.Node == n.id && c.Succ != 0:
		n.ver++
		n.applySuccessor(c.Succ, n.epoch, n.ver)
	case c.Node == n.id:
		// the coordinator spliced itself out (leave)
	case c.Succ == 0 && kind == OpLeave:
		n.send(Msg{Type: MsgLeaveOK, Via: ViaUDP, To: c.Node})
	case c.Succ == 0:
		n.note(EventSplicedOut, c.Node)
		return true
	default:
		n.sendSuccessor(c.Node, c.Succ)
	}
	return false
}

// leaveSplicedOut finishes the coordinator's own leave once the store has
// spliced it out: it hands the role over and goes as soon as it does not
// hold the token (the last node takes the token with it).
func (n *Machine) leaveSplicedOut() {
	n.startHandoff()
	n.leaveOK = true
	if n.succ == n.id { // the last node: the token leaves with it
		n.tok.Reset()
		n.drainToken()
	}
	if !n.tok.Holding() {
		n.finishLeave()
	}
}
