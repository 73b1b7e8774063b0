package token

import "crypto/hmac"

// ActionKind says what the runtime must do for an Action.
type ActionKind uint8

// Actions the machine asks of its runtime.
const (
	// SendToken: forward Token to the successor.
	SendToken ActionKind = iota + 1
	// SendAck: acknowledge Stamp to the predecessor; Stale tells the sender
	// that its token was superseded and must be dropped.
	SendAck
	// Visit: run the critical section with Token (fenced by its stamp) and
	// report back with VisitDone.
	Visit
	// Regenerate: (coordinator) create a new token generation in the store
	// and report it with Generated (or RegenerateFailed).
	Regenerate
	// SuccessorFailed: the successor did not acknowledge the token in time.
	SuccessorFailed
	// Dropped: a held token was discarded (superseded, stale, or reset).
	Dropped
	// Check: a token of a generation the store has not confirmed to this
	// node arrived and is held back: read the store's newest generation and
	// report it with Checked (or CheckFailed).
	Check
	// Forged: a token of a generation the store never issued was
	// discarded (Token says which).
	Forged
	// Unjudged: a token held back while the store was asked was discarded
	// before the answer came (the node reset: it left the ring or is
	// rejoining); Token says which.
	Unjudged
)

func (k ActionKind) String() string {
	switch k {
	case SendToken:
		return "SendToken"
	case SendAck:
		return "SendAck"
	case Visit:
		return "Visit"
	case Regenerate:
		return "Regenerate"
	case SuccessorFailed:
		return "SuccessorFailed"
	case Dropped:
		return "Dropped"
	case Check:
		return "Check"
	case Forged:
		return "Forged"
	case Unjudged:
		return "Unjudged"
	}
	return "?"
}

// Action is one output of the machine.
type Action struct {
	Kind  ActionKind
	Token Token // SendToken, Visit, Dropped, Check, Forged
	Stamp Stamp // SendAck
	Stale bool  // SendAck
	// Ask numbers a Check's question: its answer (Checked, CheckFailed)
	// names it, so an answer to a question given up as lost judges nothing.
	Ask uint64
}

type phase uint8

const (
	phaseNone     phase = iota // not holding a token
	phaseVisiting              // critical section running
	phaseIdling                // holding an idle token for a while
	phaseSending               // forwarded, waiting for TOKEN_ACK
	phaseBlocked               // must forward but the successor link is down
)

// Machine is one node's token state. It is a pure state machine: inputs are
// method calls (a received token or ack, a tick, link changes, results of
// the runtime's work), outputs are Actions collected by Drain. It has no
// clock, sockets or goroutines; it is not safe for concurrent use.
type Machine struct {
	cfg Config
	now int64

	// Frames only propose; the store decides. A stamp counts (is recorded
	// as the newest seen, and may make a later token stale) only once its
	// generation is one the store confirmed to this node: known is the
	// newest generation the store named (a claim, a regeneration, a fence
	// read), and a token of a generation above it waits in checking while
	// the store is asked. So no value a frame carries can make this node
	// refuse the real token: last never holds a generation the store did
	// not issue.
	last   Stamp  // newest stamp received or created here, of a generation ≤ known
	known  int64  // newest generation the store confirmed to this node
	secret string // known's secret, as the store gave it: tokens of known prove their stamp under it
	minGen int64  // tokens of older generations are stale (fenced off in the store)
	// past holds the generations confirmed before known, newest first,
	// with their secrets: a PING's link proof under one of them still
	// shows its sender read it from the store (a predecessor the new
	// token has not reached yet knows only an older generation).
	past [pastGens]genSecret
	// checking is a token of an unconfirmed generation (acknowledged, not
	// yet taken) while the store is asked; checkOut says the question is
	// out, asked is the stamp of the token it was asked about, and checkAt
	// is the first tick a new one may be asked (one read per
	// checkGapTicks, however many tokens a peer forges).
	checking *Token
	checkOut bool
	asked    Stamp
	asks     uint64 // the number of the latest question (Action.Ask)
	checkAt  int64
	held     *Token // the token this node holds (in any phase but none)
	tookAt   int64  // tick this node last took a token, if took
	took     bool
	phase    phase
	since    int64 // tick the current phase began
	linkUp   bool  // successor link state
	leave    bool  // leaving: no more critical sections

	urgentUntil int64 // until then the token is not idled (someone wants it)
	// wokenAt: when the last WAKE came (woken: one has come)
	wokenAt int64
	woken   bool

	coordinator  bool
	ringSize     int
	lossDeadline int64 // coordinator: regenerate if the token is not seen by then
	regenPending bool

	out []Action
}

