// Package ringsim runs rings of ring.Node state machines in a deterministic
// simulation: a seeded network (datagram loss, duplication, reordering), TCP
// links with the real transport's semantics, node crashes, stalls and
// restarts, and a model of the store. Tests drive it tick by tick; the same
// seed gives the same run.
package ringsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/token"
)

// State of a simulated process.
type State uint8

// Process states.
const (
	Down    State = iota // not running (crashed or not started)
	Running              // processes inputs and ticks
	Stalled              // SIGSTOP: inputs queue up, no ticks
)

// Proc is one simulated node process.
type Proc struct {
	ID    int64
	Node  *ring.Machine
	State State
	// Inbox holds inputs delivered while stalled.
	inbox []func()
	// link state as the transport would have it
	succ, succGen int64 // outbound link target and its generation
	pred, predGen int64 // inbound link source and its generation
	dialGen       int64 // the newest dial (a dial's failure counts only if no newer one began)
	visits        []visit
	Visits        int // critical sections committed
	Failed        int // critical sections failed (the store down)
	// Work done: the critical sections that did work (see Sim.Work), and
	// the tick the last of them committed.
	Worked    int
	WorkedAt  int64
	work      bool // work waits for the next critical section
	Exited    bool
	inc       int   // incarnation: bumped at every start
	base      int64 // sim time at which the node's clock read 0 (lazy mode)
	stalledAt int64
	// overBudget: when this node's visits last ran out of their budget
	// (store lag, below); troubled: as the runtime judged it from them.
	overBudget []int64
	troubled   bool
}

// clock is the node's own time at sim time now.
func (p *Proc) clock(now int64) int64 { return now - p.base }

type visit struct {
	tok  token.Token
	done int64
	work bool // this critical section does the work that waited
	over bool // it ran out of its time budget (store lag): it fails
}

type envelope struct {
	at   int64
	seq  int64
	to   int64
	inc  int // 0: any incarnation (datagrams); else only that one
	run  func(p *Proc)
	desc string
}

// Sim is a deterministic simulation of a ring.
type Sim struct {
	Now   int64
	Procs map[int64]*Proc
	Store *Store
	Cfg   func(id int64) ring.Config
	rng   *rand.Rand

	// Faults on datagrams (probabilities in [0,1]) and extra delay.
	Loss, Dup float64
	MaxDelay  int64
	// HoldTicks is how long a critical section takes.
	HoldTicks int64
	// OpDelay, if positive, delays a store operation's result by up to
	// that many ticks after the store carried it out (a slow reply), so
	// that the node may learn other news in between.
	OpDelay int64
	// Trace, if set, receives a line per event.
	Trace func(string)
	// Lazy drives nodes as the runtime does: instead of a Tick every tick,
	// AdvanceTo their next deadline and before every input. A correct
	// NextDeadline makes a lazy run identical to an eager one.
	Lazy bool
	// IdleVisits: a critical section with no work does not touch the
	// store, as the chat service's (it passes the token on at once). By
	// default every visit commits in the store.
	IdleVisits bool
	// StoreLoss: Lose slows the node's store link too, as it does on a
	// real network (netfault.go: storeLag): its operations and visits
	// lag, a visit over its budget fails, an operation over its timeout
	// fails, and the node is judged troubled as the runtime judges it.
	StoreLoss bool

	queue   []envelope
	seq     int64
	linkGen int64
	cut     map[int64]bool // nodes cut off from the others (not from the store)
	nf      netFaults      // links cut, nodes cut from the store, packet loss
}

// New returns a simulation of the given node ids (none started).
func New(seed uint64, ids ...int64) *Sim {
	s := &Sim{
		Procs:     map[int64]*Proc{},
		cut:       map[int64]bool{},
		Store:     NewStore(),
		Cfg:       ring.TestConfig,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		HoldTicks: 1,
	}
	for _, id := range ids {
		s.Procs[id] = &Proc{ID: id}
	}
	s.Store.Now = func() int64 { return s.Now }
	return s
}

func (s *Sim) tracef(format string, args ...any) {
	if s.Trace != nil {
		s.Trace(fmt.Sprintf("t=%d ", s.Now) + fmt.Sprintf(format, args...))
	}
}

