package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/tcpopt"
	"github.com/ringchat/ringchat/internal/wire"
)

// tcpLink is one TCP link of a Net: the outbound link to the successor or
// the inbound one from the predecessor. Net.succ and Net.pred point to the
// current ones; a link that is no longer pointed to has been replaced or
// closed, and its events are dropped. gen numbers links for the logs.
type tcpLink struct {
	gen    uint64
	peer   int64
	via    Via                // the Via of the frames it carries
	down   EventKind          // the event reporting its end
	cancel context.CancelFunc // aborts its dial; a no-op for inbound links
	conn   net.Conn           // nil until dialed and HELLO sent; guarded by Net.mu
	wmu    sync.Mutex         // serialises writes
}

// slot returns the field of n that holds the current link of l's kind.
// Callers hold n.mu.
func (n *Net) slot(l *tcpLink) **tcpLink {
	if l.via == ViaSuccessor {
		return &n.succ
	}
	return &n.pred
}

// current reports whether l is still the current link of its kind. Callers
// hold n.mu.
func (n *Net) current(l *tcpLink) bool { return !n.closed && *n.slot(l) == l }

// detach makes l no longer current, reporting err in a Down event; a nil err
// means a deliberate local close. It returns l's connection, for the caller
// to close once n.mu is released. Callers hold n.mu and know l is current.
func (n *Net) detach(l *tcpLink, err error) net.Conn {
	*n.slot(l) = nil
	n.q.push(Event{Kind: l.down, Peer: l.peer, Err: err})
	n.log.Debug().Stringer("event", l.down).Int64("peer", l.peer).Uint64("link", l.gen).AnErr("cause", err).Msg("link down")
	return l.conn
}

// closeLink tears l down if it is still current, reporting err; events of
// a stale link are dropped. It closes l's connection in any case.
func (n *Net) closeLink(l *tcpLink, err error) {
	n.mu.Lock()
	conn := l.conn
	if n.current(l) {
		n.detach(l, err)
	}
	n.mu.Unlock()
	l.cancel()
	if conn != nil {
		_ = conn.Close()
	}
}

// ConnectSuccessor implements Transport.
func (n *Net) ConnectSuccessor(id int64) {
	ctx, cancel := context.WithCancel(n.ctx)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		cancel()
		return
	}
	old, oldConn := n.succ, net.Conn(nil)
	if old != nil {
		oldConn = n.detach(old, nil)
	}
	n.gen++
	l := &tcpLink{gen: n.gen, peer: id, via: ViaSuccessor, down: EventSuccessorDown, cancel: cancel}
	n.succ = l
	n.goFunc(func() { n.runSuccessor(ctx, l) })
	n.mu.Unlock()
	if old != nil {
		old.cancel()
		if oldConn != nil {
			_ = oldConn.Close()
		}
	}
}

// DisconnectSuccessor implements Transport.
func (n *Net) DisconnectSuccessor() { n.dropCurrent(&n.succ, false) }

// DropPredecessor implements Transport.
func (n *Net) DropPredecessor() { n.dropCurrent(&n.pred, false) }

// RefusePredecessor implements Transport.
func (n *Net) RefusePredecessor() { n.dropCurrent(&n.pred, true) }

func (n *Net) dropCurrent(slot **tcpLink, unlink bool) {
	n.mu.Lock()
	l := *slot
	if l == nil || n.closed {
		n.mu.Unlock()
		return
	}
	conn := n.detach(l, nil)
	n.mu.Unlock()
	l.cancel()
	if conn != nil {
		if unlink {
			n.unlinkAndClose(conn, unlinkRefused)
			return
		}
		_ = conn.Close()
	}
}

// unlinkLinger bounds how long an inbound link told UNLINK stays open for
// its peer to read it and close.
const unlinkLinger = 2 * time.Second

// unlinkAndClose tells the peer of an inbound link this node no longer
// takes (why: unlinkReplaced, unlinkRefused) and closes it without a
// reset. Closed at once with frames of the peer's still unread, the socket
// would send a reset instead of its FIN: a reset is not sent again, and on
// a link that lost the UNLINK it was all the peer saw, so it took this
// node for failed (a chaos run: a coordinator losing a fifth of its
// packets, displaced by a forged HELLO, took its healthy successor out of
// the ring). Half-closed after the UNLINK, the link is left to its reader
// (readLink), which drains it until the peer closes or unlinkLinger passes
// and then closes it; TCP delivers the UNLINK however often it must send
// it.
func (n *Net) unlinkAndClose(conn net.Conn, why string) {
	n.writeUnlink(conn, why)
	if tc, ok := conn.(*net.TCPConn); ok && tc.CloseWrite() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(unlinkLinger))
		return
	}
	_ = conn.Close()
}

