// Package transport carries frames between ringnode daemons: one outbound
// TCP link to the successor, one inbound TCP link from the predecessor, and
// UDP datagrams to any node. Transport is the small interface the protocol
// packages use; Net is the real TCP/UDP implementation and MemNetwork an
// in-memory one for deterministic tests and simulations (it ships in a
// non-test file so that other packages can use it).
//
// # Links
//
// ConnectSuccessor dials a node and sends a HELLO frame first; the accepting
// node takes the HELLO's (authenticated) source as its predecessor. A node
// has at most one link of each kind: a new outbound link replaces the old
// one, and a new authenticated inbound link replaces the previous
// predecessor. A one-node ring links to itself: the node is then its own
// successor and predecessor.
//
// # Event semantics
//
// Every link attempt ends with exactly one Down event (until Close), which a
// single Up event may precede:
//
//   - ConnectSuccessor(id): EventSuccessorUp{Peer: id} once the HELLO has
//     been written, or EventSuccessorDown{Peer: id, Err} if the dial or the
//     HELLO failed. Later EventSuccessorDown{Peer: id, Err} when the link
//     fails (Err wraps ErrPeerClosed on an orderly close by the peer).
//   - A deliberate local close (ConnectSuccessor replacing a link,
//     DisconnectSuccessor, DropPredecessor) reports the old link's Down
//     synchronously, before the call returns, with Err == nil: everything
//     after it concerns the new link, and a consumer can ignore Downs with a
//     nil Err since it asked for them.
//   - An inbound link replaced by a newer one: EventPredecessorDown{old peer,
//     Err: ErrReplaced} immediately followed by EventPredecessorUp{new peer}.
//   - Close emits nothing more and closes the Events channel.
//
// Links are tagged with a generation: an event from a link that has already
// been replaced or closed (a late read error, a frame read just before the
// replace) is dropped, never reported as if it concerned the current link.
// Events of one transport are delivered in the order the transport decided
// them.
//
// Frames arrive already authenticated (see package wire); frames that fail,
// oversize lines and connections without a valid HELLO are dropped, counted
// and logged at warn level, at most once a second per reason.
package transport

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ringchat/ringchat/internal/token"
	"github.com/ringchat/ringchat/internal/wire"
)

// Via tells on which path a frame arrived.
type Via uint8

const (
	// ViaDatagram is a UDP datagram.
	ViaDatagram Via = iota + 1
	// ViaPredecessor is a frame on the inbound link, from the node that
	// links to us.
	ViaPredecessor
	// ViaSuccessor is a frame on our outbound link, sent back by the
	// successor (TOKEN_ACK, PONG).
	ViaSuccessor
)

func (v Via) String() string {
	switch v {
	case ViaDatagram:
		return "datagram"
	case ViaPredecessor:
		return "predecessor"
	case ViaSuccessor:
		return "successor"
	}
	return fmt.Sprintf("Via(%d)", uint8(v))
}

// EventKind tells what an Event reports.
type EventKind uint8

const (
	// EventFrame is a frame received.
	EventFrame EventKind = iota + 1
	// EventSuccessorUp reports the outbound link established (HELLO sent).
	EventSuccessorUp
	// EventSuccessorDown reports the outbound link gone, or its dial failed.
	EventSuccessorDown
	// EventPredecessorUp reports a new authenticated inbound link.
	EventPredecessorUp
	// EventPredecessorDown reports the inbound link gone.
	EventPredecessorDown
)

