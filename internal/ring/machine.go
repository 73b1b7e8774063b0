package ring

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/token"
)

// Phase is where a node stands in its life in the ring.
type Phase uint8

// Phases.
const (
	PhaseStarting Phase = iota // reading the coordinator from the store
	PhaseJoining               // asking the coordinator to splice it in
	PhaseInRing                // has a successor
	PhaseLeaving               // asked to be spliced out; passes tokens straight on
	PhaseLeft                  // out of the ring: the runtime may exit
)

func (p Phase) String() string {
	return [...]string{"starting", "joining", "in-ring", "leaving", "left"}[p]
}

// Note is something worth a log line or a metric.
type Note struct {
	Event Event
	Peer  int64
	Epoch int64
	// Election is set for EventElection: a finished election.
	Election *election.Report
}

// Ready is what the runtime must do after a Step, Tick or other input.
type Ready struct {
	Msgs     []Msg
	Connect  *int64 // (re)link to this successor; 0 means drop the link
	DropPred bool   // close the inbound link (silent too long)
	// RefusePred: refuse the inbound link with UNLINK and close it (its
	// peer is not the predecessor the store's ring names).
	RefusePred bool
	Ops        []Op
	Visits     []token.Token
	Notes      []Note
}

// Empty reports whether there is nothing to do.
func (r Ready) Empty() bool {
	return len(r.Msgs) == 0 && r.Connect == nil && !r.DropPred && !r.RefusePred && len(r.Ops) == 0 && len(r.Visits) == 0 && len(r.Notes) == 0
}

type request struct {
	typ     MsgType
	failed  int64
	tries   int
	backoff int
	nextAt  int64
	direct  int64 // the epoch of the coordinator it was last sent to straight (not relayed)
}

type pending struct {
	msg    Msg
	tries  int
	nextAt int64
}

// Machine is one node's ring protocol: joining, successor failure handling,
// the coordinator's splicing, heartbeats, clean leave, and the token
// machine. It is a pure state machine (etcd raft's shape): inputs are
// Start, Step, Tick, StoreDone, link events, VisitDone and Leave; outputs
// are collected in a Ready. It is not safe for concurrent use.
type Machine struct {
	cfg   Config
	id    int64
	now   int64
	phase Phase
	peers []int64

	coord   int64
	epoch   int64
	isCoord bool

	succ       int64
	succUp     bool
	succVer    [2]int64 // (epoch, ver) of the last SUCCESSOR applied
	failedSucc int64
	deferred   int64    // successor assigned while a token awaits the old one's ack
	downSince  int64    // tick the successor link was last seen going down
	suspect    [2]int64 // (coordinator, epoch) that left requests unanswered
	leaveBy    int64    // a leave ends by this tick whatever happens
	nextWake   int64    // Want sends WAKE again only from this tick
	calmUntil  int64    // a critical section failed: Want does not hurry the token until then
	coordLost  bool     // taking over from a failed coordinator: expect the token lost
	lastSent   int64
	pingOut    bool
	pingAt     int64

	// leaseCheck: the failed successor whose replacement was asked of a
	// coordinator whose lease the store said runs until leaseCheckAt
	// (awaitLeaseEnd); 0 if none.
	leaseCheck, leaseCheckAt int64

	pred      int64 // the inbound link's peer (its HELLO authenticated it)
	predHeard int64 // the inbound link was last up or carried a frame: a link silent for PredSilenceTicks is dropped
	// predProved is when the inbound link last carried a frame only a
	// node that read the generation's secret from the store can make (a
	// genuine TOKEN, a PING with its link proof). Only that counts the
	// coordinator in touch with its predecessor: any key holder can open
	// a link in a node's name and send frames on it.
	predProved int64
	// ringPred is this node's predecessor as the store's ring last named it
	// (a member check, or the coordinator's own ring change). A TOKEN is
	// taken only on its link; a TOKEN on another node's link waits in
	// parkedTok while the store is asked (a legitimate new predecessor
	// after a splice is in the store before it links).
	ringPred  int64
	parkedTok *parkedMsg
	// pendingAssign is a SUCCESSOR waiting for the store's ring to confirm
	// it (settleAssign).
	pendingAssign *parkedMsg

	tok *token.Machine
	req *request
	el  *election.Machine

	electAfter   bool  // an acting coordinator: hold an election once the ring is repaired
	checkFailed  int64 // a failed successor that may be the coordinator (a store read will tell)
	winClaims    int   // claims left to an election winner whose claim lost to a lower node
	winAfterJoin bool  // an election won while joining: claim once joined
	// relay: the store says the coordinator is alive (its lease), and this
	// node cannot reach it: requests go through other nodes (sendRelayed),
	// and the node takes its place in the ring from the store.
	relay bool
	// leaseUntil: a coordinator's lease surely runs until this tick (the
	// last renewal the store confirmed, from when it was asked, or the
	// claim); aliveSentAt: when the last renewal was asked for.
	leaseUntil, aliveSentAt int64
	// storeFailing: the last store operation failed (none has been
	// carried out since).
	storeFailing bool
	// lastFailed failed as this node's successor at lastFailedAt (kept
	// when a new successor is applied, unlike failedSucc; cleared once a
	// link to it comes up).
	lastFailed, lastFailedAt int64
	// staleRetryAt: while relaying, the next try to take the role over
	// (it succeeds once the coordinator's lease has run out).
	staleRetryAt int64
	// handoffClaim: a HANDOFF came while a take-over claim was out; if
	// that claim loses, the role is claimed at once (the coordinator left).
	handoffClaim bool
	leaseGen     int64  // token generation read with the last acquired lease
	leaseSecret  string // and its secret

	queue      []Op
	inFlight   *Op
	nextOpID   uint64
	retryOpAt  int64
	claimQueue bool
	// rejoinAfter: the last store operation asked before the node was
	// told to join again; a member check asked by then shows a place the
	// node no longer has (placeFromStore).
	rejoinAfter uint64

	// linkFails (coordinator): links reported failed lately, by pair of
	// nodes (lower id first); a link that failed twice within
	// linkMemoryTicks is avoided when a node joins (Op.Avoid).
	linkFails map[[2]int64]linkFail

	// Commands of an epoch the store has not confirmed yet, waiting for the
	// store read that decides (oldest first, at most maxParked).
	parked []parkedMsg

	ver         int64
	pendingSucc map[int64]*pending
	// unheard (coordinator): a node sent an assignment of this term and
	// heard from in no frame since, with the tick of that first send
	// (silence.go).
	unheard    map[int64]int64
	handoff    *pending
	handedOver int64 // epoch of a HANDOFF that came while joining: take over once in the ring
	// The store link's trouble (trouble.go): as the runtime last said;
	// the tick this node stops deferring to lower nodes (TroubleHoldTicks
	// after its trouble, or after a lower node deposed it); a troubled
	// coordinator's next hand-off.
	troubled         bool
	deferUntil       int64
	troubleHandoffAt int64
	members          []int64
	leaveOK          bool
	nextSync         int64
	// A member's own check against the store (non-coordinators): the next
	// one, and the joins counted when it was asked for (a join since makes
	// its answer stale).
	nextCheck  int64
	joins      uint64
	checkJoins uint64
	nextAlive  int64 // coordinator: the next renewal of its lease (tickAlive)

	ready Ready
}