// pastGens is how many generations before the confirmed one a link proof
// may be made under. A coordinator that cannot reach its successor takes
// out and regenerates a few times before it links to its predecessor,
// which then learns the newest.
const pastGens = 4

type genSecret struct {
	gen    int64
	secret string
}

// NewMachine returns a machine with no token.
func NewMachine(cfg Config) *Machine {
	return &Machine{cfg: cfg, ringSize: 1}
}

// Drain returns and clears the pending actions.
func (m *Machine) Drain() []Action {
	out := m.out
	m.out = nil
	return out
}

// Last is the newest stamp this node has seen.
func (m *Machine) Last() Stamp { return m.last }

// Holding reports whether this node holds a token (visiting, idling,
// waiting for an ack, or blocked on a missing successor).
func (m *Machine) Holding() bool { return m.held != nil }

// Held returns the held token, if any.
func (m *Machine) Held() (Token, bool) {
	if m.held == nil {
		return Token{}, false
	}
	return *m.held, true
}

// AwaitingAck reports whether a forwarded token waits for its TOKEN_ACK
// on a live link.
func (m *Machine) AwaitingAck() bool { return m.phase == phaseSending }

// Visiting reports whether a critical section is running.
func (m *Machine) Visiting() bool { return m.phase == phaseVisiting }

func (m *Machine) emit(a Action) { m.out = append(m.out, a) }

func (m *Machine) setPhase(p phase) {
	m.phase = p
	m.since = m.now
}

func (m *Machine) drop() {
	if m.held != nil {
		m.emit(Action{Kind: Dropped, Token: *m.held})
	}
	m.held = nil
	m.setPhase(phaseNone)
}

// Receive handles a token from the predecessor. The token is acknowledged
// before anything else is done with it, and an acknowledgement that is not
// stale means the node took it. A token not newer than the newest seen is
// a duplicate (acknowledged, ignored) or stale (acknowledged as stale, so
// its sender drops it). A token of a generation the store has not
// confirmed to this node is held back while the store is asked (Check), and
// acknowledged with the answer: taken if the store issued the generation
// (see Checked), refused as stale otherwise; the question takes about a
// millisecond, well within the sender's wait for the acknowledgement. A
// token of the confirmed generation whose proof does not match its stamp
// was not made by a node that knows the generation's secret: it is refused
// as stale and discarded.
func (m *Machine) Receive(t Token) {
	if t.Gen < m.minGen || (t.Gen <= m.known && !t.Newer(m.last)) {
		m.emit(Action{Kind: SendAck, Stamp: t.Stamp, Stale: t.Stamp != m.last})
		return
	}
	if t.Gen <= m.known && !m.proven(t) {
		m.emit(Action{Kind: SendAck, Stamp: t.Stamp, Stale: true})
		m.emit(Action{Kind: Forged, Token: t})
		return
	}
	if t.Gen > m.known {
		m.hold(t) // acknowledged once the store has answered
		return
	}
	m.emit(Action{Kind: SendAck, Stamp: t.Stamp})
	m.accept(t)
}

// refuse acknowledges t as stale (its sender drops it) and, if it was
// forged, reports it.
func (m *Machine) refuse(t Token, forged bool) {
	m.emit(Action{Kind: SendAck, Stamp: t.Stamp, Stale: true})
	if forged {
		m.emit(Action{Kind: Forged, Token: t})
	}
}