// IDs returns the node ids, ascending.
func (s *Sim) IDs() []int64 {
	ids := make([]int64, 0, len(s.Procs))
	for id := range s.Procs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Start starts (or restarts) node id as a fresh process.
func (s *Sim) Start(id int64) {
	p := s.Procs[id]
	if p == nil {
		p = &Proc{ID: id}
		s.Procs[id] = p
	}
	if p.State != Down {
		s.Crash(id)
	}
	cfg := s.Cfg(id)
	s.Store.Tick = cfg.Tick // leases are durations: the store's clock ticks with the nodes'
	*p = Proc{ID: id, Node: ring.NewMachine(cfg), State: Running, inc: p.inc + 1, base: s.Now}
	p.Node.SetPeers(s.IDs())
	p.Node.Start()
	s.tracef("start %d", id)
	s.flush(p)
}

// Crash kills node id (SIGKILL): its links break at once, like a TCP reset.
func (s *Sim) Crash(id int64) {
	p := s.Procs[id]
	if p == nil || p.State == Down {
		return
	}
	s.tracef("crash %d", id)
	p.State = Down
	p.inbox = nil
	p.visits = nil
	s.breakLinksOf(p)
}

func (s *Sim) breakLinksOf(p *Proc) {
	s.closeOutbound(p)
	for _, id := range s.IDs() {
		q := s.Procs[id]
		if q != p && q.succ == p.ID {
			gen := q.succGen
			s.deliverIn(q, 1, fmt.Sprintf("succ-down %d", p.ID), func(q *Proc) {
				if q.succGen == gen {
					q.succ, q.succGen = 0, 0
					q.Node.SuccessorDown(p.ID)
				}
			})
		}
	}
	p.succ, p.succGen, p.pred, p.predGen = 0, 0, 0, 0
}

// Stall stops node id (SIGSTOP).
func (s *Sim) Stall(id int64) {
	if p := s.Procs[id]; p != nil && p.State == Running {
		s.tracef("stall %d", id)
		s.catchUp(p)
		p.State = Stalled
		p.stalledAt = s.Now
	}
}

// Wake resumes a stalled node (SIGCONT); what queued up is delivered.
func (s *Sim) Wake(id int64) {
	p := s.Procs[id]
	if p == nil || p.State != Stalled {
		return
	}
	s.tracef("wake %d", id)
	p.State = Running
	p.base += s.Now - p.stalledAt // a stopped process's clock did not tick
	s.catchUp(p)
	inbox := p.inbox
	p.inbox = nil
	for _, f := range inbox {
		if p.State != Running {
			break
		}
		f()
	}
}

// Isolate cuts node id off from every other node (a network partition):
// its links break, datagrams to and from it are lost, and dials fail, but
// it goes on running and reaches the store.
func (s *Sim) Isolate(id int64) {
	s.tracef("isolate %d", id)
	s.cut[id] = true
	if p := s.Procs[id]; p != nil && p.State != Down {
		s.breakLinksOf(p)
	}
}

// Heal undoes Isolate(id).
func (s *Sim) Heal(id int64) {
	s.tracef("heal %d", id)
	delete(s.cut, id)
}

// apart reports whether a partition separates a and b.
func (s *Sim) apart(a, b int64) bool { return a != b && (s.cut[a] || s.cut[b]) }

// Leave asks node id to leave cleanly (SIGTERM).
func (s *Sim) Leave(id int64) {
	if p := s.Procs[id]; p != nil && p.State == Running {
		s.tracef("leave %d", id)
		s.catchUp(p)
		p.Node.Leave()
		s.flush(p)
	}
}

// catchUp brings a lazy node's clock to the present (between steps), as an
// eager node's is.
func (s *Sim) catchUp(p *Proc) {
	if s.Lazy {
		p.Node.AdvanceTo(p.clock(s.Now))
		s.flush(p)
	}
}

// deliverIn delivers f to this incarnation of p (a restarted process does
// not get its predecessor's link events or store results).
func (s *Sim) deliverIn(p *Proc, delay int64, desc string, f func(*Proc)) {
	s.seq++
	s.queue = append(s.queue, envelope{at: s.Now + delay, seq: s.seq, to: p.ID, inc: p.inc, run: f, desc: desc})
}

// datagram delivers f to whichever incarnation of p runs then.
func (s *Sim) datagram(p *Proc, delay int64, desc string, f func(*Proc)) {
	s.seq++
	s.queue = append(s.queue, envelope{at: s.Now + delay, seq: s.seq, to: p.ID, run: f, desc: desc})
}

// Step advances the simulation by one tick: due deliveries, then a tick of
// every running node, then due critical sections.
func (s *Sim) Step() {
	s.Now++
	due := s.queue[:0:0]
	rest := s.queue[:0:0]
	for _, e := range s.queue {
		if e.at <= s.Now {
			due = append(due, e)
		} else {
			rest = append(rest, e)
		}
	}
	s.queue = rest
	slices.SortFunc(due, func(a, b envelope) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.seq - b.seq)
	})
	for _, e := range due {
		p := s.Procs[e.to]
		switch {
		case p == nil || p.State == Down || (e.inc != 0 && e.inc != p.inc):
		case p.State == Stalled:
			f := e.run
			p.inbox = append(p.inbox, func() { f(p); s.flush(p) })
		default:
			s.tracef("deliver %d: %s", e.to, e.desc)
			if s.Lazy {
				p.Node.AdvanceTo(p.clock(s.Now) - 1)
				s.flush(p)
			}
			e.run(p)
			s.flush(p)
		}
	}
	for _, id := range s.IDs() {
		p := s.Procs[id]
		if p.State != Running {
			continue
		}
		switch {
		case !s.Lazy:
			s.apply(p, s.tickEager(p))
		case p.Node.NextDeadline() <= p.clock(s.Now) || len(p.visits) > 0:
			p.Node.AdvanceTo(p.clock(s.Now))
		}
		s.flush(p)
		s.finishVisits(p)
	}
}

