package transport

import (
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/wire"
)

// memTransport is one node's Transport on a MemNetwork. Its link state is
// guarded by the network's lock; its only goroutine is the event pump.
type memTransport struct {
	net   *MemNetwork
	id    int64
	log   zerolog.Logger
	drops *dropLog
	codec *wire.Codec // nil: frames pass as values
	q     *eventQueue
	done  chan struct{}
	wg    sync.WaitGroup

	closeOnce, outOnce sync.Once

	// Guarded by net.mu.
	closed     bool
	succ, pred *memLink
}

var _ Transport = (*memTransport)(nil)

// emit queues ev unless t is closed. Callers hold net.mu, which orders the
// events of all nodes.
func (t *memTransport) emit(ev Event) {
	if t.closed {
		return
	}
	if ev.Kind != EventFrame {
		t.log.Debug().Stringer("event", ev.Kind).Int64("peer", ev.Peer).AnErr("cause", ev.Err).Msg("link event")
	}
	t.q.push(ev)
}

// Events implements Transport.
func (t *memTransport) Events() <-chan Event { return t.q.out }

// Send implements Transport. A datagram to a node that never joined fails
// with ErrUnknownNode (as an unresolvable id does on Net); one to a closed,
// isolated or partitioned node is dropped silently.
func (t *memTransport) Send(to int64, f wire.Frame) error {
	f.Dst = to // as on Net: every datagram names its destination
	m := t.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	dst := m.nodes[to]
	if dst == nil {
		return fmt.Errorf("transport: send to %d: %w", to, ErrUnknownNode)
	}
	msg, err := m.encode(t, f)
	if err != nil {
		return err
	}
	switch {
	case dst.closed || !m.reachable(t.id, to):
		m.stats.Dropped++
		return nil
	case m.loss > 0 && m.rng.Float64() < m.loss:
		m.stats.Dropped++
		m.stats.Lost++
		return nil
	}
	m.deliver(dst, ViaDatagram, msg, 0)
	if m.dup > 0 && m.rng.Float64() < m.dup {
		m.stats.Duplicated++
		m.deliver(dst, ViaDatagram, msg, 0)
	}
	return nil
}

// ConnectSuccessor implements Transport. The dial completes (or fails)
// before it returns.
func (t *memTransport) ConnectSuccessor(id int64) {
	m := t.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.closed {
		return
	}
	if old := t.succ; old != nil {
		m.unlink(old, nil, ErrPeerClosed)
	}
	dst := m.nodes[id]
	var err error
	switch {
	case dst == nil:
		err = ErrUnknownNode
	case dst.closed || !m.reachable(t.id, id):
		err = ErrUnreachable
	}
	if err != nil {
		t.emit(Event{Kind: EventSuccessorDown, Peer: id, Err: fmt.Errorf("transport: dial successor %d: %w", id, err)})
		return
	}
	m.gen++
	l := &memLink{gen: m.gen, from: t, to: dst}
	t.succ = l
	t.emit(Event{Kind: EventSuccessorUp, Peer: id})
	if old := dst.pred; old != nil {
		m.unlink(old, ErrReplaced, ErrReplaced) // the TCP transport's UNLINK frame
	}
	dst.pred = l
	dst.emit(Event{Kind: EventPredecessorUp, Peer: t.id})
}

// DisconnectSuccessor implements Transport.
func (t *memTransport) DisconnectSuccessor() {
	m := t.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := t.succ; l != nil && !t.closed {
		m.unlink(l, nil, ErrPeerClosed)
	}
}

// DropPredecessor implements Transport.
func (t *memTransport) DropPredecessor() {
	m := t.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := t.pred; l != nil && !t.closed {
		m.unlink(l, ErrPeerClosed, nil)
	}
}

// RefusePredecessor implements Transport.
func (t *memTransport) RefusePredecessor() {
	m := t.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := t.pred; l != nil && !t.closed {
		m.unlink(l, ErrReplaced, nil) // the TCP transport's UNLINK frame
	}
}

// SendSuccessor implements Transport.
func (t *memTransport) SendSuccessor(f wire.Frame) error {
	return t.sendLink(f, "successor", func() (*memLink, *memTransport) {
		if t.succ == nil {
			return nil, nil
		}
		return t.succ, t.succ.to
	}, ViaPredecessor)
}

// SendPredecessor implements Transport.
func (t *memTransport) SendPredecessor(f wire.Frame) error {
	return t.sendLink(f, "predecessor", func() (*memLink, *memTransport) {
		if t.pred == nil {
			return nil, nil
		}
		return t.pred, t.pred.from
	}, ViaSuccessor)
}

// sendLink delivers f over the link that pick returns, arriving via via at
// the other end.
func (t *memTransport) sendLink(f wire.Frame, name string, pick func() (*memLink, *memTransport), via Via) error {
	m := t.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	l, dst := pick()
	if l == nil {
		return fmt.Errorf("transport: send %s to %s: %w", f.Type, name, ErrNoLink)
	}
	msg, err := m.encode(t, f)
	if err != nil {
		return err
	}
	m.deliver(dst, via, msg, t.id)
	return nil
}

// Close implements Transport: the peers of its links see them go down with
// ErrPeerClosed.
func (t *memTransport) Close() error {
	t.closeOnce.Do(func() {
		m := t.net
		m.mu.Lock()
		t.closed = true
		for _, l := range []*memLink{t.succ, t.pred} {
			if l != nil {
				m.unlink(l, ErrPeerClosed, ErrPeerClosed)
			}
		}
		m.mu.Unlock()
		close(t.done)
	})
	t.wg.Wait()
	t.outOnce.Do(func() { close(t.q.out) })
	return nil
}