// NewMachine returns a node that has not started.
func NewMachine(cfg Config) *Machine {
	return &Machine{cfg: cfg, id: cfg.ID, tok: token.NewMachine(cfg.Token), el: election.New(cfg.Election),
		pendingSucc: map[int64]*pending{}, unheard: map[int64]int64{}}
}

// Accessors for the runtime, status and tests.

func (n *Machine) ID() int64                      { return n.id }
func (n *Machine) Phase() Phase                   { return n.phase }
func (n *Machine) Coordinator() (id, epoch int64) { return n.coord, n.epoch }
func (n *Machine) IsCoordinator() bool            { return n.isCoord }
func (n *Machine) Successor() (id int64, up bool) { return n.succ, n.succUp }
func (n *Machine) Predecessor() int64             { return n.pred }
func (n *Machine) HoldsToken() bool               { return n.tok.Holding() }
func (n *Machine) HeldToken() (token.Token, bool) { return n.tok.Held() }
func (n *Machine) LastStamp() token.Stamp         { return n.tok.Last() }
func (n *Machine) Members() []int64               { return slices.Clone(n.members) }
func (n *Machine) Now() int64                     { return n.now }
func (n *Machine) Config() Config                 { return n.cfg }
func (n *Machine) Visiting() bool                 { return n.tok.Visiting() }
func (n *Machine) Joins() uint64                  { return n.joins } // times this node joined the ring

// Confirmed returns the newest token generation the store confirmed to
// this node and its secret; Secrets, the secrets a link proof may be made
// under (token.Machine.Secrets), change only with it.
func (n *Machine) Confirmed() (int64, string) { return n.tok.Confirmed() }
func (n *Machine) Secrets() []token.GenSecret { return n.tok.Secrets() }

// AvoidedLinks lists the links (pairs of nodes, either way) this node, as
// coordinator, avoids placing a node across: they failed again and again
// lately.
func (n *Machine) AvoidedLinks() [][2]int64 { return n.avoidedLinks() }
func (n *Machine) PendingRequest() (MsgType, bool) {
	if n.req == nil {
		return "", false
	}
	return n.req.typ, true
}

// Ready returns and clears what the runtime must do.
func (n *Machine) Ready() Ready {
	n.drainElection()
	r := n.ready
	n.ready = Ready{}
	return r
}

func (n *Machine) note(event Event, peer int64) {
	n.ready.Notes = append(n.ready.Notes, Note{Event: event, Peer: peer, Epoch: n.epoch})
}

func (n *Machine) send(m Msg) {
	m.From, m.Epoch = n.id, n.epoch
	if m.Via == ViaSucc {
		n.lastSent = n.now
	}
	n.ready.Msgs = append(n.ready.Msgs, m)
}

func (n *Machine) connect(id int64) {
	v := id
	n.ready.Connect = &v
}

// SetPeers tells the node every node id of the node table (for
// announcements and the ring size bound).
func (n *Machine) SetPeers(ids []int64) {
	n.peers = slices.Clone(ids)
	slices.Sort(n.peers)
	n.el.SetPeers(n.peers)
	if !n.isCoord {
		n.tok.SetRingSize(len(n.peers))
	}
}

// Start begins: the node reads the coordinator from the store.
func (n *Machine) Start() {
	n.phase = PhaseStarting
	n.enqueue(Op{Kind: OpReadCoordinator})
}

// Leave starts a clean leave: pass the token on, get spliced out.
func (n *Machine) Leave() {
	switch n.phase {
	case PhaseStarting, PhaseJoining:
		n.req = nil
		n.phase = PhaseLeft
		return
	case PhaseLeaving, PhaseLeft:
		return
	}
	n.phase = PhaseLeaving
	if !(n.isCoord && n.leaseMethod()) {
		n.el.Resign()
	}
	// A lease holder keeps its lease (and acts as coordinator) until its
	// own splice-out and HANDOFF are done: given up first, it would step
	// down in the middle of its leave, its splice-out's answer stale, and
	// no SUCCESSOR or HANDOFF would go out (finishLeave resigns).
	n.leaveBy = n.now + int64(n.cfg.LeaveRetries*n.cfg.MaxRetryTicks)
	n.tok.Leave()
	n.drainToken()
	if n.isCoord {
		n.enqueue(Op{Kind: OpLeave, Node: n.id})
	} else {
		n.request(MsgLeave, 0)
	}
}

// VisitDone ends a critical section started by a Ready.Visits entry.
func (n *Machine) VisitDone(t token.Token, worked bool) {
	if worked {
		n.calmUntil = 0
	}
	n.tok.VisitDone(t, worked)
	n.drainToken()
}

// VisitFailed ends a critical section that failed (the store unavailable
// or too slow): the token moves on as after a visit with nothing done, any
// urgency here ends, and for the length of a rest Want does not hurry the
// token, so that a store outage does not keep the token spinning through
// failing visits. The work waits here for the token's next visit, at the
// quiet ring's pace.
func (n *Machine) VisitFailed(t token.Token) {
	n.calmUntil = n.now + int64(n.cfg.Token.IdleHoldTicks)
	n.tok.Calm()
	n.VisitDone(t, false)
}

// Want says this node has new work for the token: an idle token held here
// moves on, a token visiting here does not rest here afterwards, and every
// node is asked (at most once per hurried rotation) to pass the token on
// without idling, so it arrives within a hurried rotation. A WAKE hurries
// the token for two hurried rotations (token.Machine.Woken), so work that
// arrives while the last WAKE is within its rate limit is covered by it.
// After a failed critical section (VisitFailed) it waits for the token's
// next visit instead.
func (n *Machine) Want() {
	if n.now < n.calmUntil {
		return
	}
	n.tok.Urgent()
	n.drainToken()
	if n.now >= n.nextWake {
		n.wakeAll()
	}
}

// wakeAll sends WAKE to every other node and hurries the token here.
func (n *Machine) wakeAll() {
	n.nextWake = n.now + int64(n.cfg.Token.HurriedRotation(max(len(n.peers), 1)))
	n.tok.Urgent()
	n.drainToken()
	for _, p := range n.peers {
		if p != n.id {
			n.send(Msg{Type: MsgWake, Via: ViaUDP, To: p})
		}
	}
}

// VisitFenced reports that the store refused the critical section of t;
// cur is the store's fence read after the refusal, or nil if it could not
// be read. The token is dropped (see token.Machine.VisitFenced: a
// generation the store never issued does not raise the bar for the real
// token).
func (n *Machine) VisitFenced(t token.Token, cur *token.Stamp) {
	n.note(EventTokenFenced, 0)
	n.tok.VisitFenced(t, cur)
	n.drainToken()
}