// tickEager ticks p and checks NextDeadline's promise on the way: a tick
// that acts (sends, dials, asks the store, visits, notes an event) comes
// no sooner than the deadline the node gave just before it. A late
// deadline would make a lazy runtime, which sleeps until it, act late or
// never; every eager schedule of every test checks it, not only the lazy
// ones (TestLazyEqualsEager).
func (s *Sim) tickEager(p *Proc) ring.Ready {
	due := p.Node.NextDeadline()
	p.Node.Tick()
	r := p.Node.Ready()
	if now := p.Node.Now(); !r.Empty() && now < due {
		panic(fmt.Sprintf("ringsim: node %d acted at tick %d before its deadline %d (NextDeadline is late): %+v", p.ID, now, due, r))
	}
	return r
}

func (s *Sim) finishVisits(p *Proc) {
	keep := p.visits[:0]
	for _, v := range p.visits {
		if v.done > s.Now {
			keep = append(keep, v)
			continue
		}
		switch {
		case s.IdleVisits && !v.work:
			p.Node.VisitDone(v.tok, false)
		case v.over:
			p.Failed++
			p.work = p.work || v.work
			p.Node.VisitFailed(v.tok)
			s.judgeTrouble(p, true)
		case s.Store.Down || s.storeCutFor(p.ID):
			p.Failed++
			p.work = p.work || v.work
			p.Node.VisitFailed(v.tok)
		case s.Store.Commit(p.ID, v.tok.Stamp, s.Now):
			p.Visits++
			if v.work {
				p.Worked++
				p.WorkedAt = s.Now
			}
			p.Node.VisitDone(v.tok, v.work)
		default:
			p.work = p.work || v.work
			cur := s.Store.Fence
			p.Node.VisitFenced(v.tok, &cur)
		}
	}
	p.visits = keep
	s.judgeTrouble(p, false)
	s.flush(p)
}

// Want tells node id it has work for the token (a client's message).
func (s *Sim) Want(id int64) {
	if p := s.Procs[id]; p != nil && p.State == Running {
		s.want(p)
	}
}

// Work gives node id work (a client's message), as the chat layer does:
// the work waits for the node's next critical section, which does it (and
// reports that it worked), and the node wants the token (Want).
func (s *Sim) Work(id int64) {
	if p := s.Procs[id]; p != nil && p.State == Running {
		p.work = true
		s.want(p)
	}
}

func (s *Sim) want(p *Proc) {
	if s.Lazy { // the node's clock reads now, as it would for any input
		p.Node.AdvanceTo(p.clock(s.Now))
		s.flush(p)
	}
	p.Node.Want()
	s.flush(p)
}

