package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
)

// Event is something that arrived on a connection: one of the wire
// messages (Login, JoinGroup, LeaveGroup, ChatMessage, ErrorMessage, Alive)
// or a local event (ProtocolError, Disconnected). Use a type switch.
type Event interface{ isEvent() }

// Login is a LOGIN message: sent to log in, echoed by the server on success.
// Protocol 2's answer also carries the version, the node and the request id.
type Login struct {
	Username string
	Version  int
	Node     int64
	ID       string
	// Away (protocol 2): the user's away message, kept from before.
	Away string
	// Features (protocol 2) are the features of Options.Features the
	// node grants (only FeatureFailover is told); Nodes, with
	// FeatureFailover, the ring's nodes and their client ports.
	Features []string
	Nodes    []protocol.NodeAddr
	// MaxMessageBytes, with FeatureLimits: the largest message the node
	// takes.
	MaxMessageBytes int
}

// JoinGroup is a JOIN_GROUP message, echoed by the server on success.
type JoinGroup struct {
	Group string
	ID    string // protocol 2: the request id
	// InviteOnly (protocol 2): the group is joined by invitation only.
	InviteOnly bool
}

// Account is protocol 2's answer to REGISTER (the account exists) or
// SET_PASSWORD (the password is set); Type says which.
type Account struct {
	Type     protocol.Type
	Username string
	ID       string
}

// Invite is protocol 2's answer to INVITE: the user may join the group.
type Invite struct {
	Group    string
	Username string
	ID       string
}

// LeaveGroup is a LEAVE_GROUP message, echoed by the server on success.
type LeaveGroup struct {
	Group string
	ID    string // protocol 2: the request id
}

// ChatMessage is a CHAT_MESSAGE. SentAt is kept as it appeared on the wire
// (TimeLayout, stamped by the server on delivery); see Time. Protocol 2 adds
// the message id, its place in the ring's global order (Seq) and the time
// in RFC 3339 (Stamp).
type ChatMessage struct {
	From    string
	To      Recipient
	Content string
	SentAt  string
	ID      string
	Seq     int64
	Stamp   string
}

// Time parses SentAt (TimeLayout, in local time).
func (m ChatMessage) Time() (time.Time, error) {
	return time.ParseInLocation(protocol.TimeLayout, m.SentAt, time.Local)
}

// ErrorMessage is an ERROR from the server that no pending request claimed.
// Protocol 2 adds a stable Code and the id of the request it refuses.
type ErrorMessage struct {
	Message string
	Code    protocol.Code
	ID      string
}

// Stored is protocol 2's receipt: the message with this id is committed to
// the store, at position Seq of the ring's global order.
type Stored struct {
	ID    string
	Seq   int64
	Stamp string
}

// Who is protocol 2's answer to WHO: the users online and their node.
type Who struct {
	Users     []protocol.OnlineUser
	Truncated bool
	ID        string
}

// Groups is protocol 2's answer to GROUPS.
type Groups struct {
	Groups    []protocol.GroupInfo
	Truncated bool
	ID        string
}

// History is protocol 2's answer to HISTORY: the last messages of a
// conversation, oldest first.
type History struct {
	To        Recipient
	Messages  []ChatMessage
	Truncated bool
	ID        string
	// ReadSeq (direct conversations): the other user has read this
	// user's messages up to this sequence (0: none, or not told).
	ReadSeq int64
}

// Alive is an ALIVE keep-alive. Conn never delivers it. In protocol 2
// an ALIVE with an ID is answered with the same ID (Conn.Ping).
type Alive struct{ ID string }

// ProtocolError reports a line from the server that could not be decoded.
// The connection stays open.
type ProtocolError struct {
	Line string
	Err  error
}

// Disconnected is the last event of a connection that ended other than by
// Close: the server closed it (ErrServerClosed), a line was too long
// (ErrLineTooLong) or reading failed. The Events channel closes after it.
type Disconnected struct{ Err error }

// Connected is a Session's first event, and the first after each
// reconnection: it is logged in at the node Node through Addr. Resent
// counts the messages without a receipt that it sends again there.
// After a reconnection, From and FromNode are where it was logged in
// before and Why is why it left (the node died, stopped answering, or
// said it cannot serve).
type Connected struct {
	Addr      string
	Node      int64
	Reconnect bool
	Resent    int
	From      string
	FromNode  int64
	Why       error
}

// Moved reports whether a reconnection logged in at another address.
func (c Connected) Moved() bool { return c.Reconnect && c.From != "" && c.From != c.Addr }

// ConnectionLost reports that a Session's connection ended (Err says why);
// the Session is reconnecting.
type ConnectionLost struct {
	Addr string
	Err  error
}

// Reconnecting reports a Session's round of failed attempts to log in
// again at every node; the next round starts after Delay.
type Reconnecting struct {
	Attempt int
	Err     error
	Delay   time.Duration
	// Known is how many nodes the Session can try: with one, whose
	// connection is refused, nothing moves until it is back, and a person
	// should be told to give the others (--nodes).
	Known int
}

func (Login) isEvent()          {}
func (JoinGroup) isEvent()      {}
func (LeaveGroup) isEvent()     {}
func (ChatMessage) isEvent()    {}
func (ErrorMessage) isEvent()   {}
func (Alive) isEvent()          {}
func (ProtocolError) isEvent()  {}
func (Disconnected) isEvent()   {}
func (Stored) isEvent()         {}
func (Who) isEvent()            {}
func (Groups) isEvent()         {}
func (History) isEvent()        {}
func (Connected) isEvent()      {}
func (ConnectionLost) isEvent() {}
func (Reconnecting) isEvent()   {}
func (Notice) isEvent()         {}
func (Account) isEvent()        {}
func (Invite) isEvent()         {}

// ServerError is an ERROR the server sent in answer to a request. Its text
// is the server's message as it is; Code is protocol 2's stable code.
type ServerError struct {
	Message string
	Code    protocol.Code
}

func (e *ServerError) Error() string { return e.Message }

// Recipient is where a chat message goes: a user, or a group if Group is set.
type Recipient struct {
	Name  string
	Group bool
}

// ToUser is the recipient for a direct message to name.
func ToUser(name string) Recipient { return Recipient{Name: name} }

// ToGroup is the recipient for a message to the group name.
func ToGroup(name string) Recipient { return Recipient{Name: name, Group: true} }

// ParseRecipient reads "USER" as a user and "#GROUP" as a group.
func ParseRecipient(s string) (Recipient, error) {
	s = strings.TrimSpace(s)
	r := ToUser(s)
	if name, ok := strings.CutPrefix(s, "#"); ok {
		r = ToGroup(name)
	}
	if r.Name == "" || strings.ContainsAny(r.Name, " \t\r\n") {
		return Recipient{}, fmt.Errorf("invalid recipient %q: want USER or #GROUP", s)
	}
	return r, nil
}

// String is "#name" for a group and "name" for a user (ParseRecipient's form).
func (r Recipient) String() string {
	if r.Group {
		return "#" + r.Name
	}
	return r.Name
}
