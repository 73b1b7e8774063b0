package node

// runs on: the run loop's goroutine (loop) owns Node's state (the ring
// machine, counters, hop timing); the store worker, the visit worker
// (visitWorker: the sections, such as the queue's Visit) and the peer
// worker run on their own goroutines and talk to it over the channels
// (ops, results, visits, visited, peers, statusCh, wants and the
// sections' Config.Wants). Want and Status are safe from any goroutine.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
	"github.com/ringchat/ringchat/internal/transport"
	"github.com/ringchat/ringchat/internal/wire"
)

// Node runs one ring node: New, then Run until its context ends (it then
// leaves the ring cleanly and returns).
type Node struct {
	cfg  Config
	log  zerolog.Logger
	rn   *ring.Machine
	tr   transport.Transport
	st   store.Control
	wg   sync.WaitGroup
	done chan struct{}

	ops      chan ring.Op
	results  chan ring.Result
	visits   chan token.Token
	visited  chan visitResult
	peers    chan []store.NodeRow
	statusCh chan chan Status
	wants    chan struct{}

	stats Stats

	framesIn map[ring.MsgType]uint64
	// hostileLogged: when a refused frame of each kind was last logged at
	// warn (a peer forging frames gets one line a second, and counters).
	hostileLogged map[ring.Event]time.Time
	framesOut     map[ring.MsgType]uint64

	// the secrets last given to cfg.Keys (owned by the run loop)
	keysGen    int64
	keysSecret string

	// token hop timing (owned by the run loop)
	sentAt    time.Time
	sentSeq   token.Stamp
	lastVisit time.Time
	hopTimes  []time.Duration

	// failed critical sections not logged yet (a store outage fails every
	// visit: one line a second, not one per visit)
	sectionFails  int
	sectionLogged time.Time
	trouble       visitTrouble // whether the store serves this node's visits
}

// sectionLogEvery bounds the "critical section failed" lines.
const sectionLogEvery = time.Second

type visitResult struct {
	tok    token.Token
	worked bool
	fenced bool
	fence  *token.Stamp // fenced: the store's fence after the refusal, if it could be read
	err    error
	over   bool // err: the visit was cancelled at its time budget
}

// Stats are counters of a node's life, for status and metrics.
type Stats struct {
	TokenVisits   uint64
	TokensSent    uint64 // token hops from this node
	TokensFenced  uint64 // visits the store refused (a newer token exists)
	TokensStale   uint64 // stale or duplicate tokens refused on arrival
	TokensDropped uint64 // held tokens discarded (superseded, reset)
	Regenerations uint64
	StoreFailures uint64
	// SectionFailures counts critical sections that failed (the store
	// unavailable, a section's error); fenced ones are TokensFenced.
	SectionFailures uint64
	FramesBad       uint64 // frames that parsed and authenticated but made no sense
	// Frames the ring protocol refused, by reason: a token of a generation
	// the store never issued or with a proof that does not hold
	// (TokensForged), a token on the link of a node the store's ring does
	// not name as predecessor (NotPredecessor), a frame on a path its type
	// never takes or a datagram in this node's own name (OffLink). A token
	// waiting for the store's word on its sender that was dropped before
	// it came (its link closed, or a later one replaced it) is
	// TokensUnjudged: never taken.
	TokensForged   uint64
	NotPredecessor uint64
	TokensUnjudged uint64
	OffLink        uint64
	SuccessorFails uint64
}

// Status is a snapshot of a node.
type Status struct {
	ID          int64
	Phase       ring.Phase
	Coordinator int64
	Epoch       int64
	IsCoord     bool
	Successor   int64
	SuccessorUp bool
	Predecessor int64
	HoldsToken  bool
	LastStamp   token.Stamp
	Stats       Stats
	// HopTimes holds the most recent send-to-ack times of forwarded
	// tokens (up to 1024).
	HopTimes []time.Duration
	// Elections are the election machine's counters.
	Elections election.Counters
	// VisitsFailing: most of this node's recent critical sections failed
	// (the store answers, but not well enough to serve them: a lossy
	// link). Its clients are better served elsewhere.
	VisitsFailing bool
	// AvoidedLinks: as coordinator, the links (pairs of nodes) it avoids
	// placing a node across, for they failed again and again lately.
	AvoidedLinks [][2]int64
	// Joins counts the times the node joined the ring (0: never yet).
	Joins uint64
}