// proven reports whether t carries the proof of its stamp under the
// confirmed generation's secret (callers have checked that t is of that
// generation: older ones are stale).
func (m *Machine) proven(t Token) bool {
	return hmac.Equal([]byte(t.Proof), []byte(Prove(m.secret, t.Stamp)))
}

// Genuine reports whether t is a token this node would take: of the
// confirmed generation, newer than any seen, with the proof of its stamp
// under the generation's secret. Only a node that read the secret from the
// store can make one (the ring counts its predecessor in touch on it; a
// forged or replayed token counts for nothing).
func (m *Machine) Genuine(t Token) bool {
	return m.secret != "" && t.Gen == m.known && t.Newer(m.last) && m.proven(t)
}

// LinkProof returns what a PING carries to show its sender knows the
// confirmed generation's secret: the newest stamp seen (or the
// generation's first) and its ProveLink proof; false before any secret is
// known.
func (m *Machine) LinkProof() (Stamp, string, bool) {
	if m.secret == "" {
		return Stamp{}, "", false
	}
	s := Stamp{Gen: m.known}
	if m.last.Gen == m.known {
		s = m.last
	}
	return s, ProveLink(m.secret, s), true
}

// ProvesLink reports whether a PING's stamp s and proof were made under
// the secret of the confirmed generation or of one of the pastGens before
// it.
func (m *Machine) ProvesLink(s Stamp, proof string) bool {
	secret := ""
	if s.Gen == m.known {
		secret = m.secret
	}
	for _, p := range m.past {
		if p.gen == s.Gen && s.Gen != 0 {
			secret = p.secret
		}
	}
	return secret != "" && hmac.Equal([]byte(proof), []byte(ProveLink(secret, s)))
}

// accept takes t, a proven token of a confirmed generation newer than any
// seen. Its counters are bounded by the ring size (a forged value cannot
// keep it from resting).
//
// A newer token replaces a held one. If the held one was passed on and
// waits for its ack, and the newer one is of its generation, the token has
// come round before that ack: the hop was taken, and nothing is dropped (a
// token hurrying round an idle ring laps faster than an ack crosses a busy
// machine). Otherwise a held token is superseded, and dropped.
func (m *Machine) accept(t Token) {
	t.Busy = min(max(t.Busy, 0), m.ringSize)
	t.Quiet = min(max(t.Quiet, 0), 2*m.ringSize)
	m.last = t.Stamp
	switch {
	case m.held == nil || m.held.Stamp == t.Stamp: // equal: our own token came round a one-node ring
	case t.Gen == m.held.Gen && (m.phase == phaseSending || m.phase == phaseBlocked):
		m.held = nil // came round before its ack
	default:
		m.drop() // an older token of ours was superseded
	}
	m.take(t)
}

// checkGapTicks is the least time between two questions to the store about
// a token's generation: a peer forging tokens costs the store at most one
// read per gap.
const checkGapTicks = 5

// checkLostTicks is how long a question to the store may stay unanswered
// before it is asked again (its operation was lost: the node stepped
// down, the runtime restarted its worker). An answer to the lost one that
// still comes names that question (Action.Ask): it judges no token, as
// its read may be older than the token now held back.
const checkLostTicks = 50

// hold keeps t, of a generation the store has not confirmed here, while the
// store is asked. One token waits at a time: of two, the one of the lower
// generation (the nearer to what this node knows, so the likelier to be
// real; the newer of one generation) stays, and the other is discarded
// (it was acknowledged: if real, the coordinator makes another).
func (m *Machine) hold(t Token) {
	if c := m.checking; c != nil {
		if t.Stamp == c.Stamp {
			return // the same token again (resent on a new link)
		}
		if c.Gen < t.Gen || (c.Gen == t.Gen && !t.Newer(c.Stamp)) {
			m.refuse(t, true)
			return
		}
		m.refuse(*c, true)
	}
	m.checking = &t
	m.ask()
}

// ask sends the question about the held-back token, unless one is out or
// the last was too recent (Tick asks then).
func (m *Machine) ask() {
	if m.checking == nil || m.checkOut || m.now < m.checkAt {
		return
	}
	m.checkOut = true
	m.asked = m.checking.Stamp
	m.asks++
	m.checkAt = m.now + checkGapTicks
	m.emit(Action{Kind: Check, Token: *m.checking, Ask: m.asks})
}

