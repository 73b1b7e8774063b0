package election

import (
	"maps"
	"math"
	"slices"
)

// Machine is one node's election state machine. It runs all four methods:
// elections are started with Config.Method, and a message of another method
// is handled with that method. It has no sockets, clock or goroutines: the
// host feeds it messages (Step), time (Tick, AdvanceTo) and store results
// (Claimed, ClaimLost, LeaseDone, Observe), and carries out what Ready
// returns. The election ring is the node table in ascending id order,
// cyclic; the highest id wins ring, Chang–Roberts and bully elections.
//
// Ring and Chang–Roberts messages travel hop by hop to the next live node;
// each hop is acknowledged (ACK) and resent after TimeoutTicks, and after
// Retries sends the addressee is taken for dead and skipped. Message counts
// without faults, for n live nodes (n ≥ 2; a lone node wins with no
// messages), counting algorithm messages and ACKs separately:
//
//   - ring, one initiator (any): n ELECTION (the candidate list goes round
//     once) + n−1 ELECTED (the announcement stops before its origin) =
//     2n−1 messages and 2n−1 ACKs. All n initiating: n² ELECTION and
//     n(n−1) ELECTED.
//   - Chang–Roberts, one initiator of rank r (0 = lowest id): n−1−r hops up
//     to the highest node, n hops of its own candidacy, n−1 ELECTED:
//     3n−2−r messages (2n−1 to 3n−2) and as many ACKs. All n initiating at
//     once on the ascending ring: every lower candidacy dies at the next node,
//     n−1 + n ELECTION + n−1 ELECTED; never more than n(n+1)/2 ELECTION.
//   - bully, initiator of rank r, m = n−r nodes from it upwards: m(m−1)/2
//     ELECTION, m(m−1)/2 OK, n−1 ELECTED from the winner (plus one direct
//     ELECTED to each node whose ELECTION reaches the winner after its
//     claim): n²−1 when the lowest node starts. No ACKs (OK is the answer).
//   - lease: no messages; one Acquire, then a Renew every LeaseTicks/3.
//
// Resends double a hop's cost per lost datagram; a dead node costs Retries
// sends of the hop before it is skipped.
//
// The host (the ring node) drives it so:
//
//   - After every call, Ready, and carry it out: send Msgs; on Win claim the
//     role by compare-and-set on the epoch the host knows and answer
//     Claimed(epoch) or ClaimLost(coordinator, epoch) (a host that already
//     holds the role may answer Claimed with its epoch at once); run
//     LeaseOps and answer each with LeaseDone; on LeaseWon act as
//     coordinator for LeaseEpoch, on LeaseLost stop (if both are set,
//     LeaseLost is about the older lease).
//   - Observe every coordinator the host adopts — from a COORDINATOR
//     broadcast, a store read, its own claim (after Claimed) — including
//     repeats: a participant ends its election on Observe, not on ELECTED
//     alone. The host should read the store's coordinator now and then and
//     Observe it, so that a node whose announcement was lost still learns
//     the result.
//   - Heard for every authenticated frame from a node; SetPeers whenever the
//     node table changes; Start when the coordinator is found dead (a node
//     that outranks the coordinator it observes starts one by itself after
//     ChallengeTicks); Resign when leaving.
//   - Tick every tick, or AdvanceTo(t) before each input and at
//     NextDeadline.
type Machine struct {
	cfg   Config
	now   int64
	peers []int64         // the election ring: the node table and this node, ascending
	dead  map[int64]int64 // id → tick it was taken for dead (expires after deadTTL)

	resigned  bool
	deferring bool // the host defers to lower nodes: no challenge, no candidacy in others' elections (Defer)

	coord, epoch            int64 // the last coordinator observed and its epoch
	claimedEpoch, claimedAt int64 // this node's last successful claim
	challengeAt             int64 // challenge timer; 0: disarmed
	resultLeader, resultAt  int64 // the last election result seen here (a leader ≥ this node)

	round  uint64 // this node's round counter
	seq    uint64 // hop ids
	hops   []*hop // ring methods: hop messages awaiting their ACK
	seen   seenLog
	rounds roundLog

	parts [3]part // ring, chang-roberts, bully
	bully bullyState
	win   *winState
	lease leaseState

	counters Counters
	out      Ready
}