// writeUnlink tells the peer of an inbound link, before it is closed, that
// this node took (or keeps) another predecessor; why says which
// (unlinkReplaced, unlinkRefused).
func (n *Net) writeUnlink(conn net.Conn, why string) {
	if b, err := n.cfg.Codec.Encode(unlinkFrame(n.cfg.ID, why)); err == nil {
		_ = conn.SetWriteDeadline(time.Now().Add(n.cfg.WriteTimeout))
		_ = wire.WriteLine(conn, b)
	}
}

// SendSuccessor implements Transport.
func (n *Net) SendSuccessor(f wire.Frame) error { return n.sendLink(&n.succ, "successor", f) }

// SendPredecessor implements Transport.
func (n *Net) SendPredecessor(f wire.Frame) error { return n.sendLink(&n.pred, "predecessor", f) }

func (n *Net) sendLink(slot **tcpLink, name string, f wire.Frame) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	l := *slot
	if l == nil || l.conn == nil {
		n.mu.Unlock()
		return fmt.Errorf("transport: send %s to %s: %w", f.Type, name, ErrNoLink)
	}
	conn := l.conn
	n.mu.Unlock()
	b, err := n.cfg.Codec.Encode(f)
	if err != nil {
		return fmt.Errorf("transport: send %s to %s: %w", f.Type, name, err)
	}
	if err := n.writeLine(l, conn, b); err != nil {
		err = fmt.Errorf("transport: send %s to %s %d: %w", f.Type, name, l.peer, err)
		n.closeLink(l, err)
		return err
	}
	return nil
}

func (n *Net) writeLine(l *tcpLink, conn net.Conn, b []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_ = conn.SetWriteDeadline(time.Now().Add(n.cfg.WriteTimeout))
	return wire.WriteLine(conn, b)
}

// runSuccessor dials l's peer, sends HELLO, reports the link up and reads
// frames from it until it ends.
func (n *Net) runSuccessor(ctx context.Context, l *tcpLink) {
	addr, ok := n.cfg.Resolve(l.peer)
	if !ok {
		n.closeLink(l, fmt.Errorf("transport: dial successor %d: %w", l.peer, ErrUnknownNode))
		return
	}
	conn, err := tcpopt.Dialer(n.cfg.DialTimeout).DialContext(ctx, "tcp", addr)
	if err != nil {
		n.closeLink(l, fmt.Errorf("transport: dial successor %d at %s: %w", l.peer, addr, err))
		return
	}
	if !n.track(conn) {
		return
	}
	defer n.forget(conn)
	hello, err := n.cfg.Codec.Encode(helloFrame(n.cfg.ID, l.peer, n.cfg.Prover))
	if err == nil {
		err = n.writeLine(l, conn, hello)
	}
	if err != nil {
		n.closeLink(l, fmt.Errorf("transport: hello to successor %d at %s: %w", l.peer, addr, err))
		return
	}
	n.mu.Lock()
	if !n.current(l) {
		n.mu.Unlock()
		return
	}
	l.conn = conn
	n.q.push(Event{Kind: EventSuccessorUp, Peer: l.peer})
	n.mu.Unlock()
	n.log.Debug().Int64("peer", l.peer).Uint64("link", l.gen).Str("addr", addr).Msg("successor up")
	n.readLink(l, conn, wire.NewLineReader(conn, n.cfg.MaxFrame))
}

// serveInbound waits for an inbound connection's HELLO, makes it the
// predecessor link (replacing the previous one) and reads frames from it.
//
// With a Prover, a HELLO replaces a predecessor link that is up only if
// it proves itself under a store secret: the cluster key alone lets
// anyone write a valid HELLO in the predecessor's name, and each one
// would cut the real link (the token in flight on it lost, the
// predecessor dialling again). The real predecessor, or a new one the
// coordinator named, proves its HELLO; one that cannot yet (it has read
// no secret) is refused and dials again, and gets in once the old link
// has gone (its peer relinked elsewhere, or it fell silent and was
// dropped).
func (n *Net) serveInbound(in *inbound) {
	conn := in.conn
	defer n.forget(conn)
	peer, hp, lr, err := n.handshake(in)
	proven := err == nil && n.cfg.Prover != nil && hp.proves(n.cfg.Prover, peer, n.cfg.ID)
	n.mu.Lock()
	evicted := in.evicted
	n.unpend(in)
	if err != nil || n.closed || evicted {
		n.mu.Unlock()
		return
	}
	if n.pred != nil && n.cfg.Prover != nil && !proven {
		cur := n.pred.peer
		n.mu.Unlock()
		n.drops.drop(ReasonUnprovenHello, "inbound", conn.RemoteAddr().String(),
			fmt.Errorf("transport: HELLO from node %d proves no store secret; the link of node %d is up and kept", peer, cur))
		n.refuseAndDrain(conn, lr)
		return
	}
	var oldConn net.Conn
	if old := n.pred; old != nil {
		oldConn = n.detach(old, ErrReplaced)
	}
	n.gen++
	l := &tcpLink{gen: n.gen, peer: peer, via: ViaPredecessor, down: EventPredecessorDown,
		cancel: func() {}, conn: conn}
	n.pred = l
	n.q.push(Event{Kind: EventPredecessorUp, Peer: peer})
	n.mu.Unlock()
	if oldConn != nil {
		n.unlinkAndClose(oldConn, unlinkReplaced)
	}
	n.log.Debug().Int64("peer", peer).Uint64("link", l.gen).Str("remote", conn.RemoteAddr().String()).Msg("predecessor up")
	n.readLink(l, conn, lr)
}

