package transport

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/tcpopt"
	"github.com/ringchat/ringchat/internal/wire"
)

// Config configures a Net. Start from DefaultConfig.
type Config struct {
	// ID is this node's id, the Src of the HELLO frames it sends.
	ID int64
	// Addr is the "host:port" to listen on, the same port for TCP and UDP.
	// Port 0 picks a free TCP port and binds UDP to the same number.
	Addr string
	// Codec signs and checks every frame; share it with nothing else that
	// decodes, so that this node has one replay cache.
	Codec *wire.Codec
	// Resolve maps node ids to addresses, at every dial and datagram.
	Resolve Resolver
	// Log receives the transport's logs. The caller adds the node id.
	Log zerolog.Logger
	// DialTimeout bounds a dial to the successor.
	DialTimeout time.Duration
	// WriteTimeout bounds each write on a link; a link that cannot take a
	// frame for that long is torn down.
	WriteTimeout time.Duration
	// HelloTimeout bounds the wait for an inbound connection's HELLO.
	HelloTimeout time.Duration
	// MaxFrame bounds a line or datagram, in bytes; 0 means Codec.MaxSize().
	MaxFrame int
	// MaxHandshakes bounds the inbound connections waiting for their HELLO.
	// A connection beyond it closes the oldest one waiting: a new dialer
	// always gets its HELLO's worth of time, so connections that never
	// speak cannot shut a real predecessor out.
	MaxHandshakes int
	// MaxHandshakesPerSource bounds the connections waiting for their
	// HELLO from one source address; beyond it the oldest from that
	// address is closed.
	MaxHandshakesPerSource int
	// EventBuffer is the capacity of the Events channel.
	EventBuffer int
	// Prover, if set, proves the HELLOs this node sends, and a HELLO
	// received while a predecessor link is up replaces that link only if
	// it proves itself; one that does not is refused (UNLINK "unproven",
	// counted as unproven_hello) and the link kept. Without a Prover any
	// authenticated HELLO replaces the link.
	Prover HelloProver
}

// DefaultConfig returns the default settings; set ID, Addr, Codec and
// Resolve.
func DefaultConfig() Config {
	return Config{
		Log:           zerolog.Nop(),          // silent unless the caller wants logs
		DialTimeout:   2 * time.Second,        // a peer on the LAN answers in ms; longer means dead or partitioned
		WriteTimeout:  2 * time.Second,        // a successor that cannot take a small frame this long is stalled: failed
		HelloTimeout:  500 * time.Millisecond, // an honest dialer writes HELLO with its first packet; bounds what a silent connection costs
		MaxFrame:      0,                      // the codec's limit: a longer frame would be refused anyway
		MaxHandshakes: 64,                     // a ring has one predecessor; bounds unauthenticated connections held open
		// A predecessor redials about once per failure; a few at once from
		// one address are plenty, and one address cannot fill the table.
		MaxHandshakesPerSource: 8,
		EventBuffer:            4096, // absorbs bursts of frames while the node's loop is busy (a store write)
	}
}

// Validate reports the first invalid setting, wrapping ErrBadConfig.
func (c Config) Validate() error {
	var msg string
	switch {
	case c.ID < 1:
		msg = fmt.Sprintf("node id %d: want >= 1", c.ID)
	case c.Addr == "":
		msg = "no listen address"
	case c.Codec == nil:
		msg = "no codec"
	case c.Resolve == nil:
		msg = "no resolver"
	case c.DialTimeout <= 0 || c.WriteTimeout <= 0 || c.HelloTimeout <= 0:
		msg = "timeouts must be positive"
	case c.MaxFrame < 0 || c.MaxFrame > c.Codec.MaxSize():
		msg = fmt.Sprintf("max frame %d: want 0 to the codec's %d", c.MaxFrame, c.Codec.MaxSize())
	case c.MaxHandshakes < 1:
		msg = fmt.Sprintf("max handshakes %d: want >= 1", c.MaxHandshakes)
	case c.MaxHandshakesPerSource < 1 || c.MaxHandshakesPerSource > c.MaxHandshakes:
		msg = fmt.Sprintf("max handshakes per source %d: want 1 to max handshakes %d", c.MaxHandshakesPerSource, c.MaxHandshakes)
	case c.EventBuffer < 1:
		msg = fmt.Sprintf("event buffer %d: want >= 1", c.EventBuffer)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrBadConfig, msg)
}