// Checked answers the Check numbered ask: gen is the newest generation the
// store has issued, and secret its secret. An answer to any question but
// the one out (one given up as lost) only confirms what the store issued:
// it judges no token. The held-back token is taken if the store
// issued its generation, it proves its stamp, and it is newer than any
// seen; it is discarded as forged otherwise.
//
// A token that came after the question (the one asked about was cleared or
// replaced while it was out) may be of a generation issued after the read:
// unless the answer settles it (its generation is confirmed now), it is not
// judged but asked about again.
func (m *Machine) Checked(ask uint64, gen int64, secret string) {
	m.Confirm(gen, secret)
	if !m.answers(ask) {
		return
	}
	m.checkOut = false
	c := m.checking
	if c == nil {
		return
	}
	if c.Stamp != m.asked && c.Gen > m.known {
		m.ask() // now, or at Tick once the gap has passed
		return
	}
	m.checking = nil
	switch {
	case c.Gen > m.known || (c.Gen == m.known && !m.proven(*c)):
		m.refuse(*c, true)
	case c.Gen < m.minGen || !c.Newer(m.last):
		m.refuse(*c, false) // superseded while the store was asked
	default:
		m.emit(Action{Kind: SendAck, Stamp: c.Stamp})
		m.accept(*c)
	}
}

// answers reports whether an answer to question ask answers the one out.
func (m *Machine) answers(ask uint64) bool {
	return m.checkOut && ask == m.asks
}

// CheckFailed reports that the store could not be asked the question
// numbered ask; the failure of any question but the one out changes
// nothing (the one out will be answered or given up). The held-back
// token is passed straight on without a critical section (this node could
// not run one anyway) and without being recorded: the next node asks the
// store in turn, and a node that cannot reach its store never stops the
// ring. A token that came after the question is passed on too: it is not
// judged by the failure.
func (m *Machine) CheckFailed(ask uint64) {
	if !m.answers(ask) {
		return
	}
	m.checkOut = false
	c := m.checking
	if c == nil {
		return
	}
	m.checking = nil
	if m.held != nil {
		m.refuse(*c, false) // a confirmed token is here: it goes on, not this one
		return
	}
	// Without the secret this node cannot prove a next hop: the token goes
	// on with its stamp and proof as they came.
	m.emit(Action{Kind: SendAck, Stamp: c.Stamp})
	m.held = c
	if !m.linkUp {
		m.setPhase(phaseBlocked)
		return
	}
	m.setPhase(phaseSending)
	m.emit(Action{Kind: SendToken, Token: *c})
}

func (m *Machine) take(t Token) {
	m.held = &t
	m.took, m.tookAt = true, m.now
	if m.coordinator {
		m.seen()
	}
	if m.leave {
		m.forward()
		return
	}
	m.setPhase(phaseVisiting)
	m.emit(Action{Kind: Visit, Token: t})
}

// seen restarts the coordinator's loss timer.
func (m *Machine) seen() {
	m.lossDeadline = m.now + int64(m.cfg.LossBound(m.ringSize))
}

// VisitDone ends the critical section of t. worked says whether it did
// anything (then the token goes round at full speed for one rotation). The
// returned token may carry updated App data. A quiet token rests here if
// this node is the coordinator, or if it has gone two laps (as this node
// counts the ring) without resting; otherwise it moves straight on.
func (m *Machine) VisitDone(t Token, worked bool) {
	if m.phase != phaseVisiting || m.held == nil || t.Stamp != m.held.Stamp {
		return // a superseded visit
	}
	if worked {
		t.Busy = m.ringSize
	}
	m.held = &t
	rests := m.coordinator || t.Quiet >= 2*m.ringSize
	if !rests || t.Busy > 0 || m.cfg.IdleHoldTicks == 0 || m.leave || m.now < m.urgentUntil {
		m.forward()
		return
	}
	m.setPhase(phaseIdling)
}

