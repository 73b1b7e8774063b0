package ring

import (
	"encoding/json"
	"fmt"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/token"
)

// MsgType names a ring message; it is the frame type on the wire.
type MsgType string

// Ring messages. UDP carries the coordinator's traffic; the TCP ring links
// carry the token (forward) and its acknowledgement (back), and heartbeats.
const (
	MsgJoin             MsgType = "JOIN"              // node -> coordinator: splice me in
	MsgSuccessor        MsgType = "SUCCESSOR"         // coordinator -> node: link to Succ (topology version Ver)
	MsgSuccessorAck     MsgType = "SUCCESSOR_ACK"     // node -> coordinator: applied Ver
	MsgSuccessorRequest MsgType = "SUCCESSOR_REQUEST" // node -> coordinator: my successor Failed
	MsgRejoin           MsgType = "REJOIN"            // coordinator -> node: you are not in the ring; join again
	MsgLeave            MsgType = "LEAVE"             // node -> coordinator: splice me out
	MsgLeaveOK          MsgType = "LEAVE_OK"          // coordinator -> node: you are out
	MsgCoordinator      MsgType = "COORDINATOR"       // coordinator -> all: I hold the role for this epoch
	MsgHandoff          MsgType = "HANDOFF"           // acting coordinator -> highest node: take the role
	MsgToken            MsgType = "TOKEN"             // predecessor -> successor (TCP)
	MsgTokenAck         MsgType = "TOKEN_ACK"         // successor -> predecessor (TCP)
	MsgPing             MsgType = "PING"              // predecessor -> successor when the link is idle
	MsgPong             MsgType = "PONG"              // successor -> predecessor
	MsgWake             MsgType = "WAKE"              // any -> all: pass the token on without idling for two hurried rotations
	MsgElection         MsgType = "ELECTION"          // any -> any: a message of the coordinator election (payload: method, kind, round)
)

// Via says which channel a message travels on.
type Via uint8

// Channels.
const (
	ViaUDP  Via = iota // datagram to Msg.To
	ViaSucc            // on the outbound ring link (to the successor)
	ViaPred            // back on the inbound ring link (to the predecessor)
)

func (v Via) String() string {
	switch v {
	case ViaUDP:
		return "udp"
	case ViaSucc:
		return "succ"
	case ViaPred:
		return "pred"
	}
	return "?"
}

// Msg is a ring message. From, Epoch and Type travel in the frame header;
// the other fields are the JSON payload.
type Msg struct {
	Type  MsgType `json:"-"`
	From  int64   `json:"-"`
	Epoch int64   `json:"-"`
	To    int64   `json:"-"` // ViaUDP destination
	Via   Via     `json:"-"`

	Succ   int64 `json:"succ,omitempty"`
	Ver    int64 `json:"ver,omitempty"`
	Failed int64 `json:"failed,omitempty"`
	// Relay (a request to a node that is not the coordinator): pass it on
	// to your coordinator, for me (the sender cannot reach it). For (a
	// request at the coordinator): the node it is for.
	Relay bool         `json:"relay,omitempty"`
	For   int64        `json:"for,omitempty"`
	Token *token.Token `json:"token,omitempty"`
	Stamp *token.Stamp `json:"stamp,omitempty"`
	Stale bool         `json:"stale,omitempty"`
	// Troubled (a HANDOFF): the coordinator hands the role on because its
	// store link is troubled; a node troubled too declines it.
	Troubled bool `json:"troubled,omitempty"`
	// Proof (a PING): token.ProveLink of Stamp under the generation's
	// secret, which shows the sender read it from the store.
	Proof string `json:"proof,omitempty"`

	Election *election.Msg `json:"election,omitempty"`
}