// Run steps n ticks.
func (s *Sim) Run(n int) {
	for range n {
		s.Step()
	}
}

// RunUntil steps until cond holds, at most max ticks; it reports whether
// cond held.
func (s *Sim) RunUntil(max int, cond func() bool) bool {
	for range max {
		if cond() {
			return true
		}
		s.Step()
	}
	return cond()
}

// flush carries out what the node asked for.
func (s *Sim) flush(p *Proc) {
	if p.State != Running {
		return
	}
	s.apply(p, p.Node.Ready())
}

// apply carries out what node p asked for.
func (s *Sim) apply(p *Proc, r ring.Ready) {
	for _, note := range r.Notes {
		s.tracef("node %d: %s peer=%d epoch=%d", p.ID, note.Event, note.Peer, note.Epoch)
	}
	if r.Connect != nil {
		s.connect(p, *r.Connect)
	}
	if r.DropPred && p.pred != 0 {
		s.dropPred(p, false)
	}
	if r.RefusePred && p.pred != 0 {
		s.dropPred(p, true)
	}
	for _, m := range r.Msgs {
		s.sendMsg(p, m)
	}
	for _, op := range r.Ops {
		op := op
		// A node cut from the store, or whose lossy link makes the
		// operation outlast its timeout, gets a failure; a lossy link
		// otherwise delays it.
		failAt, delay, desc := int64(0), int64(1), "store "
		if s.storeCutFor(p.ID) {
			failAt, desc = storeTimeoutTicks, "store unreachable "
		} else if lag := s.storeLag(p.ID); lag > opTimeoutTicks(op) {
			failAt, desc = opTimeoutTicks(op), "store timeout "
		} else if lag > 0 {
			delay, desc = lag, "store lag "
		}
		if failAt > 0 {
			s.deliverIn(p, failAt, desc+op.String(), func(p *Proc) {
				p.Node.StoreDone(ring.Result{Op: op, Outcome: ring.Failed})
			})
			continue
		}
		s.deliverIn(p, delay, desc+op.String(), func(p *Proc) {
			res := s.Store.Do(p.ID, op)
			if s.OpDelay <= 0 {
				p.Node.StoreDone(res)
				return
			}
			s.deliverIn(p, s.rng.Int64N(s.OpDelay+1), "result "+op.String(), func(p *Proc) { p.Node.StoreDone(res) })
		})
	}
	for _, t := range r.Visits {
		v := visit{tok: t, done: s.Now + s.HoldTicks, work: p.work}
		var lag int64
		if !s.IdleVisits || v.work { // an idle visit does not touch the store
			lag = s.storeLag(p.ID)
		}
		if lag > visitBudgetTicks {
			v.done, v.over = s.Now+visitBudgetTicks, true
		} else {
			v.done += lag
		}
		p.visits = append(p.visits, v)
		p.work = false
	}
	if p.Node.Phase() == ring.PhaseLeft && !p.Exited {
		p.Exited = true
		s.tracef("exit %d", p.ID)
		p.State = Down
		s.breakLinksOf(p)
	}
}

// closeOutbound closes p's outbound link: its successor sees its inbound
// link go.
func (s *Sim) closeOutbound(p *Proc) {
	if p.succ == 0 {
		return
	}
	if q := s.Procs[p.succ]; q != nil && q.pred == p.ID && q.predGen == p.succGen {
		if s.blocked(p.ID, q.ID) {
			// A cut drops the close too: the successor finds the link
			// dead only by its silence (PredSilenceTicks), as over TCP.
			return
		}
		from := p.ID
		q.pred, q.predGen = 0, 0
		s.deliverIn(q, 1, fmt.Sprintf("pred-down %d", from), func(q *Proc) { q.Node.PredecessorDown(from) })
	}
}