// New builds a node; Run starts it.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Ring.Election.Incarnation == 0 {
		// Milliseconds since 1970 times 2^16: a later run's rounds always
		// number above an earlier run's.
		cfg.Ring.Election.Incarnation = uint64(time.Now().UnixMilli()) << 16
	}
	n := &Node{
		cfg:       cfg,
		log:       cfg.Log.With().Int64("node", cfg.Ring.ID).Logger(),
		rn:        ring.NewMachine(cfg.Ring),
		tr:        cfg.Transport,
		st:        cfg.Store,
		done:      make(chan struct{}),
		ops:       make(chan ring.Op, 16),
		results:   make(chan ring.Result, 16),
		visits:    make(chan token.Token, 4),
		visited:   make(chan visitResult, 4),
		peers:     make(chan []store.NodeRow, 1),
		statusCh:  make(chan chan Status),
		wants:     make(chan struct{}, 1),
		framesIn:  map[ring.MsgType]uint64{},
		framesOut: map[ring.MsgType]uint64{},
	}
	return n, nil
}

// goFunc starts f on a goroutine that Run waits for.
func (n *Node) goFunc(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// Status returns a snapshot, or false if the node is not running.
func (n *Node) Status(ctx context.Context) (Status, bool) {
	ch := make(chan Status, 1)
	select {
	case n.statusCh <- ch:
	case <-n.done:
		return Status{}, false
	case <-ctx.Done():
		return Status{}, false
	}
	select {
	case s := <-ch:
		return s, true
	case <-ctx.Done():
		return Status{}, false
	}
}

// Want tells the node that it has new work for the token (a chat message
// queued here, a login to serve): the token is fetched without idling. It
// never blocks; calls while one is pending are merged.
func (n *Node) Want() {
	select {
	case n.wants <- struct{}{}:
	default:
	}
}

// Run runs the node until ctx ends, then leaves the ring cleanly (hands
// the token on, asks to be spliced out) and returns once every goroutine
// has stopped. It returns nil after a clean leave.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.done)
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	n.goFunc(func() { n.storeWorker(work) })
	n.goFunc(func() { n.visitWorker(work) })
	n.goFunc(func() { n.peerWorker(work) })
	defer func() {
		stopWork()
		n.tr.Close()
		n.wg.Wait()
	}()

	n.rn.SetPeers(n.cfg.Addresses.IDs())
	n.rn.Start()
	n.flush()
	if err := n.loop(ctx); err != nil {
		return err
	}
	n.log.Info().Msg("left the ring")
	return nil
}

// loop feeds the state machine its inputs until it has left the ring,
// starting to leave when ctx ends. It fails if the transport closes.
func (n *Node) loop(ctx context.Context) error {
	// No fixed ticker: the loop sleeps until the state machine's next
	// deadline (or an input), so an idle node wakes only when something is
	// due. Before every input the machine's clock is brought to the present.
	tick := n.cfg.Ring.Tick
	start := time.Now()
	clock := func() int64 { return int64(time.Since(start) / tick) }
	timer := time.NewTimer(0)
	defer timer.Stop()
	var statsC <-chan time.Time
	if n.cfg.StatsInterval > 0 {
		st := time.NewTicker(n.cfg.StatsInterval)
		defer st.Stop()
		statsC = st.C
	}
	leaving := ctx.Done()
	events := n.tr.Events()
	for n.rn.Phase() != ring.PhaseLeft {
		select {
		case <-leaving:
			leaving = nil
			n.rn.AdvanceTo(clock())
			n.log.Info().Msg("leaving the ring")
			n.rn.Leave()
		case <-timer.C:
			n.rn.AdvanceTo(clock())
		case ev, ok := <-events:
			if !ok {
				return errors.New("node: transport closed")
			}
			n.rn.AdvanceTo(clock())
			n.handleEvent(ev)
		case r := <-n.results:
			n.rn.AdvanceTo(clock())
			n.storeDone(r)
		case v := <-n.visited:
			n.rn.AdvanceTo(clock())
			n.visitDone(v)
		case nodes := <-n.peers:
			n.cfg.Addresses.Set(nodes)
			n.rn.SetPeers(n.cfg.Addresses.IDs())
		case ch := <-n.statusCh:
			ch <- n.snapshot()
		case <-n.wants:
			n.rn.AdvanceTo(clock())
			n.rn.Want()
		case <-n.cfg.Wants:
			n.rn.AdvanceTo(clock())
			n.rn.Want()
		case <-statsC:
			n.logStats()
		}
		n.clearTrouble()
		n.flush()
		timer.Reset(SleepUntilTick(start, tick, n.rn.NextDeadline()))
	}
	return nil
}

