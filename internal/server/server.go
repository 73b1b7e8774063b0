// Package server assembles one ringnode: its ring transport, the node
// runtime, the chat service on the client port and, optionally, the
// metrics listener. cmd/ringnode parses flags and signals over it; tests
// run whole rings of servers in one process (see the cluster tests).
//
// Wiring runs one way, chat -> queue -> node, and is complete when each
// piece is built: the chat service builds its message queue
// (internal/queue) over its sessions; the node is built next, with the
// queue's Visit as its critical section (run on the node's visit
// goroutine) and the queue's Wants as its signal of new work (the queue
// asks for the token there). The node holds the store's Control part only;
// the presence of a node it splices out is cleared here, in the Queue
// part.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/metrics"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
	"github.com/ringchat/ringchat/internal/transport"
	"github.com/ringchat/ringchat/internal/wire"
)

// Config is one ringnode's assembly.
type Config struct {
	// Store is the shared store, migrated; the server does not close it.
	Store store.Store
	// Table is the node table as the store has it; Node.Ring.ID must be
	// in it.
	Table []store.NodeRow
	// Transport, if set, carries ring frames (an in-memory network in
	// tests); otherwise the server listens on TCP at ListenAddr, framing
	// with Codec.
	Transport  transport.Transport
	Codec      *wire.Codec
	ListenAddr string
	// Node configures the ring runtime (from node.DefaultConfig); its
	// Store, Transport, Addresses, Log, observers, Wants, ClearPresence
	// and Joined are set here, and the queue's Visit is appended to its
	// Sections.
	Node node.Config
	// Chat configures the client port (from chat.DefaultConfig); its
	// Store, Log, DeliveryLatency and Joined are set here.
	Chat chat.Config
	// MetricsAddr, if set, serves metrics and health (and pprof, with
	// Pprof) there.
	MetricsAddr string
	Pprof       bool
	// Health tunes how the chat service learns that the node cannot reach
	// the store or is out of the ring (zero: DefaultHealthConfig).
	Health HealthConfig
	// Log receives every part's lines; the server adds the node's id.
	Log zerolog.Logger
}

// Server is one assembled ringnode.
type Server struct {
	log    zerolog.Logger
	st     store.Store
	health HealthConfig
	tr     transport.Transport
	keys   *token.Keys // the node's store secrets, for the transport's HELLO proofs
	node   *node.Node
	chat   *chat.Server
	mx     *metrics.Metrics
	mln    net.Listener
}

// New assembles a server: the ring transport listens, the client port
// (and the metrics listener) too, so that a port in use fails here,
// before the node joins the ring in Run. ctx bounds the listening; the
// transport outlives it (a node still talks while it leaves the ring).
func New(ctx context.Context, cfg Config) (*Server, error) {
	id := cfg.Node.Ring.ID
	s := &Server{log: cfg.Log.With().Int64("node", id).Logger(), st: cfg.Store, health: cfg.Health, keys: &token.Keys{}}
	if !slices.ContainsFunc(cfg.Table, func(r store.NodeRow) bool { return r.ID == id }) {
		if cfg.Transport != nil {
			cfg.Transport.Close() // the server's to close, as Run would
		}
		return nil, fmt.Errorf("server: node %d is not in the node table", id)
	}
	addrs := node.NewAddresses(cfg.Table)
	tr, err := s.listen(ctx, cfg, addrs)
	if err != nil {
		return nil, err
	}
	s.tr = tr
	if err := s.build(ctx, cfg, addrs); err != nil {
		s.tr.Close()
		if s.mln != nil {
			s.mln.Close()
		}
		return nil, fmt.Errorf("node %d: %w", id, err)
	}
	return s, nil
}

// build assembles the server over its transport, then opens the metrics
// listener and the client port last, before the node joins: a port in use
// fails the start.
func (s *Server) build(ctx context.Context, cfg Config, addrs *node.Addresses) error {
	if err := s.assemble(cfg, addrs); err != nil {
		return err
	}
	if s.mx != nil {
		if err := s.listenMetrics(cfg.MetricsAddr); err != nil {
			return err
		}
	}
	return s.chat.Listen(ctx)
}

// listen returns cfg.Transport if set, and otherwise a TCP transport
// listening on cfg.ListenAddr.
func (s *Server) listen(ctx context.Context, cfg Config, addrs *node.Addresses) (transport.Transport, error) {
	if cfg.Transport != nil {
		return cfg.Transport, nil
	}
	tcfg := transport.DefaultConfig()
	tcfg.ID, tcfg.Codec, tcfg.Resolve, tcfg.Log, tcfg.Addr = cfg.Node.Ring.ID, cfg.Codec, addrs.Resolve, s.log, cfg.ListenAddr
	tcfg.Prover = s.keys // the node publishes its secrets into them (assemble)
	tr, err := transport.Listen(context.WithoutCancel(ctx), tcfg)
	if err != nil {
		return nil, fmt.Errorf("node %d: listen on %s: %w", cfg.Node.Ring.ID, tcfg.Addr, err)
	}
	return tr, nil
}