// Bounds on what a machine remembers.
const (
	maxRounds    = 64   // round records kept (dedup, reports)
	maxSeen      = 1024 // hop message fingerprints kept (dedup)
	maxHops      = 256  // unacknowledged hops kept
	maxWinRounds = 64   // rounds waiting for the claim to announce
)

// part is this node's participation in an election of one voting method:
// from the first message (or Start) until it sees the result confirmed by
// Observe or Claimed. Its deadline restarts the election.
type part struct {
	active   bool
	round    Round // the latest round taken part in
	deadline int64
	leader   int64 // announced winner (ELECTED), 0 until known
	best     int64 // best candidate known (at least this node)
	base     int64 // epoch observed when the participation began
	maxSent  int64 // chang-roberts: highest candidate this node sent
}

// winState: this node won and the host is claiming the role in the store.
type winState struct {
	deadline int64
	rounds   []winRound
}

// winRound is a won round whose announcement waits for Claimed.
type winRound struct {
	method Method
	round  Round
	cont   *Msg    // ring: the ELECTED that reached the winner, to continue
	cands  []int64 // ring: the candidate list completed here
}

// partMethod is the method of participation i.
func partMethod(i int) Method { return [3]Method{Ring, ChangRoberts, Bully}[i] }

func partIndex(m Method) int {
	switch m {
	case Ring:
		return 0
	case ChangRoberts:
		return 1
	case Bully:
		return 2
	}
	return -1
}

// New returns the election machine of node cfg.ID. Settings below their
// minimum are raised to it (the host validates the Config; this keeps the
// machine panic-free on any input).
func New(cfg Config) *Machine {
	cfg.TimeoutTicks = max(cfg.TimeoutTicks, 1)
	cfg.Retries = max(cfg.Retries, 1)
	cfg.ResultTicks = max(cfg.ResultTicks, 1)
	cfg.ChallengeTicks = max(cfg.ChallengeTicks, 1)
	cfg.LeaseTicks = max(cfg.LeaseTicks, 3)
	m := &Machine{
		cfg:      cfg,
		dead:     map[int64]int64{},
		counters: Counters{Sent: map[Method]uint64{}, Received: map[Method]uint64{}},
		round:    cfg.Incarnation,
		seq:      cfg.Incarnation,
	}
	m.SetPeers(nil)
	return m
}

// SetPeers sets the node table: every node id (this node's may be left
// out). The machine keeps a sorted copy; it can be called any time.
func (m *Machine) SetPeers(ids []int64) {
	ps := make([]int64, 0, len(ids)+1)
	for _, id := range ids {
		if id >= 1 {
			ps = append(ps, id)
		}
	}
	ps = append(ps, m.cfg.ID)
	slices.Sort(ps)
	m.peers = slices.Compact(ps)
	for id := range m.dead {
		if _, ok := slices.BinarySearch(m.peers, id); !ok {
			delete(m.dead, id)
		}
	}
}

// Start begins an election with Config.Method, unless this node already
// takes part in one (any method), holds or is acquiring the lease, or has
// resigned.
func (m *Machine) Start() {
	if m.resigned || m.Electing() || (m.cfg.Method == Lease && m.lease.holding) {
		return
	}
	m.counters.Started++
	m.challengeAt = 0
	m.begin(m.cfg.Method)
}

// begin starts a new round of method meth.
func (m *Machine) begin(meth Method) {
	switch meth {
	case Ring:
		m.startRing()
	case ChangRoberts:
		m.startCR()
	case Bully:
		m.startBully()
	case Lease:
		m.startLease()
	}
}