// Net is the TCP/UDP Transport. Make one with Listen.
type Net struct {
	cfg   Config
	log   zerolog.Logger
	drops *dropLog
	ln    *net.TCPListener
	pc    *net.UDPConn
	q     *eventQueue

	ctx    context.Context // parent of every dial; cancelled by shutdown
	cancel context.CancelFunc
	stop   func() bool // unties shutdown from Listen's ctx; set before Listen returns
	done   chan struct{}
	wg     sync.WaitGroup

	shutOnce, outOnce sync.Once
	closeErr          error

	mu     sync.Mutex
	closed bool
	gen    uint64   // last link generation handed out
	succ   *tcpLink // outbound link, possibly still dialing
	pred   *tcpLink // inbound link
	// conns holds every open connection, whatever its state, so that
	// shutdown closes them all; pending lists those awaiting their HELLO,
	// oldest first.
	conns   map[net.Conn]struct{}
	pending []*inbound
}

// inbound is an accepted connection waiting for its HELLO.
type inbound struct {
	conn    net.Conn
	source  string // the remote IP address
	evicted bool   // closed to make room for a newer one; guarded by Net.mu
}

var _ Transport = (*Net)(nil)

// Listen binds cfg.Addr for TCP and UDP and starts serving. When ctx is
// done the transport shuts down as if closed; call Close anyway, to wait for
// its goroutines.
func Listen(ctx context.Context, cfg Config) (*Net, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("transport: listen: %w", err)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = cfg.Codec.MaxSize()
	}
	ln, pc, err := listenBoth(cfg.Addr)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.With().Str("component", "transport").Logger()
	n := &Net{
		cfg:   cfg,
		log:   log,
		drops: newDropLog(log),
		ln:    ln,
		pc:    pc,
		q:     newEventQueue(cfg.EventBuffer),
		done:  make(chan struct{}),
		conns: make(map[net.Conn]struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.stop = context.AfterFunc(ctx, n.shutdown)
	n.goFunc(func() { n.q.run(n.done) })
	n.goFunc(n.acceptLoop)
	n.goFunc(n.readUDP)
	log.Debug().Str("addr", n.Addr().String()).Msg("listening")
	return n, nil
}

// listenBoth listens on addr for TCP, then binds UDP to the same port,
// trying other ports a few times if the port was 0 and its number is taken
// for UDP.
func listenBoth(addr string) (*net.TCPListener, *net.UDPConn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: listen address %q: %w", ErrBadConfig, addr, err)
	}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("transport: listen tcp %s: %w", addr, err)
		}
		ln := l.(*net.TCPListener)
		ta := ln.Addr().(*net.TCPAddr)
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: ta.IP, Port: ta.Port, Zone: ta.Zone})
		if err == nil {
			return ln, pc, nil
		}
		_ = ln.Close()
		if port != "0" || attempt == 10 {
			return nil, nil, fmt.Errorf("transport: listen udp on port %d: %w", ta.Port, err)
		}
	}
}

// Addr returns the bound address (TCP; UDP uses the same port).
func (n *Net) Addr() net.Addr { return n.ln.Addr() }

// Events returns the events channel; it is closed when Close returns.
func (n *Net) Events() <-chan Event { return n.q.out }

// Drops returns the number of inputs dropped, by reason (the Reason
// constants). Frames refused by the codec are also in the codec's Stats.
func (n *Net) Drops() map[string]uint64 { return n.drops.counts() }

// goFunc runs f in a goroutine that Close waits for. Callers hold n.mu and
// have checked !n.closed (or are Listen), so that no Add races with Wait.
func (n *Net) goFunc(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// shutdown stops everything without waiting. Idempotent.
func (n *Net) shutdown() {
	n.shutOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		conns := slices.Collect(maps.Keys(n.conns))
		n.succ, n.pred = nil, nil
		n.mu.Unlock()
		close(n.done)
		n.cancel() // aborts dials in progress
		n.closeErr = errors.Join(n.ln.Close(), n.pc.Close())
		for _, c := range conns {
			_ = c.Close()
		}
	})
}

// Close implements Transport.
func (n *Net) Close() error {
	n.stop()
	n.shutdown()
	n.wg.Wait()
	n.outOnce.Do(func() { close(n.q.out) })
	if n.closeErr != nil {
		return fmt.Errorf("transport: close: %w", n.closeErr)
	}
	return nil
}