// SuccessorUp reports that the link to peer is established.
func (n *Machine) SuccessorUp(peer int64) {
	if peer != n.succ || n.succUp {
		return
	}
	n.succUp = true
	n.pingOut = false
	n.lastSent = n.now
	delete(n.unheard, peer)
	if peer == n.lastFailed {
		n.lastFailed = 0 // up again: no longer the successor that failed last
	}
	if r := n.req; r != nil && r.typ == MsgSuccessorRequest && r.failed == peer && n.failedSucc == peer {
		n.req, n.failedSucc = nil, 0 // the report stood while the link was dialled: it works
	}
	n.tok.LinkUp()
	n.drainToken()
}

// SuccessorDown reports that the link to peer failed.
func (n *Machine) SuccessorDown(peer int64) {
	if peer == n.succ {
		n.successorFailed(peer)
	}
}

// SuccessorReplaced reports that the successor closed our link because it
// accepted another predecessor: it is alive, and the coordinator has (or
// will have) told us our new successor. If no assignment arrives, ask;
// and read the store, which says at once if this node was taken out.
func (n *Machine) SuccessorReplaced(peer int64) {
	if peer != n.succ || !n.linkLost() {
		return
	}
	if n.phase != PhaseInRing && n.phase != PhaseLeaving {
		return
	}
	if n.isCoord {
		if n.storeFailing {
			n.relinkReplaced()
		}
		n.enqueue(Op{Kind: OpRepair, Node: n.id})
		return
	}
	n.request(MsgSuccessorRequest, 0)
	// The coordinator may have taken this node out (it could not reach
	// it: the successor now links from the node before this one), and be
	// unable to say so across the same cut: the store says at once.
	n.checkJoins = n.joins
	n.enqueue(Op{Kind: OpCheckMember})
}

// relinkReplaced: a coordinator whose successor link was replaced, and
// whose store does not answer, links to the same successor again. Its
// repair, which would place it from the store, waits for the store, and
// meanwhile it would hold the token with no link (a key holder's HELLO in
// its name replaced the link: the chaos barrage did it during a cut from
// the store, and nothing was delivered anywhere until the heal). Only the
// coordinator places nodes, and it placed none before this successor.
// With the store answering, the repair places it, and it waits for that.
func (n *Machine) relinkReplaced() {
	if n.isCoord && n.phase == PhaseInRing && n.succ != 0 && !n.succUp && n.failedSucc == 0 {
		n.connect(n.succ)
	}
}

// PredecessorUp reports a new inbound link from peer.
func (n *Machine) PredecessorUp(peer int64) {
	n.pred = peer
	n.predHeard = n.now
}

// PredecessorDown reports that the inbound link from peer closed.
func (n *Machine) PredecessorDown(peer int64) {
	if peer == n.pred {
		n.pred = 0
		if n.phase == PhaseInRing && !n.isCoord {
			// The predecessor linked elsewhere, or died: if the ring was
			// changed without this node (spliced out on a request made in
			// its name), the store says so at once rather than at the next
			// member check.
			n.checkJoins = n.joins
			n.enqueue(Op{Kind: OpCheckMember})
		}
	}
	// A token parked from peer stays: the store's answer judges it
	// (settleToken), so a stranger's is counted even once its link is gone.
}

// drainToken turns the token machine's actions into ring outputs.
func (n *Machine) drainToken() {
	for _, a := range n.tok.Drain() {
		switch a.Kind {
		case token.SendToken:
			t := a.Token
			if n.epoch > t.Epoch && n.coord != 0 {
				t.Coord, t.Epoch = n.coord, n.epoch
			}
			n.send(Msg{Type: MsgToken, Via: ViaSucc, Token: &t})
		case token.SendAck:
			s := a.Stamp
			n.send(Msg{Type: MsgTokenAck, Via: ViaPred, Stamp: &s, Stale: a.Stale})
		case token.Visit:
			n.ready.Visits = append(n.ready.Visits, a.Token)
		case token.Regenerate:
			n.enqueue(Op{Kind: OpRegenerate})
		case token.SuccessorFailed:
			n.successorFailed(n.succ)
		case token.Dropped:
			n.note(EventTokenDropped, 0)
		case token.Check:
			n.enqueue(Op{Kind: OpReadFence, Ask: a.Ask})
		case token.Forged:
			n.note(EventTokenForged, n.pred)
		case token.Unjudged:
			n.note(EventTokenUnjudged, n.pred)
		}
	}
}

// Tick advances time by one tick.
func (n *Machine) Tick() {
	n.now++
	n.el.AdvanceTo(n.now)
	n.tok.Tick()
	n.drainToken()
	n.tickLinks()
	n.tickRequest()
	n.tickLeaseCheck()
	n.tickCoordinator()
	n.tickAlive()
	n.tickRelay()
	n.tickMember()
	n.tickTrouble()
	if n.retryOpAt != 0 && n.now >= n.retryOpAt {
		n.retryOpAt = 0
		n.pump()
	}
	if n.phase == PhaseLeaving && ((n.leaveOK && !n.tok.Holding()) || n.now >= n.leaveBy) {
		if n.now >= n.leaveBy {
			n.note(EventLeaveDeadline, 0)
		}
		n.finishLeave()
	}
}

func (n *Machine) tickLinks() {
	// Watchdog: a ring member without a working successor link that is
	// not already getting one asks for its successor again, whatever event
	// it may have missed.
	if (n.phase == PhaseInRing || n.phase == PhaseLeaving) && !n.succUp && n.deferred == 0 && n.req == nil &&
		n.now > n.watchdogAt() {
		n.downSince = n.now
		n.note(EventSuccessorWatchdog, n.succ)
		// A successor assigned whose link has not come up in all that
		// time failed as a link, whether its dial was refused or still
		// hangs (a cut drops the SYN: the dial would time out only after
		// a new assignment had abandoned it). Named as failed, the
		// coordinator takes it out, and places it elsewhere once the link
		// keeps failing; asked without it, the coordinator would assign
		// the same successor again, for as long as the cut lasts.
		failed := n.failedSucc
		if failed == 0 {
			failed = n.succ
		}
		if n.isCoord {
			if n.mayTakeOut() {
				delete(n.unheard, n.succ) // its silence is used up: the next wait is the full one
				n.enqueue(Op{Kind: OpRepair, Node: n.id, Failed: failed})
			}
		} else {
			n.request(MsgSuccessorRequest, failed)
		}
	}
	if n.succ != 0 && n.succUp && (n.phase == PhaseInRing || n.phase == PhaseLeaving) {
		if n.pingOut && n.now-n.pingAt >= int64(n.cfg.FailTicks) {
			n.successorFailed(n.succ)
		} else if !n.pingOut && n.now-n.lastSent >= n.heartbeatTicks() {
			n.sendPing()
			n.pingOut, n.pingAt = true, n.now
		}
	}
	if n.pred != 0 && n.now-n.predHeard > int64(n.cfg.PredSilenceTicks) {
		n.note(EventPredecessorSilent, n.pred)
		n.pred = 0
		n.ready.DropPred = true
	}
}