func (k EventKind) String() string {
	switch k {
	case EventFrame:
		return "frame"
	case EventSuccessorUp:
		return "successor-up"
	case EventSuccessorDown:
		return "successor-down"
	case EventPredecessorUp:
		return "predecessor-up"
	case EventPredecessorDown:
		return "predecessor-down"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is something that happened on a transport.
type Event struct {
	Kind  EventKind
	Via   Via        // for EventFrame
	Frame wire.Frame // for EventFrame; already authenticated
	// Peer is the other node: the frame's source for EventFrame, the
	// successor or predecessor for link events.
	Peer int64
	// Err is why a link went down; nil if this node closed it deliberately.
	Err error
}

func (e Event) String() string {
	switch e.Kind {
	case EventFrame:
		return fmt.Sprintf("frame %s from %d via %s", e.Frame.Type, e.Peer, e.Via)
	case EventSuccessorDown, EventPredecessorDown:
		return fmt.Sprintf("%s %d (%v)", e.Kind, e.Peer, e.Err)
	}
	return fmt.Sprintf("%s %d", e.Kind, e.Peer)
}

// Resolver maps a node id to the "host:port" of its coordination port (TCP
// and UDP share the port number). It is called at every dial and datagram,
// since the node table can change at run time, and must be safe for
// concurrent use.
type Resolver func(id int64) (addr string, ok bool)

// Transport is a node's set of links. Its methods are safe for concurrent
// use and never block on the network.
type Transport interface {
	// Send sends one datagram to node to; best effort.
	Send(to int64, f wire.Frame) error
	// ConnectSuccessor replaces the outbound link with one to id, dialed
	// asynchronously (see the package comment for the events).
	ConnectSuccessor(id int64)
	// DisconnectSuccessor closes the outbound link, if any.
	DisconnectSuccessor()
	// SendSuccessor writes f on the outbound link. It returns an error
	// wrapping ErrNoLink if there is none (or it is not up yet); a write
	// error also tears the link down and emits EventSuccessorDown.
	SendSuccessor(f wire.Frame) error
	// SendPredecessor writes f back on the inbound link (TOKEN_ACK, PONG),
	// with the same errors as SendSuccessor.
	SendPredecessor(f wire.Frame) error
	// DropPredecessor closes the inbound link (predecessor silent too long).
	DropPredecessor()
	// RefusePredecessor writes UNLINK on the inbound link and closes it:
	// its peer is not the predecessor the ring names (the peer's
	// SuccessorDown then carries ErrReplaced).
	RefusePredecessor()
	// Events returns the channel of events. It is closed when Close returns.
	Events() <-chan Event
	// Close closes listeners and links and returns once every goroutine of
	// the transport has exited. It is idempotent; events not yet received
	// are discarded.
	Close() error
}

// Errors of the package.
var (
	ErrClosed      = errors.New("transport: closed")
	ErrNoLink      = errors.New("transport: no link")
	ErrUnknownNode = errors.New("transport: unknown node")
	ErrPeerClosed  = errors.New("transport: link closed by peer")
	ErrReplaced    = errors.New("transport: link replaced by a newer one")
	ErrUnreachable = errors.New("transport: node unreachable")
	ErrBadConfig   = errors.New("transport: bad config")
)

// HelloType is the type of the frame a dialer sends first on a link. It is
// reserved: HELLO frames are never delivered as EventFrame.
const HelloType = "HELLO"

// UnlinkType is the type of the frame a node writes on its old inbound link
// when it accepts another predecessor, just before closing it: the old
// predecessor's SuccessorDown then carries ErrReplaced (its successor is
// alive and took someone else) rather than ErrPeerClosed (which a crash also
// gives). It is reserved like HELLO.
const UnlinkType = "UNLINK"

// unlinkPayload says why a node closes an inbound link: another link
// replaced it (the frames the peer sent on it last may not have been
// read), or the ring does not name the peer as predecessor. Nodes act the
// same on both; the reason is for the peer's logs and for tests.
type unlinkPayload struct {
	Why string `json:"why"`
}

// The reasons of an UNLINK.
const (
	unlinkReplaced = "replaced"
	unlinkRefused  = "refused"
	unlinkUnproven = "unproven" // a HELLO without proof while another predecessor link is up
)

func unlinkFrame(from int64, why string) wire.Frame {
	p, _ := json.Marshal(unlinkPayload{Why: why}) // cannot fail
	return wire.Frame{Type: UnlinkType, Src: from, Payload: p}
}

// helloPayload names the node the dialer meant to reach, so that a node
// listening at an address that now belongs to someone else (the node table
// changed) refuses the link instead of becoming the wrong predecessor.
// Proofs, when the dialer knows generation secrets, prove that it read
// them from the store (token.ProveHello), one per generation, newest
// first: only such a HELLO may replace a predecessor link that is up.
type helloPayload struct {
	To     int64              `json:"to"`
	Proofs []token.HelloProof `json:"proofs,omitempty"`
}

// maxHelloProofs bounds the proofs a HELLO's check tries (a node sends
// one per generation it keeps: 5).
const maxHelloProofs = 8

// HelloProver makes the proofs of the HELLOs a node sends and checks
// those it receives, under the generation secrets its store confirmed
// (token.Keys). Its methods are called from the transport's goroutines.
type HelloProver interface {
	// HelloProofs returns the proofs for a HELLO from node from to node
	// to (none when there is no secret to make them under).
	HelloProofs(from, to int64) []token.HelloProof
	// ProvesHello reports whether proof, under generation gen, proves a
	// HELLO from node from to node to.
	ProvesHello(from, to, gen int64, proof string) bool
}

func helloFrame(from, to int64, prover HelloProver) wire.Frame {
	hp := helloPayload{To: to}
	if prover != nil {
		hp.Proofs = prover.HelloProofs(from, to)
	}
	p, _ := json.Marshal(hp) // cannot fail
	return wire.Frame{Type: HelloType, Src: from, Payload: p}
}

// proves reports whether one of the first maxHelloProofs proofs of hp
// holds for a HELLO from node from to node to.
func (hp helloPayload) proves(prover HelloProver, from, to int64) bool {
	for i, p := range hp.Proofs {
		if i == maxHelloProofs {
			break
		}
		if prover.ProvesHello(from, to, p.Gen, p.Proof) {
			return true
		}
	}
	return false
}

// helloOf returns the payload of a HELLO frame.
func helloOf(f wire.Frame) (helloPayload, bool) {
	var p helloPayload
	if f.Type != HelloType || json.Unmarshal(f.Payload, &p) != nil {
		return p, false
	}
	return p, true
}