// clearTrouble tells the ring when its store link's trouble is over: only
// time clears it (a window without a failed visit); visitDone tells it
// the verdicts that visits make.
func (n *Node) clearTrouble() {
	if n.rn.Troubled() {
		n.rn.SetTroubled(n.trouble.at(time.Now()))
	}
}

// storeDone counts and logs the result of a store operation and hands it
// to the state machine.
func (n *Node) storeDone(r ring.Result) {
	if r.Outcome == ring.Failed {
		n.stats.StoreFailures++
		n.log.Warn().Err(r.Err).Stringer("op", r.Op).Msg("store operation failed; retrying")
	}
	if r.Op.Kind == ring.OpRegenerate && r.Outcome == ring.OK {
		n.stats.Regenerations++
	}
	n.rn.StoreDone(r)
}

// maxSleep caps a sleep until a deadline: a machine with nothing pending
// reports a deadline far in the future, which must not overflow.
const maxSleep = time.Hour

// SleepUntilTick is how long to sleep from now until tick next of a clock
// that started at start with the given tick; never negative, at most an
// hour.
func SleepUntilTick(start time.Time, tick time.Duration, next int64) time.Duration {
	if next >= int64(maxSleep/tick)+int64(time.Since(start)/tick) {
		return maxSleep
	}
	return max(time.Until(start.Add(time.Duration(next)*tick)), 0)
}

func (n *Node) snapshot() Status {
	c, e := n.rn.Coordinator()
	succ, up := n.rn.Successor()
	return Status{
		ID: n.cfg.Ring.ID, Phase: n.rn.Phase(), Coordinator: c, Epoch: e, IsCoord: n.rn.IsCoordinator(),
		Successor: succ, SuccessorUp: up, Predecessor: n.rn.Predecessor(), HoldsToken: n.rn.HoldsToken(),
		LastStamp: n.rn.LastStamp(), Stats: n.stats, HopTimes: append([]time.Duration(nil), n.hopTimes...),
		Elections: n.rn.Elections(), VisitsFailing: n.trouble.at(time.Now()), AvoidedLinks: n.rn.AvoidedLinks(),
		Joins: n.rn.Joins(),
	}
}

func (n *Node) handleEvent(ev transport.Event) {
	switch ev.Kind {
	case transport.EventFrame:
		via := map[transport.Via]ring.Via{
			transport.ViaDatagram: ring.ViaUDP, transport.ViaPredecessor: ring.ViaPred, transport.ViaSuccessor: ring.ViaSucc,
		}[ev.Via]
		m, err := ring.ParseMsg(ev.Frame.Type, ev.Frame.Src, ev.Frame.Epoch, ev.Frame.Payload, via)
		if err != nil {
			n.stats.FramesBad++
			n.log.Warn().Err(err).Int64("from", ev.Frame.Src).Msg("dropped a frame")
			return
		}
		m.To = ev.Frame.Dst // the transport dropped datagrams meant for another node
		if m.Type == ring.MsgTokenAck && m.Stamp != nil && *m.Stamp == n.sentSeq && !n.sentAt.IsZero() {
			n.recordHop(time.Since(n.sentAt))
		}
		n.framesIn[m.Type]++
		n.rn.Step(m)
	case transport.EventSuccessorUp:
		n.rn.SuccessorUp(ev.Peer)
	case transport.EventSuccessorDown:
		switch {
		case ev.Err == nil: // we replaced or closed it ourselves
		case errors.Is(ev.Err, transport.ErrReplaced):
			n.log.Debug().Int64("peer", ev.Peer).Msg("successor took another predecessor")
			n.rn.SuccessorReplaced(ev.Peer)
		default:
			n.log.Info().Int64("peer", ev.Peer).Err(ev.Err).Msg("successor link lost")
			n.rn.SuccessorDown(ev.Peer)
		}
	case transport.EventPredecessorUp:
		n.rn.PredecessorUp(ev.Peer)
	case transport.EventPredecessorDown:
		n.rn.PredecessorDown(ev.Peer)
	}
}