// restart abandons this node's participation in a meth election and starts
// a new round.
func (m *Machine) restart(meth Method) {
	i := partIndex(meth)
	if m.resigned || i < 0 {
		return
	}
	m.counters.Restarts++
	m.parts[i] = part{}
	clear(m.dead) // something went wrong: try every node again
	if meth == Bully {
		m.bully = bullyState{}
	}
	if m.deferring {
		// Not a candidate (Defer): a new round here would stand for it.
		// The others' rounds go on without this node's.
		if !m.Electing() {
			m.electionOver()
		}
		return
	}
	m.begin(meth)
}

func (m *Machine) newRound() Round {
	m.round++
	return Round{Initiator: m.cfg.ID, N: m.round}
}

// Step handles a message from msg.From. Invalid messages, messages from
// this node itself and anything after Resign are ignored.
func (m *Machine) Step(msg Msg) {
	if msg.Validate() != nil || msg.From < 1 || msg.From == m.cfg.ID {
		return
	}
	m.counters.Received[msg.Method]++
	if m.resigned {
		return
	}
	switch msg.Method {
	case Ring, ChangRoberts:
		if !m.stepHop(msg) {
			return
		}
		switch {
		case msg.Kind == KindElected:
			m.stepElected(msg)
		case msg.Method == Ring:
			m.stepRingElection(msg)
		default:
			m.stepCRElection(msg)
		}
	case Bully:
		m.stepBully(msg)
	}
}

// Heard tells the machine that a frame from node id arrived: it is alive.
func (m *Machine) Heard(id int64) { delete(m.dead, id) }

// ttl is how long round records and hop fingerprints are kept: beyond any
// resend or late duplicate of a round's messages.
func (m *Machine) ttl() int64 {
	return 2*int64(m.cfg.ResultTicks) + int64(m.cfg.Retries*m.cfg.TimeoutTicks)
}

// deadTTL: a node taken for dead is tried again after this (marks are
// also cleared when this node's election ends or restarts).
func (m *Machine) deadTTL() int64 { return 2 * int64(m.cfg.ResultTicks) }

// Now is the machine's clock in ticks.
func (m *Machine) Now() int64 { return m.now }

// Tick advances time by one tick and acts on the deadlines that are due.
func (m *Machine) Tick() {
	m.now++
	if m.resigned {
		return
	}
	m.tickHops()
	m.tickBully()
	m.tickLease()
	if m.win != nil && m.now >= m.win.deadline {
		m.win = nil // the host never answered the Win: elect again
	}
	for i := range m.parts {
		if m.win == nil && m.parts[i].active && m.now >= m.parts[i].deadline {
			m.restart(partMethod(i))
		}
	}
	if m.challengeAt != 0 && m.now >= m.challengeAt {
		m.challengeAt = 0
		if m.coord != 0 && m.coord < m.cfg.ID && m.cfg.Method != Lease {
			m.Start()
		}
	}
}

// NextDeadline is the first tick at which Tick may act; until then ticks
// only advance the clock. It may be early, never late; math.MaxInt64 when
// nothing is pending.
func (m *Machine) NextDeadline() int64 {
	next := int64(math.MaxInt64)
	at := func(t int64) { next = min(next, t) }
	if m.resigned {
		return next
	}
	for _, h := range m.hops {
		at(h.next)
	}
	if m.bully.phase == bullyWaitOK {
		at(m.bully.next)
	}
	m.leaseDeadlines(at)
	if m.win != nil {
		at(m.win.deadline)
	} else {
		for _, p := range m.parts {
			if p.active {
				at(p.deadline)
			}
		}
	}
	if m.challengeAt != 0 {
		at(m.challengeAt)
	}
	if next == math.MaxInt64 {
		return next
	}
	return max(next, m.now+1)
}

// AdvanceTo brings the clock to tick t, running Tick at every deadline on
// the way (and only there). It is equivalent to calling Tick t-Now() times.
func (m *Machine) AdvanceTo(t int64) {
	for m.now < t {
		next := m.NextDeadline()
		if next > t {
			m.now = t
			return
		}
		m.now = next - 1
		m.Tick()
	}
}

