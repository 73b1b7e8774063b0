package client

import (
	"fmt"
	"strings"
	"time"
)

// Event is something that arrived on a connection: one of the wire
// messages (Login, JoinGroup, LeaveGroup, ChatMessage, ErrorMessage, Alive)
// or a local event (ProtocolError, Disconnected). Use a type switch.
type Event interface{ isEvent() }

// Login is a LOGIN message: sent to log in, echoed by the server on success.
type Login struct{ Username string }

// JoinGroup is a JOIN_GROUP message, echoed by the server on success.
type JoinGroup struct{ Group string }

// LeaveGroup is a LEAVE_GROUP message, echoed by the server on success.
type LeaveGroup struct{ Group string }

// ChatMessage is a CHAT_MESSAGE. SentAt is kept as it appeared on the wire
// (TimeLayout, stamped by the server on delivery); see Time.
type ChatMessage struct {
	From    string
	To      Recipient
	Content string
	SentAt  string
}

// Time parses SentAt (TimeLayout, in local time).
func (m ChatMessage) Time() (time.Time, error) {
	return time.ParseInLocation(TimeLayout, m.SentAt, time.Local)
}

// ErrorMessage is an ERROR from the server that no pending request claimed.
type ErrorMessage struct{ Message string }

// Alive is an ALIVE keep-alive. Conn never delivers it.
type Alive struct{}

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

func (Login) isEvent()         {}
func (JoinGroup) isEvent()     {}
func (LeaveGroup) isEvent()    {}
func (ChatMessage) isEvent()   {}
func (ErrorMessage) isEvent()  {}
func (Alive) isEvent()         {}
func (ProtocolError) isEvent() {}
func (Disconnected) isEvent()  {}

// ServerError is an ERROR the server sent in answer to a request. Its text
// is the server's message as it is.
type ServerError struct{ Message string }

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