// StatsLogMessage is the message of the periodic statistics log line.
const StatsLogMessage = "token stats"

func (n *Node) logStats() {
	hops := slices.Clone(n.hopTimes)
	slices.Sort(hops)
	pct := func(p float64) int64 {
		if len(hops) == 0 {
			return 0
		}
		return hops[min(len(hops)-1, int(p*float64(len(hops))))].Microseconds()
	}
	c, e := n.rn.Coordinator()
	n.log.Info().Int("hops", len(hops)).Int64("hop_p50_us", pct(0.5)).Int64("hop_p99_us", pct(0.99)).
		Uint64("visits", n.stats.TokenVisits).Uint64("regenerations", n.stats.Regenerations).
		Int64("coordinator", c).Int64("epoch", e).Any("frames_in", n.framesIn).Any("frames_out", n.framesOut).
		Msg(StatsLogMessage)
	n.hopTimes = n.hopTimes[:0]
}

func (n *Node) recordHop(d time.Duration) {
	if len(n.hopTimes) >= 1024 {
		n.hopTimes = n.hopTimes[1:]
	}
	n.hopTimes = append(n.hopTimes, d)
	n.sentAt = time.Time{}
	if o := n.cfg.HopObserver; o != nil {
		o.Observe(d.Seconds())
	}
}

// publishKeys hands the transport the secrets the store confirmed, when
// they changed: before a dial this flush asks for, so that its HELLO
// proves itself under the newest.
func (n *Node) publishKeys() {
	if n.cfg.Keys == nil {
		return
	}
	if gen, secret := n.rn.Confirmed(); gen != n.keysGen || secret != n.keysSecret {
		n.keysGen, n.keysSecret = gen, secret
		n.cfg.Keys.Publish(n.rn.Secrets())
	}
}

// countVisit counts a token visit and observes the rotation time (the time
// since the previous visit here).
func (n *Node) countVisit() {
	n.stats.TokenVisits++
	now := time.Now()
	if o := n.cfg.RotationObserver; o != nil && !n.lastVisit.IsZero() {
		o.Observe(now.Sub(n.lastVisit).Seconds())
	}
	n.lastVisit = now
}

// flush carries out what the state machine asked for.
func (n *Node) flush() {
	n.publishKeys()
	r := n.rn.Ready()
	if r.Empty() {
		return
	}
	for _, note := range r.Notes {
		n.logNote(note)
	}
	if r.Connect != nil {
		if *r.Connect == 0 {
			n.tr.DisconnectSuccessor()
		} else {
			n.tr.ConnectSuccessor(*r.Connect)
		}
	}
	if r.DropPred {
		n.tr.DropPredecessor()
	}
	if r.RefusePred {
		n.tr.RefusePredecessor()
	}
	for _, m := range r.Msgs {
		n.send(m)
	}
	for _, op := range r.Ops {
		n.ops <- op // the state machine keeps at most one in flight
	}
	for _, t := range r.Visits {
		if len(n.cfg.Sections) == 0 {
			// Nothing to run: skip the worker round trip.
			n.rn.VisitDone(t, false)
			n.countVisit()
			n.flush()
			continue
		}
		n.visits <- t
	}
}

func (n *Node) send(m ring.Msg) {
	p, err := m.Payload()
	if err != nil {
		n.log.Error().Err(err).Msg("encode frame")
		return
	}
	n.framesOut[m.Type]++
	switch {
	case m.Type == ring.MsgToken:
		n.stats.TokensSent++
	case m.Type == ring.MsgTokenAck && m.Stale:
		n.stats.TokensStale++
	}
	f := wire.Frame{Type: string(m.Type), Src: m.From, Epoch: m.Epoch, Payload: p}
	switch m.Via {
	case ring.ViaUDP:
		err = n.tr.Send(m.To, f)
	case ring.ViaSucc:
		if m.Type == ring.MsgToken {
			n.sentAt, n.sentSeq = time.Now(), m.Token.Stamp
		}
		err = n.tr.SendSuccessor(f)
	case ring.ViaPred:
		err = n.tr.SendPredecessor(f)
	}
	if err != nil && !errors.Is(err, transport.ErrNoLink) {
		n.log.Debug().Err(err).Stringer("msg", m).Msg("send failed")
	}
}