func (m Msg) String() string {
	s := fmt.Sprintf("%s %d->", m.Type, m.From)
	switch m.Via {
	case ViaUDP:
		s += fmt.Sprint(m.To)
	default:
		s += m.Via.String()
	}
	s += fmt.Sprintf(" e%d", m.Epoch)
	if m.Succ != 0 {
		s += fmt.Sprintf(" succ=%d", m.Succ)
	}
	if m.Ver != 0 {
		s += fmt.Sprintf(" ver=%d", m.Ver)
	}
	if m.Failed != 0 {
		s += fmt.Sprintf(" failed=%d", m.Failed)
	}
	if m.Token != nil {
		s += " token=" + m.Token.Stamp.String()
	}
	if m.Stamp != nil {
		s += " stamp=" + m.Stamp.String()
	}
	if m.Stale {
		s += " stale"
	}
	if m.Troubled {
		s += " troubled"
	}
	if e := m.Election; e != nil {
		s += fmt.Sprintf(" %s/%s round=%s", e.Method, e.Kind, e.Round)
	}
	return s
}

// knownTypes lists the types a node accepts.
var knownTypes = map[MsgType]bool{
	MsgJoin: true, MsgSuccessor: true, MsgSuccessorAck: true, MsgSuccessorRequest: true, MsgRejoin: true,
	MsgLeave: true, MsgLeaveOK: true, MsgCoordinator: true, MsgHandoff: true, MsgToken: true,
	MsgTokenAck: true, MsgPing: true, MsgPong: true, MsgWake: true, MsgElection: true,
}

// Payload encodes the message body for a frame.
func (m Msg) Payload() (json.RawMessage, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("ring: encode %s: %w", m.Type, err)
	}
	if string(b) == "{}" {
		return nil, nil
	}
	return b, nil
}

// ParseMsg builds a message from a frame's fields and checks that it is
// one a node can act on.
func ParseMsg(typ string, src, epoch int64, payload json.RawMessage, via Via) (Msg, error) {
	m := Msg{Type: MsgType(typ), From: src, Epoch: epoch, Via: via}
	if !knownTypes[m.Type] {
		return Msg{}, fmt.Errorf("ring: unknown message type %q", typ)
	}
	if len(payload) > 0 && string(payload) != "null" {
		if err := json.Unmarshal(payload, &m); err != nil {
			return Msg{}, fmt.Errorf("ring: %s payload: %w", typ, err)
		}
	}
	if err := m.check(typ); err != nil {
		return Msg{}, err
	}
	if m.Election != nil {
		m.Election.From = src
	}
	m.Type = MsgType(typ)
	m.From, m.Epoch, m.Via = src, epoch, via
	return m, nil
}

// check reports what makes a decoded message unfit to act on, in this
// order: a field its type requires is missing, a number is out of range,
// or the election message is missing, misplaced or invalid. typ is the
// frame's type, as the errors name it.
func (m Msg) check(typ string) error {
	switch {
	case m.Type == MsgToken && m.Token == nil:
		return fmt.Errorf("ring: TOKEN without token")
	case m.Type == MsgTokenAck && m.Stamp == nil:
		return fmt.Errorf("ring: TOKEN_ACK without stamp")
	case m.Type == MsgSuccessor && m.Succ < 1:
		return fmt.Errorf("ring: SUCCESSOR without successor")
	}
	if err := m.checkRanges(typ); err != nil {
		return err
	}
	switch {
	case m.Type == MsgElection && m.Election == nil:
		return fmt.Errorf("ring: ELECTION without election message")
	case m.Type != MsgElection && m.Election != nil:
		return fmt.Errorf("ring: %s carrying an election message", typ)
	case m.Election != nil:
		if err := m.Election.Validate(); err != nil {
			return fmt.Errorf("ring: %w", err)
		}
	}
	return nil
}

// checkRanges reports a negative id or version, a token with a
// generation below 1 or a negative counter, or a stamp likewise.
func (m Msg) checkRanges(typ string) error {
	switch {
	case m.Succ < 0 || m.Ver < 0 || m.Failed < 0 || m.For < 0:
		return fmt.Errorf("ring: %s with negative ids", typ)
	case m.Token != nil && (m.Token.Gen < 1 || m.Token.Seq < 0 || m.Token.Coord < 0 || m.Token.Epoch < 0 ||
		m.Token.Busy < 0 || m.Token.Quiet < 0):
		return fmt.Errorf("ring: %s with a negative or zero generation, or negative counters", typ)
	case m.Stamp != nil && (m.Stamp.Gen < 1 || m.Stamp.Seq < 0):
		return fmt.Errorf("ring: %s with a negative or zero stamp", typ)
	}
	return nil
}