// VisitFenced reports that the store refused t's critical section. cur is
// the store's fence as read after the refusal (the newest stamp used, of the
// last generation the store issued), or nil if it could not be read.
//
// A token of a generation the store never issued (above cur's) was forged:
// it is dropped. Otherwise a newer token exists: t is dropped, and a
// coordinator makes a new token soon if the newer one does not show up.
// Only generations the store confirmed raise the bar for later tokens (a
// token is taken only once its generation is confirmed, so t's is).
func (m *Machine) VisitFenced(t Token, cur *Stamp) {
	if m.held == nil || t.Stamp != m.held.Stamp {
		return
	}
	if cur != nil {
		m.raiseMinGen(cur.Gen)
		if t.Gen > cur.Gen {
			m.emit(Action{Kind: Forged, Token: t})
			m.held = nil
			m.setPhase(phaseNone)
			return
		}
	}
	if t.Gen > m.known || t.Gen == maxGen {
		// An unconfirmed generation (only confirmed tokens visit) must
		// not raise the bar; above the largest there is nothing to refuse.
		m.drop()
	} else {
		m.raiseMinGen(t.Gen + 1)
	}
	if m.coordinator {
		m.lossDeadline = min(m.lossDeadline, m.now+int64(m.cfg.RotationBound(m.ringSize)+m.cfg.HopTicks))
	}
}

// maxGen is the largest generation a stamp can carry.
const maxGen = int64(^uint64(0) >> 1)

// Confirm tells the machine the store's current generation g and its
// secret (read from the store: a claim, a lease, a fence read): g is
// confirmed, and older tokens are dropped and refused from now on.
func (m *Machine) Confirm(g int64, secret string) {
	if g > m.known || (g == m.known && m.secret == "") {
		if g > m.known && m.secret != "" {
			copy(m.past[1:], m.past[:])
			m.past[0] = genSecret{m.known, m.secret}
		}
		m.known, m.secret = g, secret
	}
	m.raiseMinGen(g)
}

// raiseMinGen refuses tokens older than generation g from now on.
func (m *Machine) raiseMinGen(g int64) {
	if g <= m.minGen {
		return
	}
	m.minGen = g
	if m.held != nil && m.held.Gen < g {
		m.drop()
	}
	if m.checking != nil && m.checking.Gen < g {
		m.refuse(*m.checking, false)
		m.checking = nil
	}
}

// forward passes the held token on (or blocks until there is a successor).
func (m *Machine) forward() {
	if m.held.Seq == maxGen {
		// No hop after this one can be newer: the token ends here, and the
		// coordinator makes a new one.
		m.drop()
		return
	}
	next := *m.held
	next.Seq++
	next.Proof = Prove(m.secret, next.Stamp)
	switch {
	case next.Busy > 0:
		next.Busy--
		next.Quiet = 0
	case m.phase == phaseIdling:
		next.Quiet = 0
	case m.coordinator:
		// Hurried past its rest here: a coordinator is on the way, so no
		// other node may rest it (the coordinator expects it back within
		// a lap, and would make a new one).
		next.Quiet = 0
	default:
		next.Quiet++
	}
	m.held = &next
	if m.coordinator {
		// Nobody else rests a token that passed here: it is back within a
		// lap of hops and critical sections, or lost.
		m.lossDeadline = m.now + int64(m.cfg.LapBound(m.ringSize))
	}
	if !m.linkUp {
		m.setPhase(phaseBlocked)
		return
	}
	m.setPhase(phaseSending)
	m.emit(Action{Kind: SendToken, Token: next})
}

// Ack handles TOKEN_ACK from the successor.
func (m *Machine) Ack(s Stamp, stale bool) {
	if m.held == nil || s != m.held.Stamp || (m.phase != phaseSending && m.phase != phaseBlocked) {
		return
	}
	if stale {
		m.drop()
		return
	}
	m.held = nil
	m.setPhase(phaseNone)
}