func (n *Node) logNote(note ring.Note) {
	if note.Event == ring.EventJoined && n.cfg.Joined != nil {
		select {
		case n.cfg.Joined <- struct{}{}:
		default: // one already waits to be taken
		}
	}
	if r := note.Election; r != nil {
		role := "learned"
		if r.Won {
			role = "won"
		}
		n.log.Info().Str("method", string(r.Method)).Int64("initiator", r.Round.Initiator).Uint64("round", r.Round.N).
			Int64("leader", r.Leader).Str("role", role).Int("participants", r.Participants).Int("messages_sent", r.MsgsSent).
			Dur("duration_ms", time.Duration(r.Ticks)*n.cfg.Ring.Tick).Int64("epoch", note.Epoch).Msg("election finished")
		return
	}
	switch note.Event {
	case ring.EventTokenDropped:
		n.stats.TokensDropped++
	case ring.EventTokenForged:
		n.stats.TokensForged++
	case ring.EventNotPredecessor:
		n.stats.NotPredecessor++
	case ring.EventTokenUnjudged:
		n.stats.TokensUnjudged++
	case ring.EventOffLink:
		n.stats.OffLink++
	}
	ev := n.log.Debug()
	switch note.Event {
	case ring.EventCoordinator, ring.EventCoordinatorDeposed, ring.EventCoordinatorFailed, ring.EventCoordinatorUnresponsive,
		ring.EventJoined, ring.EventLeft, ring.EventSplicedOut, ring.EventHandoff, ring.EventRejoin, ring.EventNotInStoreRing,
		ring.EventCoordinatorOrphaned, ring.EventCoordinatorOutside, ring.EventTokenRegenerated, ring.EventLeaveDeadline, ring.EventLeaveUnanswered,
		ring.EventElectionWon, ring.EventLeaseLost, ring.EventReporterMoved, ring.EventTroubled, ring.EventTroubleOver, ring.EventHandoffDeclined:
		ev = n.log.Info()
	case ring.EventTokenForged, ring.EventNotPredecessor, ring.EventTokenUnjudged:
		if now := time.Now(); now.Sub(n.hostileLogged[note.Event]) >= time.Second {
			if n.hostileLogged == nil {
				n.hostileLogged = map[ring.Event]time.Time{}
			}
			n.hostileLogged[note.Event] = now
			ev = n.log.Warn()
		}
	case ring.EventSuccessorFailed, ring.EventPredecessorSilent, ring.EventTokenFenced, ring.EventSuccessorWatchdog:
		if note.Event == ring.EventSuccessorFailed {
			n.stats.SuccessorFails++
		}
		ev = n.log.Warn()
	}
	ev.Int64("peer", note.Peer).Int64("epoch", note.Epoch).Msg(string(note.Event))
}

func (n *Node) visitDone(v visitResult) {
	n.countVisit()
	switch {
	case v.fenced:
		n.stats.TokensFenced++
		n.rn.VisitFenced(v.tok, v.fence)
	case v.err != nil:
		n.logSection(v)
		troubled := n.trouble.failedWith(time.Now(), v.err, v.over)
		n.rn.VisitFailed(v.tok)
		n.rn.SetTroubled(troubled)
	default:
		n.logSection(v)
		troubled := n.trouble.observe(time.Now(), true)
		n.rn.VisitDone(v.tok, v.worked)
		n.rn.SetTroubled(troubled)
	}
}

// logSection logs a failed critical section, the first of a run of them
// and then at most once per sectionLogEvery with the count since, and the
// first success after them.
func (n *Node) logSection(v visitResult) {
	now := time.Now()
	switch {
	case v.err != nil:
		n.stats.SectionFailures++
		n.sectionFails++
		if now.Sub(n.sectionLogged) < sectionLogEvery {
			return
		}
		n.log.Warn().Err(v.err).Stringer("token", v.tok.Stamp).Int("failed", n.sectionFails).Msg("critical section failed")
		n.sectionFails, n.sectionLogged = 0, now
	case !n.sectionLogged.IsZero():
		n.log.Info().Int("failed_unlogged", n.sectionFails).Msg("critical sections succeed again")
		n.sectionFails, n.sectionLogged = 0, time.Time{}
	}
}