func (s *Sim) connect(p *Proc, target int64) {
	// Replacing the outbound link closes the old one.
	s.closeOutbound(p)
	p.succ, p.succGen = 0, 0
	if target == 0 {
		return
	}
	q := s.Procs[target]
	s.linkGen++
	gen := s.linkGen
	if q == nil || q.State == Down || s.apart(p.ID, target) {
		s.deliverIn(p, 1, fmt.Sprintf("dial %d refused", target), func(p *Proc) { p.Node.SuccessorDown(target) })
		return
	}
	p.dialGen = gen
	if s.blocked(p.ID, target) || s.blocked(target, p.ID) {
		s.deliverIn(p, dialTimeoutTicks, fmt.Sprintf("dial %d timed out", target), func(p *Proc) {
			if p.dialGen == gen { // not abandoned for a newer dial
				p.Node.SuccessorDown(target)
			}
		})
		return
	}
	p.succ, p.succGen = target, gen
	// The peer accepts: its old inbound link is closed.
	if q.pred != p.ID {
		s.replacePred(q)
	}
	q.pred, q.predGen = p.ID, gen
	from := p.ID
	s.deliverIn(p, 1, fmt.Sprintf("succ-up %d", target), func(p *Proc) {
		if p.succGen == gen {
			p.Node.SuccessorUp(target)
		}
	})
	s.deliverIn(q, 1, fmt.Sprintf("pred-up %d", from), func(q *Proc) {
		if q.predGen == gen {
			q.Node.PredecessorUp(from)
		}
	})
}

// dropPred closes p's inbound link; unlink: with UNLINK first (its peer
// learns it was refused, not that p died).
func (s *Sim) dropPred(p *Proc, unlink bool) {
	o := s.Procs[p.pred]
	gen := p.predGen
	p.pred, p.predGen = 0, 0
	if o != nil && o.succGen == gen {
		target := p.ID
		s.deliverIn(o, 1, fmt.Sprintf("succ-down %d (dropped, unlink=%v)", target, unlink), func(o *Proc) {
			if o.succGen == gen {
				o.succ, o.succGen = 0, 0
				if unlink {
					o.Node.SuccessorReplaced(target)
				} else {
					o.Node.SuccessorDown(target)
				}
			}
		})
	}
}

func (s *Sim) sendMsg(p *Proc, m ring.Msg) {
	desc := m.String()
	switch m.Via {
	case ring.ViaUDP:
		q := s.Procs[m.To]
		if q == nil || s.blocked(p.ID, m.To) || s.rng.Float64() < s.Loss || s.lost(p.ID, m.To) {
			s.tracef("lost %s", desc)
			return
		}
		copies := 1
		if s.rng.Float64() < s.Dup {
			copies = 2
		}
		for range copies {
			delay := int64(1)
			if s.MaxDelay > 0 {
				delay += s.rng.Int64N(s.MaxDelay + 1)
			}
			s.datagram(q, delay, desc, func(q *Proc) { q.Node.Step(m) })
		}
	case ring.ViaSucc:
		q := s.Procs[p.succ]
		gen := p.succGen
		if q == nil || gen == 0 || s.blocked(p.ID, q.ID) {
			return
		}
		m.Via = ring.ViaPred // as the receiver sees it
		s.deliverIn(q, s.tcpDelay(p.ID, q.ID), desc, func(q *Proc) {
			if q.predGen == gen {
				q.Node.Step(m)
			}
		})
	case ring.ViaPred:
		q := s.Procs[p.pred]
		gen := p.predGen
		if q == nil || gen == 0 || s.blocked(p.ID, q.ID) {
			return
		}
		m.Via = ring.ViaSucc
		s.deliverIn(q, s.tcpDelay(p.ID, q.ID), desc, func(q *Proc) {
			if q.succGen == gen {
				q.Node.Step(m)
			}
		})
	}
}

// Inject delivers m to node to as a hostile peer holding the cluster key
// would: m.From, m.To and m.Epoch are whatever it forged. Via ViaUDP it is
// a datagram (from any address: UDP sources are not checked). Via ViaPred
// or ViaSucc it is a frame on to's inbound or outbound ring link, which the
// transport lets through only in the name of the node at the other end of
// that link (the one its HELLO authenticated): otherwise it is dropped
// here, as the transport would.
func (s *Sim) Inject(to int64, m ring.Msg) {
	q := s.Procs[to]
	if q == nil {
		return
	}
	switch {
	case m.Via == ring.ViaPred && (q.pred == 0 || m.From != q.pred),
		m.Via == ring.ViaSucc && (q.succ == 0 || m.From != q.succ):
		s.tracef("inject %d: %s dropped by the transport (not the link's peer)", to, m)
		return
	}
	s.tracef("inject %d: %s", to, m)
	s.datagram(q, 1, "forged "+m.String(), func(q *Proc) { q.Node.Step(m) })
}