// assemble builds the chat service (and with it its queue), then the node
// over the transport: the queue's Visit is the node's critical section,
// and the node reads the queue's Wants to bring the token; with a metrics
// address, the metrics observe both.
func (s *Server) assemble(cfg Config, addrs *node.Addresses) (err error) {
	ncfg := cfg.Node
	ncfg.Store, ncfg.Transport, ncfg.Addresses, ncfg.Log, ncfg.Keys = cfg.Store, s.tr, addrs, cfg.Log, s.keys
	var delivery chat.Observer
	if cfg.MetricsAddr != "" {
		s.mx = metrics.New(cfg.Node.Ring.ID)
		s.mx.Pprof = cfg.Pprof
		ncfg.RotationObserver, ncfg.HopObserver, delivery = s.mx.Rotation, s.mx.Hop, s.mx.Delivery
	}
	// The node signals each (re)join, the chat service's presence check
	// restores what the coordinator cleared: a channel, so that no chat
	// code runs on the node's goroutine.
	joined := make(chan struct{}, 1)
	ncfg.Joined = joined
	ccfg := cfg.Chat
	ccfg.Store, ccfg.Log, ccfg.DeliveryLatency, ccfg.Joined = cfg.Store, s.log, delivery, joined
	if s.chat, err = chat.New(ccfg); err != nil {
		return err
	}
	s.chat.SetNodes(nodeAddrs(cfg.Table))
	q := s.chat.Queue()
	ncfg.Sections = append(ncfg.Sections, q.Visit)
	ncfg.Wants = q.Wants()
	ncfg.ClearPresence = s.clearNodePresence
	s.node, err = node.New(ncfg)
	return err
}

// clearNodePresence removes the presence rows of a node spliced out of
// the ring (node.Config.ClearPresence).
func (s *Server) clearNodePresence(ctx context.Context, id int64) error {
	return s.st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.ClearNodePresence(id)
		return err
	})
}

// listenMetrics opens the metrics listener at addr and gives the metrics
// their sources: the node's status, the chat service's counters and the
// transport's drops (if it counts them).
func (s *Server) listenMetrics(addr string) (err error) {
	if s.mln, err = metrics.Listen(addr); err != nil {
		return err
	}
	src := metrics.Sources{Node: s.node.Status, Chat: s.chat.Stats}
	if d, ok := s.tr.(interface{ Drops() map[string]uint64 }); ok {
		src.Drops = d.Drops
	}
	s.mx.SetSources(src)
	return nil
}

// Run runs the node and its client port until ctx ends. The chat service
// stops first (it stores what its clients sent while the token still
// visits), then the node leaves the ring; the metrics are served until
// the node has left. It closes the transport.
func (s *Server) Run(ctx context.Context) error {
	if s.mln != nil {
		mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := s.mx.Serve(mctx, s.mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Warn().Err(err).Msg("metrics listener stopped")
			}
		}()
		defer func() { stop(); <-served }()
		s.log.Info().Str("addr", s.mln.Addr().String()).Bool("pprof", s.mx.Pprof).Msg("metrics and health served")
	}
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNode()
	chatCtx, stopChat := context.WithCancel(ctx)
	defer stopChat()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchHealth(chatCtx, s.health, s.st)
	}()
	defer func() { stopChat(); <-watched }()
	chatDone := make(chan error, 1)
	go func() {
		chatDone <- s.chat.Run(chatCtx)
		stopNode()
	}()
	err := s.node.Run(nodeCtx)
	stopChat()
	if cerr := <-chatDone; err == nil && cerr != nil {
		err = fmt.Errorf("chat: %w", cerr)
	}
	return err
}

// Node is the server's ring runtime.
func (s *Server) Node() *node.Node { return s.node }

// Chat is the server's chat service.
func (s *Server) Chat() *chat.Server { return s.chat }

// ClientAddr is the address the client port listens on.
func (s *Server) ClientAddr() net.Addr { return s.chat.Addr() }

// CoordAddr is the address the ring transport listens on ("" for one
// that does not listen, as in an in-memory network).
func (s *Server) CoordAddr() string {
	if a, ok := s.tr.(interface{ Addr() net.Addr }); ok {
		return a.Addr().String()
	}
	return ""
}