// opTimeout is how long the store may take over op before it counts as
// failed. A check a token may be waiting on gets CheckTimeout. A lease
// renewal gets no longer than the lease it renews: answered later, the
// lease may have run out meanwhile, and the operations queued behind it
// (the repair of a successor link, under heavy loss on the coordinator's
// packets) waited the whole StoreTimeout for it (4.6 s without a visit in
// a chaos run at 20 % loss).
func (c Config) opTimeout(op ring.Op) time.Duration {
	timeout := c.StoreTimeout
	switch op.Kind {
	case ring.OpReadFence, ring.OpCheckMember:
		timeout = min(timeout, c.CheckTimeout)
	case ring.OpAlive:
		if op.LeaseTTL > 0 {
			timeout = min(timeout, op.LeaseTTL)
		}
	}
	return timeout
}

// storeWorker runs store operations one at a time.
func (n *Node) storeWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-n.ops:
			octx, cancel := context.WithTimeout(ctx, n.cfg.opTimeout(op))
			res := execOp(octx, n.st, n.cfg.ClearPresence, n.cfg.Ring.ID, op)
			cancel()
			if len(res.Changes) > 0 && op.Kind != ring.OpSync {
				n.log.Debug().Stringer("op", op.Kind).Int64("node", op.Node).Int64("failed", op.Failed).Bool("move", op.Move).
					Interface("avoid", op.Avoid).Interface("changes", res.Changes).Msg("ring changed")
			}
			select {
			case n.results <- res:
			case <-ctx.Done():
				return
			}
		}
	}
}