func (n *Net) isClosed() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Send implements Transport: one datagram, addressed through Resolve. The
// frame names to as its destination (Frame.Dst), whatever f.Dst said.
func (n *Net) Send(to int64, f wire.Frame) error {
	f.Dst = to
	if n.isClosed() {
		return ErrClosed
	}
	addr, ok := n.cfg.Resolve(to)
	if !ok {
		return fmt.Errorf("transport: send to %d: %w", to, ErrUnknownNode)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fmt.Errorf("transport: send to %d at %s: %w", to, addr, err)
	}
	b, err := n.cfg.Codec.Encode(f)
	if err != nil {
		return fmt.Errorf("transport: send %s to %d: %w", f.Type, to, err)
	}
	if _, err := n.pc.WriteToUDP(b, ua); err != nil {
		return fmt.Errorf("transport: send to %d at %s: %w", to, addr, err)
	}
	return nil
}

// readUDP turns datagrams into events until the socket is closed.
func (n *Net) readUDP() {
	buf := make([]byte, n.cfg.MaxFrame+1) // one more, to see oversize ones
	for n.q.waitRoom(n.done) {
		k, from, err := n.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if n.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			n.drops.drop(ReasonReadError, "udp", "", err)
			continue
		}
		if k > n.cfg.MaxFrame {
			n.drops.drop(ReasonTooLarge, "udp", from.String(),
				fmt.Errorf("%w: datagram over %d bytes", wire.ErrTooLarge, n.cfg.MaxFrame))
			continue
		}
		f, _, err := n.cfg.Codec.Decode(buf[:k])
		if err != nil {
			n.drops.drop(reasonOf(err), "udp", from.String(), err)
			continue
		}
		if f.Dst != n.cfg.ID {
			n.drops.drop(ReasonMisdirected, "udp", from.String(),
				fmt.Errorf("transport: %s from node %d is meant for node %d", f.Type, f.Src, f.Dst))
			continue
		}
		n.q.push(Event{Kind: EventFrame, Via: ViaDatagram, Frame: f, Peer: f.Src})
	}
}

// acceptLoop accepts inbound connections and hands each to serveInbound.
func (n *Net) acceptLoop() {
	var delay time.Duration // backoff on accept errors, as net/http does
	for {
		conn, err := n.ln.Accept()
		if err != nil {
			if n.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			n.log.Warn().Err(err).Dur("retry_in_ms", delay).Msg("accept failed")
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-n.done:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		tcpopt.Tune(conn)
		n.admit(conn)
	}
}

// admit registers an accepted connection as waiting for its HELLO, closing
// the oldest waiting one from the same address, or the oldest of all, if
// that is needed to make room.
func (n *Net) admit(conn net.Conn) {
	src := remoteHost(conn)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = conn.Close()
		return
	}
	var evict *inbound
	fromSrc := 0
	for _, p := range n.pending {
		if p.source == src {
			if fromSrc == 0 {
				evict = p // the oldest from this address
			}
			fromSrc++
		}
	}
	why := ""
	switch {
	case fromSrc >= n.cfg.MaxHandshakesPerSource:
		why = fmt.Sprintf("%d connections from %s already waiting for their HELLO", fromSrc, src)
	case len(n.pending) >= n.cfg.MaxHandshakes:
		evict = n.pending[0]
		why = fmt.Sprintf("%d connections already waiting for their HELLO", len(n.pending))
	default:
		evict = nil
	}
	if evict != nil {
		evict.evicted = true
		n.unpend(evict)
	}
	in := &inbound{conn: conn, source: src}
	n.pending = append(n.pending, in)
	n.conns[conn] = struct{}{}
	n.goFunc(func() { n.serveInbound(in) })
	n.mu.Unlock()
	if evict != nil {
		n.drops.drop(ReasonTooManyHellos, "inbound", evict.conn.RemoteAddr().String(),
			fmt.Errorf("transport: closed the oldest: %s", why))
		_ = evict.conn.Close()
	}
}

// unpend removes in from the connections waiting for their HELLO. Callers
// hold n.mu.
func (n *Net) unpend(in *inbound) {
	if i := slices.Index(n.pending, in); i >= 0 {
		n.pending = slices.Delete(n.pending, i, i+1)
	}
}

// remoteHost is the IP address of a connection's remote end.
func remoteHost(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
	if err != nil {
		return conn.RemoteAddr().String()
	}
	return host
}

// track registers a dialed connection so that shutdown closes it. It
// returns false, having closed conn, if the transport is closed.
func (n *Net) track(conn net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		_ = conn.Close()
		return false
	}
	n.conns[conn] = struct{}{}
	return true
}

// forget closes conn and unregisters it.
func (n *Net) forget(conn net.Conn) {
	_ = conn.Close()
	n.mu.Lock()
	delete(n.conns, conn)
	n.mu.Unlock()
}

// peerName is how logs name a node.
func peerName(id int64) string { return "node " + strconv.FormatInt(id, 10) }