// Tick advances time by one tick.
func (m *Machine) Tick() {
	m.now++
	if m.checkOut && m.now >= m.checkAt+checkLostTicks {
		m.checkOut = false
	}
	m.ask()
	switch {
	case m.phase == phaseIdling && m.now-m.since >= int64(m.cfg.IdleHoldTicks):
		m.forward()
	case m.phase == phaseSending && m.now-m.since >= int64(m.cfg.AckTicks):
		m.setPhase(phaseBlocked)
		m.linkUp = false
		m.emit(Action{Kind: SuccessorFailed})
	}
	if m.coordinator && m.held == nil && !m.regenPending && m.now >= m.lossDeadline {
		m.regenPending = true
		m.emit(Action{Kind: Regenerate})
	}
}

// Hurry asks an idling token to move on now (a node has new work).
func (m *Machine) Hurry() {
	if m.phase == phaseIdling {
		m.forward()
	}
}

// Urgent makes the token skip its idle hold here for a hurried rotation
// (a node somewhere wants it, or the coordinator is looking for it).
func (m *Machine) Urgent() {
	m.urgentUntil = max(m.urgentUntil, m.now+int64(m.cfg.HurriedRotation(m.ringSize)))
	m.Hurry()
}

// Woken handles a WAKE: another node wants the token. Its sender sends no
// other WAKE for a hurried rotation, so the token skips its idle hold here
// for two: work that arrives at the sender just before it may send again
// still finds the token hurrying for a whole rotation. A resting token
// moves on at once.
func (m *Machine) Woken() {
	m.woken, m.wokenAt = true, m.now
	m.urgentUntil = max(m.urgentUntil, m.now+int64(2*m.cfg.HurriedRotation(m.ringSize)))
	m.Hurry()
}

// Calm ends any urgency here: a quiet token rests again at this node
// (critical sections are failing, and hurrying the token would only make
// more of them fail).
func (m *Machine) Calm() { m.urgentUntil = 0 }

// LinkUp reports a (new) successor link; a blocked token is sent on it.
func (m *Machine) LinkUp() {
	m.linkUp = true
	if m.phase == phaseBlocked {
		m.setPhase(phaseSending)
		m.emit(Action{Kind: SendToken, Token: *m.held})
	}
}

// LinkDown reports that the successor link is gone; a token waiting for
// its ack is sent again on the next link.
func (m *Machine) LinkDown() {
	m.linkUp = false
	if m.phase == phaseSending {
		m.setPhase(phaseBlocked)
	}
}

// SetCoordinator makes this node the token's keeper (or not) for a ring of
// ringSize nodes. A new coordinator waits a full loss bound before it
// regenerates, unless fresh says the ring was just formed with no token.
func (m *Machine) SetCoordinator(on bool, ringSize int, fresh bool) {
	m.SetRingSize(ringSize)
	if on && !m.coordinator {
		m.seen()
	}
	m.coordinator = on
	m.regenPending = false
	if on && fresh && m.held == nil {
		m.lossDeadline = m.now
	}
}

// SetRingSize updates the ring size used for bounds and Busy.
func (m *Machine) SetRingSize(n int) {
	if n < 1 {
		n = 1
	}
	m.ringSize = n
}

// Suspect tells the coordinator that a node failed and may have taken the
// token with it: if the token does not show up within two hurried
// rotations and an ack timeout (a token sent to the failed node is sent on
// after its ack timed out), a new one is made.
func (m *Machine) Suspect() {
	m.suspectWithin(2*m.cfg.HurriedRotation(m.ringSize) + m.cfg.AckTicks)
}

// SuspectLost tells a node that took over from a failed coordinator that
// the token is most likely gone with it (a quiet token rests there): a new
// one is made unless the token shows up within a hurried rotation and a
// hop. (The node that took over is the one whose link to the failed
// coordinator broke, so a token that waited for that node's ack is held
// here.)
//
// A node that holds no token and has not taken one for longer than that
// makes the new one at once: with the failed coordinator unreachable, the
// ring cannot carry the token past it (only a new coordinator splices), so
// a live token is either here or piled up at the failed one's predecessor,
// which would have handed it here within a hurried rotation after any WAKE.
// Waiting would only add a hurried rotation to the outage; a token that
// does come later is fenced off by the new generation.
func (m *Machine) SuspectLost() {
	within := m.cfg.HurriedRotation(m.ringSize) + m.cfg.HopTicks
	if m.held == nil && (!m.took || m.now-m.tookAt > int64(within)) {
		within = 0
	}
	m.suspectWithin(within)
}