// Observe tells the machine that the host adopted coordinator coord for
// epoch. It ends every participation whose announced leader is coord, or
// whose best candidate is not better than coord when epoch is newer than
// the one known when the participation began. A voting-method node that
// sees a lower coordinator than itself and is not electing arms the
// challenge timer; a coordinator at least its own id disarms it.
func (m *Machine) Observe(coord, epoch int64) {
	if coord < 1 {
		return
	}
	if epoch >= m.epoch {
		m.coord, m.epoch = coord, epoch
		if m.win != nil && coord > m.cfg.ID {
			m.win = nil // a better node holds the role: our claim would lose
		}
	}
	for i := range m.parts {
		p := &m.parts[i]
		if p.active && ((p.leader != 0 && coord == p.leader) || (epoch > p.base && coord >= p.best)) {
			m.endPart(i, coord)
		}
	}
	m.observeLease(coord, epoch)
	if m.coord >= m.cfg.ID {
		m.challengeAt = 0
	} else {
		m.maybeChallenge()
	}
}

// maybeChallenge arms the challenge timer if this node outranks the
// observed coordinator and is not electing.
func (m *Machine) maybeChallenge() {
	if m.cfg.Method == Lease || m.resigned || m.deferring || m.coord == 0 || m.coord >= m.cfg.ID || m.Electing() || m.challengeAt != 0 {
		return
	}
	m.challengeAt = m.now + int64(m.cfg.ChallengeTicks)
}

// Defer tells the machine whether its host defers to lower nodes: while it
// does (its store link is troubled, or the others lately could not reach
// it, so the role it would win is one it cannot serve), it does not
// challenge a lower coordinator, and it does not stand in elections
// others start: chang-roberts and ring forward the candidacies without
// it, and bully leaves a lower node's ELECTION unanswered (the asker wins
// once its tries run out). An election it starts itself (its coordinator
// died) it still stands in. When it stops deferring, the challenge is
// armed again.
func (m *Machine) Defer(d bool) {
	if m.deferring == d {
		return
	}
	m.deferring = d
	if d {
		m.challengeAt = 0
		return
	}
	m.maybeChallenge()
}

// join records that this node takes part in round of method meth.
func (m *Machine) join(meth Method, r Round) *part {
	p := &m.parts[partIndex(meth)]
	if !p.active {
		*p = part{active: true, round: r, deadline: m.now + int64(m.cfg.ResultTicks),
			best: m.cfg.ID, base: m.epoch}
		if m.deferring {
			p.best = 0 // not a candidate: any coordinator elected ends it
		}
	}
	if p.round != r {
		p.round = r
		p.deadline = max(p.deadline, m.now+int64(m.cfg.ResultTicks))
	}
	return p
}

// endPart ends participation i with the result leader.
func (m *Machine) endPart(i int, leader int64) {
	p := &m.parts[i]
	if !p.active {
		return
	}
	m.report(partMethod(i), p.round, leader, leader == m.cfg.ID)
	*p = part{}
	if leader >= m.cfg.ID {
		m.resultLeader, m.resultAt = leader, m.now
	}
	if i == partIndex(Bully) {
		m.bully = bullyState{}
	}
	if !m.Electing() {
		m.electionOver()
	}
	m.maybeChallenge()
}