// refuseAndDrain tells the dialer of a connection refused at its HELLO
// why (UNLINK "unproven"), half-closes it and reads what it sent until it
// closes or unlinkLinger passes: closed with its frames unread, the socket
// would reset, and the dialer might never read the UNLINK.
func (n *Net) refuseAndDrain(conn net.Conn, lr *wire.LineReader) {
	n.unlinkAndClose(conn, unlinkUnproven)
	for {
		if _, err := lr.Next(); err != nil {
			return
		}
	}
}

// handshake reads the first frame of an inbound connection, which must be
// an authenticated HELLO meant for this node, within HelloTimeout. It
// returns the sender, the HELLO's payload and the reader to go on with.
func (n *Net) handshake(in *inbound) (int64, helloPayload, *wire.LineReader, error) {
	conn := in.conn
	remote := conn.RemoteAddr().String()
	_ = conn.SetReadDeadline(time.Now().Add(n.cfg.HelloTimeout))
	lr := wire.NewLineReader(conn, n.cfg.MaxFrame)
	line, err := lr.Next()
	if err != nil && n.isClosed() {
		return 0, helloPayload{}, nil, ErrClosed
	}
	n.mu.Lock()
	evicted := in.evicted
	n.mu.Unlock()
	if err != nil && evicted {
		return 0, helloPayload{}, nil, err // counted as too_many_hellos when it was closed
	}
	if err != nil {
		reason := ReasonNoHello
		if errors.Is(err, wire.ErrTooLarge) {
			reason = ReasonTooLarge
		}
		n.drops.drop(reason, "inbound", remote, err)
		return 0, helloPayload{}, nil, err
	}
	f, _, err := n.cfg.Codec.Decode(line)
	if err != nil {
		n.drops.drop(reasonOf(err), "inbound", remote, err)
		return 0, helloPayload{}, nil, err
	}
	hp, ok := helloOf(f)
	switch {
	case !ok:
		err = fmt.Errorf("transport: first frame from %s is %q, not a valid HELLO", remote, f.Type)
		n.drops.drop(ReasonNotHello, "inbound", remote, err)
		return 0, helloPayload{}, nil, err
	case hp.To != n.cfg.ID:
		err = fmt.Errorf("transport: HELLO from node %d is meant for node %d", f.Src, hp.To)
		n.drops.drop(ReasonMisdirected, "inbound", remote, err)
		return 0, helloPayload{}, nil, err
	}
	_ = conn.SetReadDeadline(time.Time{})
	return f.Src, hp, lr, nil
}

// readLink turns the frames of link l into events until the link ends. Its
// caller closes conn.
// Frames that fail to decode are dropped and the link is kept (the codec
// counts them); an oversize line or a read error ends the link.
func (n *Net) readLink(l *tcpLink, conn net.Conn, lr *wire.LineReader) {
	via := l.via.String()
	for n.q.waitRoom(n.done) {
		line, err := lr.Next()
		if err != nil {
			switch {
			case errors.Is(err, wire.ErrTooLarge):
				n.drops.drop(ReasonTooLarge, via, peerName(l.peer), err)
			case errors.Is(err, io.EOF):
				err = ErrPeerClosed
			}
			n.closeLink(l, fmt.Errorf("transport: %s %d: %w", via, l.peer, err))
			return
		}
		f, _, err := n.cfg.Codec.Decode(line)
		if err != nil {
			n.drops.drop(reasonOf(err), via, peerName(l.peer), err)
			continue
		}
		if f.Type == HelloType {
			continue // handshake traffic, never protocol traffic
		}
		if f.Src != l.peer {
			// The HELLO authenticated the link's peer; a frame in another
			// node's name on it is forged or misrouted.
			n.drops.drop(ReasonWrongSource, via, peerName(l.peer),
				fmt.Errorf("transport: %s in the name of node %d on the link of node %d", f.Type, f.Src, l.peer))
			continue
		}
		if f.Type == UnlinkType && l.via == ViaSuccessor {
			n.closeLink(l, fmt.Errorf("transport: successor %d: %w", l.peer, ErrReplaced))
			return
		}
		n.mu.Lock()
		if n.current(l) {
			n.q.push(Event{Kind: EventFrame, Via: l.via, Frame: f, Peer: f.Src})
		} else {
			// Another connection replaced this one after the frame was
			// read: the ring never sees it (a real sender sends it again
			// on its new link), but it is counted.
			n.drops.quiet(ReasonReplacedLink)
		}
		n.mu.Unlock()
	}
}