func (m *Machine) suspectWithin(ticks int) {
	if !m.coordinator {
		return
	}
	if soon := m.now + int64(ticks); soon < m.lossDeadline {
		m.lossDeadline = soon
	}
}

// Generated hands the coordinator the first token of a new generation,
// which the store has just issued with its secret: it wins over any stamp
// seen (a stamp of that generation seen before was not the store's).
func (m *Machine) Generated(s Stamp, secret string) {
	m.regenPending = false
	if s.Gen < m.minGen {
		return // a newer generation is known: this result is late
	}
	if c := m.checking; c != nil && c.Gen <= s.Gen {
		// It came before the store issued s's generation: not the store's.
		m.checking = nil
		m.refuse(*c, true)
	}
	m.Confirm(s.Gen, secret)
	m.last = s
	if m.held != nil {
		m.drop()
	}
	// A node that asked for the token (WAKE) within the lost token's last
	// lap or since may not have been served, and asks again only when new
	// work comes: the new token makes a hurried rotation rather than
	// resting here first. A forged LEAVE took a node out and its token
	// with it, and the new token rested 0.84 s here while three nodes
	// waited (ringsim's adversary; TestRegeneratedTokenServesTheWaitingNodes).
	if m.woken && m.now-m.wokenAt <= int64(m.cfg.LossBound(m.ringSize)+m.cfg.HurriedRotation(m.ringSize)) {
		m.urgentUntil = max(m.urgentUntil, m.now+int64(m.cfg.HurriedRotation(m.ringSize)))
	}
	m.take(Token{Stamp: s, Proof: Prove(m.secret, s)})
}

// RegenerateFailed clears a failed regeneration; it is retried after
// another loss bound if this node is still the coordinator.
func (m *Machine) RegenerateFailed() {
	m.regenPending = false
	m.seen()
}

// Reset drops any held token (the node left the ring or is rejoining); the
// newest stamp seen is kept so an old token is never taken back. A
// coordinator that drops the token this way makes a new one at its next
// tick.
func (m *Machine) Reset() {
	if m.held != nil {
		m.drop()
		if m.coordinator {
			m.lossDeadline = m.now // it knows the token is gone: a new one at once
		}
	}
	if c := m.checking; c != nil {
		m.checking = nil
		m.refuse(*c, false)
		m.emit(Action{Kind: Unjudged, Token: *c})
	}
	m.linkUp = false
	m.leave = false
}

// Leave stops critical sections: held and later tokens are passed straight
// on while the node leaves.
func (m *Machine) Leave() {
	m.leave = true
	if m.phase == phaseIdling {
		m.forward()
	}
}

// never is a deadline that does not come.
const never = int64(1) << 62

// NextDeadline is the first tick at which Tick may act (or a far future
// tick if none): until then ticks only advance the clock, so a runtime may
// sleep until it instead of ticking.
func (m *Machine) NextDeadline() int64 {
	next := never
	switch m.phase {
	case phaseIdling:
		next = m.since + int64(m.cfg.IdleHoldTicks)
	case phaseSending:
		next = m.since + int64(m.cfg.AckTicks)
	}
	if m.coordinator && m.held == nil && !m.regenPending {
		next = min(next, m.lossDeadline)
	}
	switch {
	case m.checking != nil && !m.checkOut:
		next = min(next, m.checkAt)
	case m.checkOut:
		next = min(next, m.checkAt+checkLostTicks)
	}
	return max(next, m.now+1)
}

// Skip advances the clock to tick to without acting; the caller ensures
// no deadline falls before it (see NextDeadline).
func (m *Machine) Skip(to int64) {
	if to > m.now {
		m.now = to
	}
}