// DialAs opens a link to node to in the name of node as, as a hostile peer
// holding the cluster key can (its HELLO authenticates): to's inbound link
// is replaced (its old peer is told with UNLINK), and frames the peer
// injects on it (Inject with ViaPred, From as) pass the transport. What to
// sends back on it reaches nobody.
func (s *Sim) DialAs(to, as int64) {
	q := s.Procs[to]
	if q == nil || q.State == Down || as == 0 {
		return
	}
	s.tracef("dial %d as %d", to, as)
	s.replacePred(q)
	s.linkGen++
	gen := s.linkGen
	q.pred, q.predGen = as, gen
	s.deliverIn(q, 1, fmt.Sprintf("pred-up %d (hostile)", as), func(q *Proc) {
		if q.predGen == gen {
			q.Node.PredecessorUp(as)
		}
	})
}

// replacePred closes q's inbound link, as a node does when it accepts
// another predecessor: the old peer is told (UNLINK: SuccessorReplaced),
// and q sees the link go.
func (s *Sim) replacePred(q *Proc) {
	if q.pred == 0 {
		return
	}
	to := q.ID
	if o := s.Procs[q.pred]; o != nil && o.succ == to && o.succGen == q.predGen {
		ogen := o.succGen
		s.deliverIn(o, 1, fmt.Sprintf("succ-replaced %d", to), func(o *Proc) {
			if o.succGen == ogen {
				o.succ, o.succGen = 0, 0
				o.Node.SuccessorReplaced(to)
			}
		})
	}
	old := q.pred
	s.deliverIn(q, 1, fmt.Sprintf("pred-down %d", old), func(q *Proc) { q.Node.PredecessorDown(old) })
}

// Live returns the running node ids, ascending.
func (s *Sim) Live() []int64 {
	var ids []int64
	for _, id := range s.IDs() {
		if s.Procs[id].State == Running {
			ids = append(ids, id)
		}
	}
	return ids
}

// Healthy reports whether the ring is whole: the store's ring is one cycle
// through exactly the running nodes, every running node links to its
// successor in the store, there is one coordinator (the store's) and every
// running node knows it.
func (s *Sim) Healthy() error {
	live := s.Live()
	if len(live) == 0 {
		return nil
	}
	order, problems := ring.Order(s.Store.Topo)
	if len(problems) > 0 {
		return fmt.Errorf("store ring broken: %s", strings.Join(problems, "; "))
	}
	sorted := slices.Clone(order)
	slices.Sort(sorted)
	if !slices.Equal(sorted, live) {
		return fmt.Errorf("store ring %v, running nodes %v", order, live)
	}
	coords := 0
	for _, id := range live {
		n := s.Procs[id].Node
		if n.Phase() != ring.PhaseInRing {
			return fmt.Errorf("node %d is %s", id, n.Phase())
		}
		succ, up := n.Successor()
		if succ != s.Store.Topo[id] || !up {
			return fmt.Errorf("node %d links to %d (up=%v), store says %d", id, succ, up, s.Store.Topo[id])
		}
		if c, e := n.Coordinator(); c != s.Store.Coord || e != s.Store.Epoch {
			return fmt.Errorf("node %d believes coordinator %d epoch %d, store has %d epoch %d", id, c, e, s.Store.Coord, s.Store.Epoch)
		}
		if n.IsCoordinator() {
			coords++
		}
	}
	if coords != 1 || s.Procs[s.Store.Coord] == nil || s.Procs[s.Store.Coord].State != Running {
		return fmt.Errorf("%d nodes act as coordinator; store names %d", coords, s.Store.Coord)
	}
	return nil
}

// Holders lists the running nodes that hold a token of the newest
// generation the store has made.
func (s *Sim) Holders() []int64 {
	var out []int64
	for _, id := range s.Live() {
		if t, ok := s.Procs[id].Node.HeldToken(); ok && t.Gen == s.Store.Gen {
			out = append(out, id)
		}
	}
	return out
}

// CommitsSince counts committed critical sections per node after tick.
func (s *Sim) CommitsSince(tick int64) map[int64]int {
	out := map[int64]int{}
	for _, c := range s.Store.Commits {
		if c.Tick > tick {
			out[c.Node]++
		}
	}
	return out
}