// visitWorker runs the critical sections of token visits.
func (n *Node) visitWorker(ctx context.Context) {
	maxHold := time.Duration(n.cfg.Ring.Token.MaxHoldTicks) * n.cfg.Ring.Tick
	stretch := 1
	var lastCut time.Time // when a visit was last cancelled at its budget
	var reach storeReach
	answered := make(chan struct{})
	for {
		select {
		case <-ctx.Done():
			return
		case <-answered:
			reach.answered()
			n.log.Info().Msg("the store answers a ping again: token visits run their critical sections")
		case tok := <-n.visits:
			res := visitResult{tok: tok, err: errStoreOutOfReach}
			if !reach.skip() {
				vctx, cancel := context.WithTimeout(ctx, time.Duration(stretch)*maxHold)
				res = n.runSections(vctx, tok)
				res.over = res.err != nil && errors.Is(vctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
				cancel()
				if res.over {
					lastCut = time.Now()
				}
				stretch = nextStretch(stretch, res.err == nil, res.over, time.Since(lastCut))
				if reach.visitEnded(res.err, res.over) {
					n.log.Warn().Int("visits", reachTrip).Msg("visits ran out of their budget in a row: token visits pass the token on without their critical sections until the store answers a ping")
					n.goFunc(func() { awaitStore(ctx, n.st, answered) })
				}
			}
			if res.fenced {
				res.fence = n.readFence(ctx)
			}
			select {
			case n.visited <- res:
			case <-ctx.Done():
				return
			}
		}
	}
}

// maxStretch bounds how many times MaxHold a visit may take after visits
// cancelled at their budget: 4 × 100 ms covers a lost packet to the store
// (TCP retransmits after 200 ms at the least), where a visit held to 100 ms
// fails whenever one of its packets is lost, and on a lossy link would
// fail again and again.
const maxStretch = 4

// stretchKeep is how long the budget stays stretched after the last
// visit cancelled at its budget: on a lossy link a light visit commits
// now and then between ones that lose a packet, and a budget back at one
// MaxHold after each would fail the next loaded visit again (seen at 5 %
// loss: no delivery at the lossy node for 20 s, visits failing at 100 ms
// between light ones that committed).
const stretchKeep = 2 * time.Second

// nextStretch is the next visit's budget, in MaxHolds, after a visit at
// stretch that committed (ok) or was cancelled at its budget (over), the
// last cut short sinceCut ago: twice as long after one cut short, up to
// maxStretch; back to one MaxHold once a visit commits with none cut short
// for stretchKeep; a visit that failed otherwise (the store refused, a
// newer token fenced it) changes nothing. The coordinator makes a new
// token only after a lap in which every node could have held it for
// MaxHold (token.Config.LossBound): in a ring of four or more a stretched
// visit fits in that; in a smaller one it may be fenced off by a new
// token, which costs what the failure it replaces does.
func nextStretch(stretch int, ok, over bool, sinceCut time.Duration) int {
	switch {
	case over:
		return min(2*stretch, maxStretch)
	case ok && sinceCut >= stretchKeep:
		return 1
	}
	return stretch
}

func (n *Node) runSections(ctx context.Context, tok token.Token) visitResult {
	fence := store.Fence{Generation: tok.Gen, Seq: tok.Seq, Holder: n.cfg.Ring.ID}
	fenced := func(fn func(store.Tx) error) error { return n.st.Fenced(ctx, fence, fn) }
	res := visitResult{tok: tok}
	for _, section := range n.cfg.Sections {
		app, worked, err := section(ctx, res.tok, fenced)
		if err != nil {
			res.err = err
			res.fenced = errors.Is(err, store.ErrFenced)
			if res.fenced {
				n.log.Warn().Err(err).Msg("critical section refused: a newer token exists")
			}
			return res
		}
		res.tok.App = app
		res.worked = res.worked || worked
	}
	return res
}

// readFence reads the store's fence after a refused critical section, so
// that the ring can tell a token of a generation the store never issued
// (forged) from one a newer generation superseded. It returns nil if the
// store cannot say.
func (n *Node) readFence(ctx context.Context) *token.Stamp {
	fctx, cancel := context.WithTimeout(ctx, n.cfg.StoreTimeout)
	defer cancel()
	f, err := n.st.Fence(fctx)
	if err != nil {
		n.log.Warn().Err(err).Msg("could not read the token fence after a refused critical section")
		return nil
	}
	return &token.Stamp{Gen: f.Generation, Seq: f.Seq}
}

// dbServerCheck is how often the node looks whether the database server
// it uses changed (the store knows it in memory): a failover shows in
// `ringnode status` within a second, not at the next PeerRefresh.
const dbServerCheck = time.Second

// peerWorker re-reads the node table every PeerRefresh, and records the
// database server the node uses when it changes.
func (n *Node) peerWorker(ctx context.Context) {
	refresh := time.NewTicker(n.cfg.PeerRefresh)
	defer refresh.Stop()
	check := time.NewTicker(min(dbServerCheck, n.cfg.PeerRefresh))
	defer check.Stop()
	var db dbServerRecord
	var health healthRecord
	n.recordDBServer(ctx, &db)
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			n.recordDBServer(ctx, &db)
			n.reportHealth(ctx, &health)
		case <-refresh.C:
			n.refreshPeers(ctx)
		}
	}
}

// refreshPeers reads the node table and hands it to the run loop.
func (n *Node) refreshPeers(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, n.cfg.StoreTimeout)
	nodes, err := n.st.Nodes(rctx)
	cancel()
	if err != nil {
		n.log.Warn().Err(err).Msg("could not refresh the node table")
		return
	}
	select {
	case n.peers <- nodes:
	default: // the loop has not taken the previous list yet
	}
}

// dbServerRecord is what peerWorker knows of the node's row: the
// database server recorded there, and the one it last failed to record
// (warned once, tried again every check).
type dbServerRecord struct {
	recorded, failed string
}

// recordDBServer writes the database server in use to the node's row if
// it is not the one recorded.
func (n *Node) recordDBServer(ctx context.Context, db *dbServerRecord) {
	named, ok := n.st.(interface{ Server() string })
	if !ok {
		return
	}
	server := named.Server()
	if server == db.recorded { // the same, or none (SQLite)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, n.cfg.StoreTimeout)
	defer cancel()
	if err := n.st.SetDBServer(rctx, n.cfg.Ring.ID, server); err != nil {
		if db.failed != server {
			n.log.Warn().Err(err).Str("server", server).Msg("could not record the database server in use; trying again every second")
		}
		db.failed = server
		return
	}
	db.recorded, db.failed = server, ""
}

// String describes the node for logs.
func (n *Node) String() string { return fmt.Sprintf("node %d", n.cfg.Ring.ID) }
