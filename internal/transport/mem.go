package transport

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/wire"
)

// MemNetwork is an in-memory network of Transports, for tests and
// simulations, with fault controls: partitions, isolated nodes, datagram
// loss and duplication. Everything happens synchronously inside the calls,
// under one lock, so a given sequence of calls always gives the same events
// in the same order (the loss and duplication draws come from a seeded
// generator). Links are reliable and ordered, like TCP; they go down only
// through the calls and the fault controls. Nothing pushes back on a
// sender: a node that does not read its events lets them pile up.
//
// By default frames pass as values (their payload copied), so that fault
// injection is exact and simulated clocks need no care. With WithCodecs,
// each node gets its own codec and every frame is encoded by the sender's
// and decoded by the receiver's, as on the wire: invalid frames are refused
// at Send, and a duplicated datagram is refused by the receiver as a replay,
// exactly as in production.
type MemNetwork struct {
	log    zerolog.Logger
	codecs func(id int64) *wire.Codec

	mu       sync.Mutex
	nodes    map[int64]*memTransport
	cut      map[[2]int64]bool // partitioned pairs, lower id first
	isolated map[int64]bool
	rng      *rand.Rand
	loss     float64
	dup      float64
	gen      uint64
	stats    MemStats
}

// MemStats counts what a MemNetwork did with frames.
type MemStats struct {
	Delivered  uint64 // frames (datagram copies included) handed to a receiver
	Dropped    uint64 // frames not delivered: lost, blocked by a fault, to a closed node, refused by a codec
	Lost       uint64 // datagrams dropped by SetDatagramLoss (included in Dropped)
	Duplicated uint64 // extra datagram copies made by SetDatagramDup
}

// MemOption configures a MemNetwork.
type MemOption func(*MemNetwork)

// WithMemLogger sets the logger of the network's transports.
func WithMemLogger(l zerolog.Logger) MemOption { return func(m *MemNetwork) { m.log = l } }

// WithCodecs makes every frame go through a wire codec: newCodec is called
// once per transport, and should return codecs sharing a key.
func WithCodecs(newCodec func(id int64) *wire.Codec) MemOption {
	return func(m *MemNetwork) { m.codecs = newCodec }
}

// NewMemNetwork returns an empty network, without faults.
func NewMemNetwork(opts ...MemOption) *MemNetwork {
	m := &MemNetwork{
		log:      zerolog.Nop(),
		nodes:    make(map[int64]*memTransport),
		cut:      make(map[[2]int64]bool),
		isolated: make(map[int64]bool),
		rng:      rand.New(rand.NewPCG(1, 0)),
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Transport joins node id to the network. If a transport with that id is
// already there, it is closed first (a node that crashed and restarted).
func (m *MemNetwork) Transport(id int64) Transport {
	log := m.log.With().Str("component", "transport").Int64("node", id).Logger()
	t := &memTransport{
		net:   m,
		id:    id,
		log:   log,
		drops: newDropLog(log),
		q:     newEventQueue(DefaultConfig().EventBuffer),
		done:  make(chan struct{}),
	}
	if m.codecs != nil {
		t.codec = m.codecs(id)
	}
	t.wg.Go(func() { t.q.run(t.done) })
	m.mu.Lock()
	old := m.nodes[id]
	m.nodes[id] = t
	m.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return t
}

// Stats returns what the network has done so far.
func (m *MemNetwork) Stats() MemStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// SetDatagramLoss makes each datagram lost with probability p, drawing from
// a generator seeded with seed (which SetDatagramDup shares).
func (m *MemNetwork) SetDatagramLoss(p float64, seed uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loss = p
	m.rng = rand.New(rand.NewPCG(seed, 0))
}

// SetDatagramDup makes each datagram delivered twice with probability p.
func (m *MemNetwork) SetDatagramDup(p float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dup = p
}

// Partition cuts a from b: dials between them fail, their links go down on
// both ends (Err wraps ErrUnreachable) and datagrams between them are
// dropped.
func (m *MemNetwork) Partition(a, b int64) {
	if a == b {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cut[pair(a, b)] = true
	for _, t := range []*memTransport{m.nodes[a], m.nodes[b]} {
		if t != nil && t.succ != nil && !m.reachable(t.succ.from.id, t.succ.to.id) {
			m.unlink(t.succ, ErrUnreachable, ErrUnreachable)
		}
	}
}

// Heal undoes Partition(a, b). Links do not come back by themselves.
func (m *MemNetwork) Heal(a, b int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cut, pair(a, b))
}

// HealAll undoes every Partition and Isolate.
func (m *MemNetwork) HealAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.cut)
	clear(m.isolated)
}