// sendPing PINGs the successor, with the link proof of the newest
// generation this node knows (its successor, if coordinator, counts it in
// touch on that alone).
func (n *Machine) sendPing() {
	ping := Msg{Type: MsgPing, Via: ViaSucc}
	if s, proof, ok := n.tok.LinkProof(); ok {
		ping.Stamp, ping.Proof = &s, proof
	}
	n.send(ping)
}

// request sends a request to the coordinator and keeps retrying it.
func (n *Machine) request(typ MsgType, failed int64) {
	n.req = &request{typ: typ, failed: failed, backoff: n.cfg.RetryTicks, nextAt: n.now + int64(n.cfg.RetryTicks)}
	n.sendRequest()
}

func (n *Machine) sendRequest() {
	if n.isCoord { // ask ourselves: do it
		r := n.req
		n.req = nil
		n.enqueue(requestOp(r.typ, n.id, r.failed))
		return
	}
	if n.coord == 0 || n.coord == n.id {
		n.enqueue(Op{Kind: OpReadCoordinator})
		return
	}
	if n.relay {
		n.sendRelayed()
		return
	}
	n.req.direct = n.epoch
	n.send(Msg{Type: n.req.typ, Via: ViaUDP, To: n.coord, Failed: n.req.failed})
}

// sendRelayed sends the pending request through another node (a
// different one at every try), which passes it on to the coordinator this
// node cannot reach, and reads the store's ring: the coordinator's answer
// (a place in the ring) may not reach this node, the store has it.
func (n *Machine) sendRelayed() {
	var others []int64
	for _, p := range n.peers {
		if p != n.id && p != n.coord {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		n.send(Msg{Type: n.req.typ, Via: ViaUDP, To: n.coord, Failed: n.req.failed})
		return
	}
	to := others[n.req.tries%len(others)]
	n.send(Msg{Type: n.req.typ, Via: ViaUDP, To: to, Failed: n.req.failed, Relay: true})
	n.checkJoins = n.joins
	n.enqueue(Op{Kind: OpCheckMember})
}

// awaitLeaseEnd follows up a request for a new successor (failed is the
// successor that failed) with the coordinator's lease as the store read
// it: a coordinator renews its lease only while in touch with its ring,
// so one whose lease ran out is dead or cut off, and this node takes the
// role over at once (the store still decides: a claim-if-stale). A lease
// still running is looked at again the tick after it would end, if the
// coordinator has not answered by then. Without this, a node waited for
// three unanswered requests (0.7 s) before it looked, and a split that
// left the coordinator on the side without the store cost the other side
// up to 2.1 s (ringsim) before it delivered again.
func (n *Machine) awaitLeaseEnd(failed int64, remaining time.Duration) {
	if remaining <= 0 {
		n.note(EventCoordinatorUnresponsive, n.coord)
		n.takeOver(true)
		return
	}
	n.leaseCheck = failed
	n.leaseCheckAt = n.now + n.leaseEndTicks(remaining)
}

// tickLeaseCheck reads the coordinator's lease again once it would have
// ended (awaitLeaseEnd), if the request for a successor in place of the
// same failed one is still unanswered.
func (n *Machine) tickLeaseCheck() {
	if n.leaseCheck == 0 || n.now < n.leaseCheckAt {
		return
	}
	failed := n.leaseCheck
	n.leaseCheck = 0
	if r := n.req; r == nil || r.typ != MsgSuccessorRequest || r.failed != failed || n.failedSucc != failed || n.isCoord {
		return
	}
	n.checkFailed = failed
	n.enqueue(Op{Kind: OpReadCoordinator})
}

func (n *Machine) tickRequest() {
	r := n.req
	if r == nil || n.now < r.nextAt {
		return
	}
	r.tries++
	if n.phase == PhaseLeaving && r.tries >= n.cfg.LeaveRetries {
		n.note(EventLeaveUnanswered, n.coord)
		n.finishLeave()
		return
	}
	if r.tries%n.cfg.StoreCheckRetries == 0 {
		n.suspect = [2]int64{n.coord, n.epoch}
		n.enqueue(Op{Kind: OpReadCoordinator})
	}
	if n.rejoinUnanswered() && !n.relay {
		// The coordinator may have placed this node without its SUCCESSOR
		// getting through: the store says where (placeFromStore).
		n.enqueue(Op{Kind: OpCheckMember})
	}
	n.sendRequest()
	r.backoff = min(2*r.backoff, n.cfg.MaxRetryTicks)
	r.nextAt = n.now + int64(r.backoff)
}

// tickMember: every SyncTicks a member that is not the coordinator checks
// that the store still has it in the ring. A node spliced out while it was
// cut off or stalled, whose coordinator is gone or did not reach it, would
// otherwise go on passing a token among nodes the store no longer counts.
func (n *Machine) tickMember() {
	if n.isCoord || n.phase != PhaseInRing {
		return
	}
	if n.now >= n.nextCheck { // set when it joined
		n.nextCheck = n.now + int64(n.cfg.SyncTicks)
		n.checkJoins = n.joins
		n.enqueue(Op{Kind: OpCheckMember})
	}
}

// checkDone acts on a member's check: a newer coordinator is adopted, and a
// node the store's ring does not hold joins again.
func (n *Machine) checkDone(r Result) {
	n.ringPred = r.Pred
	n.tok.Confirm(r.Gen, r.Secret)
	n.drainToken()
	n.settleToken(r.Op.ID, false)
	n.settleAssign(r.Op.ID, r.Succ, false)
	n.placeFromStore(r)
	if r.Epoch > n.epoch {
		n.adopt(r.Coord, r.Epoch)
	} else if r.Coord != 0 && r.Epoch == n.epoch {
		// The election machine looks again at the coordinator the store
		// names: a node that outranks it and is not electing (a win whose
		// claim the store refused has run out) challenges it.
		n.el.Observe(r.Coord, r.Epoch)
	}
	if n.isCoord || n.phase != PhaseInRing || n.joins != n.checkJoins {
		return
	}
	if !slices.Contains(r.Members, n.id) {
		n.note(EventNotInStoreRing, 0)
		n.rejoin()
		return
	}
	if r.Coord == n.id && r.Epoch == n.epoch {
		// The store names this node, which does not act: an earlier run
		// of it claimed the role and crashed. Nobody else will notice.
		n.note(EventCoordinatorOrphaned, 0)
		n.takeOver(true)
		return
	}
	if r.Coord != 0 && !slices.Contains(r.Members, r.Coord) {
		// The store names a coordinator its ring no longer holds: one that
		// left, or was taken out, while the hand-off of its role got lost
		// (it claimed the role cut off from the others, then left). It is
		// nobody's successor, so no link failure will show it: the members
		// take the role over once its lease has run out (this node is in
		// the store's ring, so the coordinator named is another).
		n.note(EventCoordinatorOutside, r.Coord)
		n.takeOver(true)
	}
}

func (n *Machine) tickCoordinator() {
	if n.isCoord && n.now >= n.nextSync {
		n.nextSync = n.now + int64(n.cfg.SyncTicks)
		n.enqueue(Op{Kind: OpSync})
	}
	for _, id := range slices.Sorted(maps.Keys(n.pendingSucc)) { // sorted: runs are reproducible
		p := n.pendingSucc[id]
		if n.now < p.nextAt {
			continue
		}
		p.tries++
		if p.tries > n.cfg.SuccessorRetries || !n.isCoord {
			delete(n.pendingSucc, id)
			continue
		}
		n.send(p.msg)
		p.nextAt = n.now + int64(min(n.cfg.RetryTicks<<p.tries, n.cfg.MaxRetryTicks))
	}
	if p := n.handoff; p != nil && n.now >= p.nextAt {
		p.tries++
		if p.tries > n.cfg.SuccessorRetries || !n.isCoord {
			n.handoff = nil
			return
		}
		if p.msg.Troubled {
			// Lost, or declined: another member may take it.
			p.msg.To = n.handoffTarget(p.msg.To)
			n.note(EventHandoff, p.msg.To)
		}
		n.send(p.msg)
		p.nextAt = n.now + int64(min(n.cfg.RetryTicks<<p.tries, n.cfg.MaxRetryTicks))
	}
}

func (n *Machine) finishLeave() {
	n.req = nil
	n.phase = PhaseLeft
	n.deferred = 0
	n.tok.Reset()
	n.drainToken()
	n.succ, n.succUp = 0, false
	n.connect(0)
	n.note(EventLeft, 0)
	// A lease holder gives its lease up only now (Leave).
	n.el.Resign()
	n.drainElection()
}

// linkLost marks the successor link down. If the coordinator already named
// the next successor (held back for a token's ack), it links there instead
// and reports false: nothing more to do.
func (n *Machine) linkLost() bool {
	n.tok.LinkDown()
	n.drainToken()
	if n.deferred != 0 {
		n.relinkDeferred()
		return false
	}
	n.succUp, n.pingOut = false, false
	n.downSince = n.now
	return true
}

// successorFailed handles a successor that broke its link or stopped
// answering: the coordinator splices it out itself; a node whose failed
// successor was the coordinator takes the role over first; any other node
// asks the coordinator.
func (n *Machine) successorFailed(f int64) {
	if f == 0 || f != n.succ || n.failedSucc == f || !n.linkLost() {
		return
	}
	n.failedSucc = f
	n.lastFailed, n.lastFailedAt = f, n.now
	n.note(EventSuccessorFailed, f)
	switch {
	case n.phase != PhaseInRing && n.phase != PhaseLeaving:
	case n.isCoord:
		if n.mayTakeOut() {
			n.enqueue(Op{Kind: OpRepair, Node: n.id, Failed: f})
		}
	case f == n.coord:
		n.note(EventCoordinatorFailed, f)
		n.takeOver(true)
	default:
		n.request(MsgSuccessorRequest, f)
		// This node may not know yet that f had become coordinator (its
		// COORDINATOR still on the way): the store tells at once.
		n.checkFailed = f
		n.enqueue(Op{Kind: OpReadCoordinator})
	}
}

func (n *Machine) claim() {
	if n.claimQueue {
		return
	}
	n.claimQueue = true
	n.enqueue(Op{Kind: OpClaim, PrevEpoch: n.epoch, LeaseTTL: n.aliveTTL()})
}

// claimIfStale claims the role only if the coordinator's lease in the
// store ran out (Op.IfStale).
func (n *Machine) claimIfStale() {
	if n.claimQueue {
		return
	}
	n.claimQueue = true
	n.enqueue(Op{Kind: OpClaim, PrevEpoch: n.epoch, IfStale: true, LeaseTTL: n.aliveTTL()})
}

// aliveTTL is the coordinator's lease (Config.AliveTicks) as a duration.
func (n *Machine) aliveTTL() time.Duration { return time.Duration(n.cfg.AliveTicks) * n.cfg.Tick }

// tickAlive: a coordinator of a voting method renews its lease every
// quarter of AliveTicks while its ring works (it has a member besides
// itself, or is the only node there is). A coordinator alone in its ring
// while other nodes exist lets the lease run out, so that they can take
// the role over, and reads the store to learn who did.
func (n *Machine) tickAlive() {
	if !n.isCoord || n.leaseMethod() || n.now < n.nextAlive {
		return
	}
	n.nextAlive = n.now + int64(max(n.cfg.AliveTicks/4, 1))
	if len(n.members) == 1 && n.members[0] == n.id && len(n.peers) > 1 {
		n.enqueue(Op{Kind: OpReadCoordinator})
		return
	}
	if !n.inTouch() {
		// Cut off from both neighbours: the lease runs out, and the nodes
		// that still reach each other take the role over, instead of
		// waiting while this node splices them out one by one.
		return
	}
	n.aliveSentAt = n.now
	n.enqueue(Op{Kind: OpAlive, LeaseTTL: n.aliveTTL()})
}

// inTouch reports whether the coordinator reaches its ring: its successor
// link works (it PINGs it every CoordHeartbeatTicks when idle, so a cut
// shows within that and FailTicks), or its predecessor proved itself
// within the same (an idle predecessor of the coordinator PINGs as often,
// with the generation's link proof). A frame that proves nothing (a HELLO,
// a forged TOKEN, a PING without the proof) does not count: a key holder
// who reaches a coordinator cut from its ring would keep the role from the
// others by sending them (a chaos run's barrage did, for 2.57 s).
func (n *Machine) inTouch() bool {
	return n.succUp || (n.pred != 0 && n.now-n.predProved <= int64(n.cfg.CoordHeartbeatTicks+n.cfg.FailTicks))
}

// mayTakeOut reports whether the coordinator may take a failed successor
// out of the ring. Out of touch with both neighbours it cannot tell their
// failures from its own cut off from them: taking each next successor out
// as its dial fails would empty the store's ring of nodes that work (each
// then told it is out, and its clients sent elsewhere) while they wait
// for its lease to run out. So it takes nodes out then only once its
// lease has run out with a relay's retry to spare: if the store still
// names it, nobody else could take the role (the others are gone); if
// another node took it, the store refuses the repair and it steps down.
func (n *Machine) mayTakeOut() bool {
	return n.leaseMethod() || n.inTouch() || n.now > n.leaseUntil+n.relayTicks()
}

// heartbeatTicks is how long the successor link may stay idle before a
// PING: CoordHeartbeatTicks on a link into or out of the coordinator (its
// lease depends on them), HeartbeatTicks on the others.
func (n *Machine) heartbeatTicks() int64 {
	if n.isCoord || (n.succ != 0 && n.succ == n.coord) {
		return int64(n.cfg.CoordHeartbeatTicks)
	}
	return int64(n.cfg.HeartbeatTicks)
}

// maxParked bounds the commands waiting for the store to confirm their
// epoch: a coordinator resends what matters, so dropping the oldest under
// a flood of forged frames costs a retry, not the ring.
const maxParked = 8

type parkedMsg struct {
	m     Msg
	after uint64 // the last operation issued when it was parked
}

// confirmEpoch asks the store who the coordinator is: a frame proposed an
// epoch above this node's. Reads already queued or running are not
// repeated.
func (n *Machine) confirmEpoch() {
	n.enqueue(Op{Kind: OpReadCoordinator})
}

// propose parks a command whose epoch the store has not confirmed and asks
// the store; settleParked carries it out if the store names its sender.
func (n *Machine) propose(m Msg) {
	if len(n.parked) == maxParked {
		n.parked = n.parked[1:]
	}
	n.parked = append(n.parked, parkedMsg{m: m, after: n.nextOpID})
	n.note(EventEpochUnconfirmed, m.From)
	n.confirmEpoch()
}

// settleParked runs after a store read (operation readID): commands from
// the coordinator the store confirmed are carried out, commands whose
// epoch a read issued after them did not find in the store are dropped
// (forged, or from a coordinator deposed since), and the rest wait for the
// next read.
func (n *Machine) settleParked(readID uint64) {
	if len(n.parked) == 0 {
		return
	}
	ps := n.parked
	n.parked = nil
	again := false
	for _, p := range ps {
		m := p.m
		switch {
		case m.Epoch == n.epoch && n.coord != 0 && m.From == n.coord:
			n.stepCommand(m)
		case m.Epoch > n.epoch && readID <= p.after:
			n.parked = append(n.parked, p)
			again = true
		default:
			n.note(EventEpochRefused, m.From)
		}
	}
	if again {
		n.confirmEpoch()
	}
}

// adoptStore learns the coordinator from the store, which is the truth:
// unlike adopt it also goes back to a lower epoch (this node's epoch was
// then never confirmed by the store, and every claim on it would lose).
func (n *Machine) adoptStore(coord, epoch int64) {
	if epoch < n.epoch {
		n.note(EventEpochLowered, coord)
		n.epoch, n.coord = epoch, 0
		if n.succVer[0] > epoch {
			n.succVer = [2]int64{}
		}
	}
	n.adopt(coord, epoch)
}

// adopt learns of a coordinator epoch the store confirmed.
func (n *Machine) adopt(coord, epoch int64) {
	if epoch < n.epoch {
		return
	}
	if n.isCoord && (epoch > n.epoch || coord != n.id) {
		if coord != 0 && coord < n.id {
			n.deferAfterFault() // a lower node took the role: it found this one failed (or was handed it)
		}
		n.stepDown()
	}
	changed := coord != n.coord || epoch != n.epoch
	n.coord, n.epoch = coord, epoch
	if coord != 0 {
		n.el.Observe(coord, epoch)
	}
	if changed && coord != n.id && coord == n.failedSucc && n.phase == PhaseInRing && !n.isCoord {
		// The new coordinator is the successor this node just saw fail
		// (elected, or announced, as it died): take over at once rather
		// than ask a dead node.
		n.note(EventCoordinatorFailed, coord)
		n.takeOver(true)
		return
	}
	if changed && n.req != nil && coord != 0 && coord != n.id {
		n.req.nextAt = n.now // ask the new coordinator at once
	}
}

func (n *Machine) stepDown() {
	if !n.isCoord {
		return
	}
	n.isCoord = false
	n.note(EventCoordinatorDeposed, 0)
	n.tok.SetCoordinator(false, len(n.peers), false)
	clear(n.pendingSucc)
	clear(n.unheard)
	n.handoff = nil
	n.electAfter = false
	q := n.queue[:0]
	for _, op := range n.queue {
		// Lease operations are the election machine's, which waits for
		// their answers whatever the role; reads of the fence and the
		// ring answer a token waiting here.
		if op.Kind == OpReadCoordinator || op.Kind == OpClaim || op.Kind == OpLease || op.Kind == OpReadFence || op.Kind == OpCheckMember {
			q = append(q, op)
		}
	}
	n.queue = q
	n.enqueue(Op{Kind: OpReadCoordinator})
	// What this node needed from itself as coordinator it now asks for.
	switch {
	case n.phase == PhaseLeaving:
		n.request(MsgLeave, 0)
	case n.phase == PhaseInRing && n.failedSucc != 0 && n.failedSucc == n.coord:
		// The coordinator that deposed this one is the successor that
		// just failed: take over at once rather than ask a dead node.
		n.note(EventCoordinatorFailed, n.coord)
		n.takeOver(true)
	case n.phase == PhaseInRing && (n.failedSucc != 0 || !n.succUp):
		n.request(MsgSuccessorRequest, n.failedSucc)
	case n.phase == PhaseJoining || n.phase == PhaseStarting:
		n.phase = PhaseJoining
		n.request(MsgJoin, 0)
	}
}

// becomeCoordinator takes the role for epoch; noToken says the store has
// never made a token (a new coordinator of a ring without one makes it at
// once instead of waiting for the loss bound).
func (n *Machine) becomeCoordinator(epoch int64, noToken bool) {
	n.isCoord = true
	n.coord, n.epoch = n.id, epoch
	n.el.Observe(n.id, epoch)
	n.ver = 0
	clear(n.pendingSucc)
	clear(n.unheard)
	n.note(EventCoordinator, 0)
	size := max(len(n.members), len(n.peers))
	n.tok.SetCoordinator(true, size, noToken)
	n.broadcastCoordinator()
	// The previous coordinator may have died holding the token: hurry the
	// token round, and make a new one if it does not come within that (soon
	// if the previous coordinator failed: a quiet token rests there).
	n.wakeAll()
	if n.coordLost {
		n.tok.SuspectLost()
	} else {
		n.tok.Suspect()
	}
	n.coordLost = false
	n.enqueue(Op{Kind: OpSync})
	n.nextSync = n.now + int64(n.cfg.SyncTicks)
	switch n.phase {
	case PhaseStarting, PhaseJoining:
		n.phase = PhaseJoining
		n.req = nil
		n.enqueue(Op{Kind: OpJoin, Node: n.id})
	case PhaseInRing:
		if n.failedSucc != 0 || !n.succUp || n.req != nil {
			n.req = nil
			n.enqueue(Op{Kind: OpRepair, Node: n.id, Failed: n.downSuccessor()})
		}
	case PhaseLeaving:
		n.req = nil
		n.enqueue(Op{Kind: OpLeave, Node: n.id})
	}
}

// downSuccessor names the successor to take out of the ring, if any: the
// one whose failure is being repaired, or else the successor whose link
// failed last and has not come up since. A node relaying its requests
// (its coordinator out of reach) dials the successor the store still
// names, the failed one, again at the relay's pace (placeFromStore),
// which clears failedSucc; a node that took the role then kept that
// successor, across a split, until its watchdog took it out 1.2 s later
// (a chaos run: 2.08 s without a delivery on the side with the store).
func (n *Machine) downSuccessor() int64 {
	if n.failedSucc != 0 {
		return n.failedSucc
	}
	if !n.succUp && n.succ != 0 && n.succ == n.lastFailed {
		return n.succ
	}
	return 0
}

// broadcastCoordinator tells every other node that this node holds the
// coordinator role for its epoch.
func (n *Machine) broadcastCoordinator() {
	for _, p := range n.peers {
		if p != n.id {
			n.send(Msg{Type: MsgCoordinator, Via: ViaUDP, To: p})
		}
	}
}

// applySuccessor links to a new successor assigned at (epoch, ver).
func (n *Machine) applySuccessor(s, epoch, ver int64) {
	n.succVer = [2]int64{epoch, ver}
	if n.reportStands(s, epoch) {
		// The coordinator names the successor this node asked it to
		// replace, and has not had the report straight: a new
		// coordinator's sync re-asserts the ring (the report went to the
		// old one, or through a relay that lost it), or the store's ring
		// read while relaying names it still. The report goes again at
		// once; the node dials meanwhile, and withdraws the report if the
		// link comes up (SuccessorUp). Dropped, the report waited for the
		// watchdog, 0.6 s, and the new coordinator of a split with the
		// store on its side took the failed node out only then (ringsim:
		// 2.5 s without a visit).
		n.sendRequest()
		n.req.nextAt = n.now + int64(n.req.backoff)
	} else {
		n.failedSucc = 0
		if n.req != nil && (n.req.typ == MsgJoin || n.req.typ == MsgSuccessorRequest) {
			n.req = nil
		}
	}
	if n.phase == PhaseStarting || n.phase == PhaseJoining {
		n.phase = PhaseInRing
		n.joins++
		n.nextCheck = n.now + int64(n.cfg.SyncTicks)
		n.note(EventJoined, s)
		if n.winAfterJoin && !n.isCoord && n.coord != 0 && n.coord < n.id {
			n.winAfterJoin = false
			n.winClaims = maxWinClaims
			n.claimAsWinner()
		}
		if e := n.handedOver; e != 0 {
			n.handedOver = 0
			if !n.isCoord && e >= n.epoch {
				// The coordinator left and handed the role here while this
				// node was joining (it exits once it has sent HANDOFF).
				n.adopt(n.coord, e)
				n.takeOver(false)
			}
		}
	}
	n.deferred = 0
	if s != n.succ && n.succUp && n.tok.AwaitingAck() {
		// The old successor may already have the token: wait for its ack
		// (or its failure) before linking elsewhere, or the token would be
		// sent twice.
		n.deferred = s
		return
	}
	if s != n.succ || !n.succUp {
		n.relink(s)
	}
}

// rejoin drops the node's place in the ring and joins again (a leaving
// node is simply out).
func (n *Machine) rejoin() {
	if n.phase == PhaseLeaving {
		n.finishLeave()
		return
	}
	n.tok.Reset()
	n.drainToken()
	n.succ, n.succUp, n.failedSucc, n.deferred = 0, false, 0, 0
	n.connect(0)
	n.phase = PhaseJoining
	n.rejoinAfter = n.nextOpID
	if n.isCoord {
		n.req = nil
		n.enqueue(Op{Kind: OpJoin, Node: n.id})
		return
	}
	n.request(MsgJoin, 0)
}

// relink replaces the successor link.
func (n *Machine) relink(s int64) {
	n.succ, n.succUp, n.pingOut = s, false, false
	n.downSince = n.now
	n.tok.LinkDown()
	n.drainToken()
	n.connect(s)
}

// reportStands reports whether an assignment of successor s at epoch
// leaves this node's report of s's failure standing: s is the successor
// it asked to have replaced, and no coordinator of that epoch was sent
// the report straight (it went through a relay, or to an older one), so
// the assignment cannot be the answer to it. An answer ends the report
// as before (a coordinator that judged the reporter the lossy one places
// it again, and the report is not made twice). An assignment from the
// failed node itself proves it alive.
func (n *Machine) reportStands(s, epoch int64) bool {
	r := n.req
	return r != nil && r.typ == MsgSuccessorRequest && s != 0 && r.failed == s && n.failedSucc == s &&
		s != n.coord && !n.isCoord && epoch > r.direct
}

// relinkDeferred applies a successor assignment held back for an ack.
func (n *Machine) relinkDeferred() bool {
	if n.deferred == 0 || n.tok.AwaitingAck() {
		return false
	}
	s := n.deferred
	n.deferred = 0
	n.relink(s)
	return true
}

func (n *Machine) sendSuccessor(node, succ int64) {
	n.ver++
	m := Msg{Type: MsgSuccessor, Via: ViaUDP, To: node, Succ: succ, Ver: n.ver}
	n.send(m)
	m.From, m.Epoch = n.id, n.epoch
	n.pendingSucc[node] = &pending{msg: m, nextAt: n.now + int64(n.cfg.RetryTicks)}
	if _, ok := n.unheard[node]; !ok {
		n.unheard[node] = n.now
	}
}

func (n *Machine) startHandoff() {
	if len(n.members) == 0 {
		return
	}
	h := n.members[len(n.members)-1]
	if h == n.id {
		return
	}
	n.sendHandoff(Msg{Type: MsgHandoff, Via: ViaUDP, To: h})
}

// sendHandoff sends HANDOFF m and keeps it to resend until the role is
// taken (tickCoordinator).
func (n *Machine) sendHandoff(m Msg) {
	n.note(EventHandoff, m.To)
	n.send(m)
	m.From, m.Epoch = n.id, n.epoch
	n.handoff = &pending{msg: m, nextAt: n.now + int64(n.cfg.RetryTicks)}
}

// checkPred handles a TOKEN on the link of a node the store's ring did not
// name as this node's predecessor: it waits (one at a time; a later one
// replaces it, and the one replaced is counted as dropped unjudged) while
// the store is asked.
func (n *Machine) checkPred(m Msg) {
	if p := n.parkedTok; p != nil {
		n.note(EventTokenUnjudged, p.m.From)
	}
	n.parkedTok = &parkedMsg{m: m, after: n.nextOpID}
	n.enqueue(Op{Kind: OpCheckMember})
}

// settleToken runs after a member check (operation readID) or its failure:
// a parked TOKEN from the predecessor the store names is taken; one from
// another node is refused, and counted, once a check asked after it came
// says so, with UNLINK if its link is still the inbound one (the real
// predecessor may have dialled in again meanwhile). A failed check lets
// the link's (authenticated) peer through: the store fences every
// critical section anyway, and a node that cannot reach the store must
// still pass the token on.
func (n *Machine) settleToken(readID uint64, failed bool) {
	p := n.parkedTok
	if p == nil {
		return
	}
	n.parkedTok = nil
	m := p.m
	linked := m.From == n.pred
	switch {
	case m.From == n.ringPred || failed:
		if linked {
			n.stepToken(m)
		} else { // the link it came on is gone: a real sender sends it again
			n.note(EventTokenUnjudged, m.From)
		}
	case readID <= p.after:
		n.checkPred(m) // that read was asked before the token came
	default:
		n.note(EventNotPredecessor, m.From)
		if linked {
			n.pred = 0
			n.ready.RefusePred = true
		}
	}
}

// linkMemoryTicks is how long the coordinator remembers a failed link:
// 30 s at the 20-ms tick.
const linkMemoryTicks = 1500

// maxLinkFails bounds the links remembered (the oldest go first).
const maxLinkFails = 64

// linkFail is what the coordinator remembers of a failed link.
type linkFail struct {
	count int
	last  int64
}

// linkFailed records that the link from a to its successor b failed (a
// repair asked for). A link that keeps failing is avoided: a node cut off
// from one neighbour is placed elsewhere rather than behind it again.
func (n *Machine) linkFailed(a, b int64) { n.noteLink(a, b, 1) }

// blameTicks is how far back the coordinator looks at a node's failed
// links to tell which end of a newly failed link is in trouble: 5 s.
const blameTicks = 250

// blameReporter reports whether node a, which reports that its link to
// its successor b failed, is more likely in trouble than b: a link of a's
// with another node that is still a member failed within blameTicks, and
// none of b's but this one. A node that loses packets on all its links
// accuses each successor in turn; taking each of them out would cost
// every healthy node a turn out of the ring (its users' presence lost,
// its clients told to move) while the lossy one stays. A reporter with a
// clean record is believed (the usual case: b died or was cut off), and
// so is one whose other failed link was with a node that has not come
// back since it was taken out: a healthy node taken out joins again at
// once, so one still out explains that failure itself (a split: the
// reporter's successor and the next one are both across it, and the
// reporter reports each in turn).
func (n *Machine) blameReporter(a, b int64) bool {
	other := func(x, y int64) bool {
		for p, f := range n.linkFails {
			far := p[0] + p[1] - x
			if n.now-f.last <= blameTicks && (p[0] == x || p[1] == x) && far != y && slices.Contains(n.members, far) {
				return true
			}
		}
		return false
	}
	return other(a, b) && !other(b, a)
}

// avoidLink makes the link between a and b avoided at once (a node asked
// through another because it cannot reach this one).
func (n *Machine) avoidLink(a, b int64) { n.noteLink(a, b, avoidAfter) }

// avoidAfter is how many failures within linkMemoryTicks make a link
// avoided.
const avoidAfter = 2

// noteLink counts failures of the link between a and b.
func (n *Machine) noteLink(a, b int64, failures int) {
	if a == 0 || b == 0 || a == b {
		return
	}
	if n.linkFails == nil {
		n.linkFails = map[[2]int64]linkFail{}
	}
	k := [2]int64{min(a, b), max(a, b)}
	f := n.linkFails[k]
	if n.now-f.last > linkMemoryTicks {
		f.count = 0
	}
	f.count += failures
	f.last = n.now
	n.linkFails[k] = f
	for len(n.linkFails) > maxLinkFails {
		var oldest [2]int64
		at := int64(1) << 62
		for p, lf := range n.linkFails {
			if lf.last < at || (lf.last == at && (p[0] < oldest[0] || (p[0] == oldest[0] && p[1] < oldest[1]))) {
				oldest, at = p, lf.last
			}
		}
		delete(n.linkFails, oldest)
	}
}

// avoidedLinks lists the links that failed twice or more within
// linkMemoryTicks, the one that failed longest ago first (Op.Avoid); of
// two that failed at the same tick, the lower pair first (runs are
// reproducible).
func (n *Machine) avoidedLinks() [][2]int64 {
	var out [][2]int64
	for p, f := range n.linkFails {
		if f.count >= avoidAfter && n.now-f.last <= linkMemoryTicks {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b [2]int64) int {
		if la, lb := n.linkFails[a].last, n.linkFails[b].last; la != lb {
			return cmp.Compare(la, lb)
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		return cmp.Compare(a[1], b[1])
	})
	return out
}

// rejoinUnanswered reports whether this node, taken out of the ring after
// it had joined, waits for the answer to its JOIN. (A node joining for the
// first time since it started waits for the coordinator's word: the
// election that may follow its join goes by it.)
func (n *Machine) rejoinUnanswered() bool {
	return n.phase == PhaseJoining && n.joins > 0 && n.req != nil && n.req.typ == MsgJoin
}

// placeFromStore: a node that cannot reach its coordinator (relay), whose
// JOIN to rejoin went unanswered, or whose successor replaced its link,
// takes its place in the ring from the store, where the coordinator wrote
// it (its SUCCESSOR may not get through: a cut from the coordinator to
// this node only).
func (n *Machine) placeFromStore(r Result) {
	if n.isCoord || r.Succ == 0 || !slices.Contains(r.Members, n.id) {
		return
	}
	if r.Op.ID <= n.rejoinAfter {
		// Read before the node was told to join again: the place it
		// shows was taken from the node since (as settleAssign and
		// settleToken judge a check by when it was asked).
		return
	}
	unanswered := n.rejoinUnanswered() && n.req.tries > 0
	// A member whose successor closed its link as replaced (its request
	// names no failed node) and that has no assignment yet: the store
	// names its successor (the same one, if a stranger's HELLO replaced
	// the link; a node that joined between them otherwise).
	replaced := n.phase == PhaseInRing && !n.succUp && n.req != nil && n.req.typ == MsgSuccessorRequest && n.req.failed == 0
	if !n.relay && !unanswered && !replaced {
		return
	}
	if !n.succUp && r.Succ == n.lastFailed && n.now-n.lastFailedAt < n.relayTicks() {
		// The store still names the successor whose link has just
		// failed (a dead coordinator, or one cut off from this node):
		// dialling it again at every store answer would only fail again,
		// hundreds of times a second against a refused port. It is tried
		// again at the relay's pace.
		return
	}
	if n.phase == PhaseJoining || (n.phase == PhaseInRing && (r.Succ != n.succ || !n.succUp)) {
		n.applySuccessor(r.Succ, n.epoch, n.succVer[1])
	}
}

// leaseEndTicks is when, from now, to claim again after a take-over the
// store refused because the coordinator's lease still runs for remaining
// (as the store measured it): the tick after it ends, so that a
// coordinator cut off from its ring is replaced as soon as the store
// allows. The store's figure is bounded by the lease's length; none
// (an older store's answer) waits a whole lease.
func (n *Machine) leaseEndTicks(remaining time.Duration) int64 {
	alive := int64(max(n.cfg.AliveTicks, 1))
	if remaining <= 0 || n.cfg.Tick <= 0 {
		return alive
	}
	return min(int64((remaining+n.cfg.Tick-1)/n.cfg.Tick)+1, alive)
}

// tickRelay: a node relaying (its coordinator alive in the store, out of
// its reach) tries the take-over again every quarter of AliveTicks: once that
// coordinator's lease runs out (it died, or left), the role is taken.
func (n *Machine) tickRelay() {
	if !n.relay || n.isCoord || n.now < n.staleRetryAt || n.phase == PhaseLeaving || n.phase == PhaseLeft {
		return
	}
	n.staleRetryAt = n.now + n.relayTicks()
	n.claimIfStale()
}

// relayTicks is the pace of a relaying node's retries: a quarter of
// AliveTicks.
func (n *Machine) relayTicks() int64 { return int64(max(n.cfg.AliveTicks/4, 1)) }
