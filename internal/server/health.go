package server

import (
	"context"
	"time"

	"github.com/ringchat/ringchat/internal/chat"
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

// watchHealth probes the store and reads the node's phase every
// cfg.Every until ctx ends, and tells the chat service the node's health
// (it tells its clients on a change). The wiring goes one way: the
// server reads the node and tells the chat service.
func (s *Server) watchHealth(ctx context.Context, cfg HealthConfig, st store.Store) {
	cfg = cfg.withDefaults()
	w := ringWatch{grace: cfg.OutGrace}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	var nodesAt time.Time
	var out, failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, cfg.ProbeTimeout)
		perr := st.Ping(pctx)
		if perr == nil && time.Since(nodesAt) >= cfg.NodesEvery {
			if rows, err := st.Nodes(pctx); err == nil {
				s.chat.SetNodes(nodeAddrs(rows))
				nodesAt = time.Now()
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		out, failing = s.nodeHealth(ctx, &w, cfg, failing)
		h := chat.Health{StoreDown: perr != nil || failing, OutOfRing: out}
		s.chat.SetHealth(h)
	}
}

// nodeHealth reads the node's phase into w and reports whether the node
// is out of the ring, and whether most of its recent critical sections
// failed (a store that answers a ping but not its visits: clients move
// as from one it cannot reach); a node too busy to answer within a tick
// keeps its last verdicts (wasFailing).
func (s *Server) nodeHealth(ctx context.Context, w *ringWatch, cfg HealthConfig, wasFailing bool) (out, failing bool) {
	sctx, cancel := context.WithTimeout(ctx, cfg.Every)
	defer cancel()
	st, ok := s.node.Status(sctx)
	if !ok {
		return !w.outSince.IsZero() && time.Since(w.outSince) >= w.grace, wasFailing
	}
	return w.observe(st.Phase, st.Joins, time.Now()), st.VisitsFailing
}