// Isolate cuts node id from everyone, itself included: a crashed or stalled
// node. Its links go down on both ends (Err wraps ErrUnreachable), and
// everything to or from it is dropped until Unisolate or HealAll.
func (m *MemNetwork) Isolate(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.isolated[id] = true
	if t := m.nodes[id]; t != nil {
		for _, l := range []*memLink{t.succ, t.pred} {
			if l != nil {
				m.unlink(l, ErrUnreachable, ErrUnreachable)
			}
		}
	}
}

// Unisolate undoes Isolate(id).
func (m *MemNetwork) Unisolate(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.isolated, id)
}

func pair(a, b int64) [2]int64 {
	if a > b {
		a, b = b, a
	}
	return [2]int64{a, b}
}

// reachable reports whether frames may pass between a and b. Callers hold
// m.mu.
func (m *MemNetwork) reachable(a, b int64) bool {
	return !m.isolated[a] && !m.isolated[b] && !m.cut[pair(a, b)]
}

// memLink is a link from a dialer (from) to an acceptor (to). It is alive
// while from.succ or to.pred points to it.
type memLink struct {
	gen      uint64
	from, to *memTransport
}

// unlink detaches l from both ends. The dialer gets EventSuccessorDown with
// fromErr, the acceptor EventPredecessorDown with toErr; closed ends get
// nothing. Callers hold m.mu.
func (m *MemNetwork) unlink(l *memLink, fromErr, toErr error) {
	if f := l.from; f.succ == l {
		f.succ = nil
		f.emit(Event{Kind: EventSuccessorDown, Peer: l.to.id, Err: wrapLink(fromErr, "successor", l.to.id)})
	}
	if t := l.to; t.pred == l {
		t.pred = nil
		t.emit(Event{Kind: EventPredecessorDown, Peer: l.from.id, Err: wrapLink(toErr, "predecessor", l.from.id)})
	}
}

// wrapLink wraps a link error the way Net does; nil stays nil.
func wrapLink(err error, role string, peer int64) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("transport: %s %d: %w", role, peer, err)
}

// message is a frame in flight: the value, or its encoding under a codec.
type message struct {
	f wire.Frame
	b []byte
}

// encode prepares f for sending by from. Callers hold m.mu.
func (m *MemNetwork) encode(from *memTransport, f wire.Frame) (message, error) {
	if from.codec == nil {
		return message{f: f}, nil
	}
	b, err := from.codec.Encode(f)
	if err != nil {
		return message{}, fmt.Errorf("transport: send %s: %w", f.Type, err)
	}
	return message{b: b}, nil
}

// deliver hands msg to node to as a frame arriving via via, from the link
// peer peer (0 for a datagram). As on Net, a datagram meant for another node
// and a link frame in another node's name are dropped. Callers hold m.mu.
func (m *MemNetwork) deliver(to *memTransport, via Via, msg message, peer int64) {
	f := msg.f
	if to.codec != nil {
		var err error
		if f, _, err = to.codec.Decode(msg.b); err != nil {
			m.stats.Dropped++
			to.drops.drop(reasonOf(err), via.String(), "", err)
			return
		}
	} else {
		f.Payload = bytes.Clone(f.Payload) // the receiver's own, as after a decode
	}
	if f.Type == HelloType && via != ViaDatagram {
		return // as on TCP: handshake traffic only
	}
	switch {
	case via == ViaDatagram && f.Dst != to.id:
		m.stats.Dropped++
		to.drops.drop(ReasonMisdirected, via.String(), "",
			fmt.Errorf("transport: %s from node %d is meant for node %d", f.Type, f.Src, f.Dst))
		return
	case via != ViaDatagram && f.Src != peer:
		m.stats.Dropped++
		to.drops.drop(ReasonWrongSource, via.String(), "",
			fmt.Errorf("transport: %s in the name of node %d on the link of node %d", f.Type, f.Src, peer))
		return
	}
	m.stats.Delivered++
	to.emit(Event{Kind: EventFrame, Via: via, Frame: f, Peer: f.Src})
}
