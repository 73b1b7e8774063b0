package server

// runs on: the health watch's goroutine (watchHealth, started by Run): it
// owns ringWatch and the verdicts (healthWatch.run); its prober runs on a
// goroutine of its own and hands each ping's result over a channel.

import (
	"context"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
)

// HealthConfig tunes how the server tells the chat service that the node
// cannot reach the store or has fallen out of the ring (chat.Health): the
// chat service tells its protocol-2 clients at once, so that they move to
// another node, and refuses new logins meanwhile.
type HealthConfig struct {
	// Every is how often the node's status is read and the store probed.
	Every time.Duration
	// ProbeTimeout bounds one probe of the store (a ping): one that takes
	// longer, or fails, marks the store unreachable until one succeeds.
	ProbeTimeout time.Duration
	// OutGrace is how long a node that was in the ring must be out of it
	// before its clients are told: a node spliced out and back in at once
	// (a lost datagram) is no reason to move.
	OutGrace time.Duration
	// NodesEvery is how often the ring's nodes are read from the store
	// for the LOGIN answer (the table can grow at run time).
	NodesEvery time.Duration
}

// DefaultHealthConfig is tuned for clients that move within 3 s.
func DefaultHealthConfig() HealthConfig {
	return HealthConfig{
		Every:        250 * time.Millisecond,  // a cut is told within a probe's time and a tick
		ProbeTimeout: 1500 * time.Millisecond, // far above a ping's time on a loaded server, well below the 5 s a login would wait
		OutGrace:     time.Second,             // well above a splice-and-rejoin (tens of ms)
		NodesEvery:   30 * time.Second,        // nodes are added rarely
	}
}

func (c HealthConfig) withDefaults() HealthConfig {
	d := DefaultHealthConfig()
	if c.Every <= 0 {
		c.Every = d.Every
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = d.ProbeTimeout
	}
	if c.OutGrace <= 0 {
		c.OutGrace = d.OutGrace
	}
	if c.NodesEvery <= 0 {
		c.NodesEvery = d.NodesEvery
	}
	return c
}

// ringWatch decides from the node's phases whether it is out of the ring:
// it was in the ring and has not been for OutGrace. A node that has never
// joined (it is starting) is not out; nor is one leaving (it is stopping,
// and its clients are told SHUTTING_DOWN). Whether it ever joined is the
// node's count (joins), not what the watch happened to see: a node cut
// off within a tick of joining was never seen in the ring, and its clients
// were never told.
type ringWatch struct {
	grace    time.Duration
	joined   bool
	outSince time.Time // zero while in the ring
}

// observe takes the phase at now and the times the node joined, and
// reports whether the node is out.
func (w *ringWatch) observe(p ring.Phase, joins uint64, now time.Time) bool {
	w.joined = w.joined || joins > 0
	switch p {
	case ring.PhaseInRing:
		w.joined, w.outSince = true, time.Time{}
		return false
	case ring.PhaseLeaving, ring.PhaseLeft:
		w.outSince = time.Time{}
		return false
	}
	if !w.joined {
		return false
	}
	if w.outSince.IsZero() {
		w.outSince = now
	}
	return now.Sub(w.outSince) >= w.grace
}

// nodeAddrs is the LOGIN answer's list of the ring's nodes.
func nodeAddrs(rows []store.NodeRow) []protocol.NodeAddr {
	out := make([]protocol.NodeAddr, 0, len(rows))
	for _, r := range rows {
		out = append(out, protocol.NodeAddr{Node: r.ID, Addr: r.ClientAddr()})
	}
	return out
}

// watchHealth tells the chat service the node's health until ctx ends
// (it tells its clients on a change). The wiring goes one way: the
// server reads the node and the store and tells the chat service.
func (s *Server) watchHealth(ctx context.Context, cfg HealthConfig, st store.Store) {
	hw := healthWatch{cfg: cfg.withDefaults(), ping: st.Ping, status: s.node.Status, set: s.chat.SetHealth,
		nodes: func(ctx context.Context) error {
			rows, err := st.Nodes(ctx)
			if err == nil {
				s.chat.SetNodes(nodeAddrs(rows))
			}
			return err
		}}
	hw.run(ctx)
}

// healthWatch reads the node's status every cfg.Every and probes the
// store as often, on a goroutine of its own: a ping over a link that
// loses packets takes hundreds of milliseconds, up to ProbeTimeout, and
// the node's own verdicts (out of the ring, most visits failing) must not
// wait for it. Seen at 20 % loss before they were apart: the node's visits
// had failed for a second before its clients were told, the ping between.
type healthWatch struct {
	cfg    HealthConfig
	ping   func(context.Context) error
	nodes  func(context.Context) error // reads the ring's nodes for the LOGIN answer
	status func(context.Context) (node.Status, bool)
	set    func(chat.Health)
}

// run owns the verdicts: it takes the prober's results as they come and
// the node's status at every tick, and tells set; it returns when ctx
// ends, once the prober has.
func (hw healthWatch) run(ctx context.Context) {
	pings := make(chan bool) // the store is down
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { hw.probe(ctx, pings) })
	w := ringWatch{grace: hw.cfg.OutGrace}
	t := time.NewTicker(hw.cfg.Every)
	defer t.Stop()
	var down, out, failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case down = <-pings:
		case <-t.C:
		}
		out, failing = hw.nodeHealth(ctx, &w, failing)
		if ctx.Err() != nil {
			return
		}
		hw.set(chat.Health{StoreDown: down || failing, OutOfRing: out})
	}
}

// probe pings the store every cfg.Every (a ping that fails, or takes
// longer than ProbeTimeout, says it is down) and sends each result; it
// reads the ring's nodes every NodesEvery while the store answers.
func (hw healthWatch) probe(ctx context.Context, pings chan<- bool) {
	t := time.NewTicker(hw.cfg.Every)
	defer t.Stop()
	var nodesAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, hw.cfg.ProbeTimeout)
		perr := hw.ping(pctx)
		if perr == nil && time.Since(nodesAt) >= hw.cfg.NodesEvery && hw.nodes(pctx) == nil {
			nodesAt = time.Now()
		}
		cancel()
		select {
		case pings <- perr != nil:
		case <-ctx.Done():
			return
		}
	}
}

// nodeHealth reads the node's phase into w and reports whether the node
// is out of the ring, and whether most of its recent critical sections
// failed (a store that answers a ping but not its visits: clients move
// as from one it cannot reach); a node too busy to answer within a tick
// keeps its last verdicts (wasFailing).
func (hw healthWatch) nodeHealth(ctx context.Context, w *ringWatch, wasFailing bool) (out, failing bool) {
	sctx, cancel := context.WithTimeout(ctx, hw.cfg.Every)
	defer cancel()
	st, ok := hw.status(sctx)
	if !ok {
		return !w.outSince.IsZero() && time.Since(w.outSince) >= w.grace, wasFailing
	}
	return w.observe(st.Phase, st.Joins, time.Now()), st.VisitsFailing
}