// won: this node won round. Unless it claimed the role a moment ago (then
// it announces at once), the host is asked to claim it (Ready.Win) and the
// announcement waits for Claimed.
func (m *Machine) won(meth Method, r Round, cont *Msg, cands []int64) {
	if m.resigned {
		return
	}
	if i := partIndex(meth); m.coord > m.cfg.ID && i >= 0 && (!m.parts[i].active || m.parts[i].base < m.epoch) {
		return // a round older than the better coordinator this node has seen since
	}
	wr := winRound{method: meth, round: r, cands: slices.Clone(cands)}
	if cont != nil {
		c := *cont
		c.Cands = slices.Clone(c.Cands)
		wr.cont = &c
	}
	if m.recentlyClaimed() {
		m.announce([]winRound{wr})
		m.report(meth, r, m.cfg.ID, true)
		if i := partIndex(meth); i >= 0 {
			m.endPart(i, m.cfg.ID)
		}
		return
	}
	if m.win == nil {
		m.win = &winState{deadline: m.now + int64(m.cfg.ResultTicks)}
		m.out.Win = true
	}
	if len(m.win.rounds) < maxWinRounds {
		m.win.rounds = append(m.win.rounds, wr)
	}
}

// settled: within ResultTicks this node saw an election end with a leader
// at least its own id, who is still the coordinator. A message of that
// election arriving late must not start another (chang-roberts treats this
// node as a participant; bully does not start its own election).
func (m *Machine) settled() bool {
	return m.resultLeader >= m.cfg.ID && m.coord == m.resultLeader && m.now-m.resultAt <= int64(m.cfg.ResultTicks)
}

// recentlyClaimed: this node claimed the role within ResultTicks and no
// newer coordinator is known, so a further win of the same election wave
// needs no new claim.
func (m *Machine) recentlyClaimed() bool {
	return m.claimedEpoch != 0 && m.claimedEpoch == m.epoch && m.coord == m.cfg.ID &&
		m.now-m.claimedAt <= int64(m.cfg.ResultTicks)
}

// Claimed: the host claimed the coordinator role for epoch after Win. The
// machine announces the won rounds, reports them and ends its
// participations.
func (m *Machine) Claimed(epoch int64) {
	m.claimedEpoch, m.claimedAt = epoch, m.now
	if epoch >= m.epoch {
		m.coord, m.epoch = m.cfg.ID, epoch
	}
	m.counters.Won++
	var rounds []winRound
	if m.win != nil {
		rounds = m.win.rounds
		m.win = nil
	}
	if len(rounds) == 0 && partIndex(m.cfg.Method) >= 0 {
		rounds = []winRound{{method: m.cfg.Method, round: Round{Initiator: m.cfg.ID, N: m.round}}}
	}
	if !m.resigned {
		m.announce(rounds)
	}
	for _, wr := range rounds {
		m.report(wr.method, wr.round, m.cfg.ID, true)
	}
	for i := range m.parts {
		m.endPart(i, m.cfg.ID)
	}
	m.challengeAt = 0
}

// ClaimLost: the claim lost the compare-and-set to coord at epoch. It is
// taken as Observe(coord, epoch); a pending win is dropped if coord is
// higher than this node (else the host retries the claim).
func (m *Machine) ClaimLost(coord, epoch int64) {
	m.Observe(coord, epoch)
	if coord > m.cfg.ID {
		m.win = nil
	}
}

// Resign: the node is leaving. A lease holder gives the lease up
// (LeaseLost); the node no longer starts, answers or forwards elections.
func (m *Machine) Resign() {
	if m.resigned {
		return
	}
	m.resigned = true
	m.resignLease()
	m.parts = [3]part{}
	m.bully = bullyState{}
	m.win = nil
	m.hops = nil
	m.challengeAt = 0
}

// Electing reports whether this node takes part in an election whose
// result it has not seen confirmed (by Observe or Claimed), waits for its
// claim, or is acquiring the lease.
func (m *Machine) Electing() bool {
	for _, p := range m.parts {
		if p.active {
			return true
		}
	}
	return m.win != nil || m.lease.acquiring
}

// Counters returns a copy of the totals.
func (m *Machine) Counters() Counters {
	c := m.counters
	c.Sent = maps.Clone(c.Sent)
	c.Received = maps.Clone(c.Received)
	return c
}

// Ready returns what the host must do and clears it.
func (m *Machine) Ready() Ready {
	r := m.out
	m.out = Ready{}
	return r
}
