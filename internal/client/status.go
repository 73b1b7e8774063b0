package client

import (
	"context"
	"fmt"

	"github.com/ringchat/ringchat/internal/protocol"
)

// Away is the answer to AWAY (User empty: this user's status, Message
// empty when cleared), or, with FeatureAway, a notice that User, written
// to, is away.
type Away struct {
	User    string
	Message string
	Since   string // RFC 3339
	ID      string
}

// Whois is the answer to WHOIS.
type Whois struct {
	User      string
	Online    bool
	Node      int64
	Since     string // logged in since (RFC 3339)
	Away      string
	AwaySince string
	ID        string
}

// Names is the answer to NAMES: one page of a group's members. Next,
// when set, asks for the page after it.
type Names struct {
	Group     string
	Members   []protocol.Member // Node 0: not logged in
	Truncated bool
	Next      string
	ID        string
}

// ReadNotice (FeatureRead): User has read this user's messages to them up
// to Seq.
type ReadNotice struct {
	User string
	Seq  int64
}

// TypingNotice (FeatureTyping): User is writing to this user.
type TypingNotice struct{ User string }

func (Away) isEvent()         {}
func (Whois) isEvent()        {}
func (Names) isEvent()        {}
func (ReadNotice) isEvent()   {}
func (TypingNotice) isEvent() {}

// SetAway sets this user's away message (protocol 2); an empty message
// clears it. The status stays until cleared, across logins.
func (c *Conn) SetAway(ctx context.Context, message string) (Away, error) {
	ev, err := c.call(ctx, protocol.StatusRequest{MessageType: protocol.TypeAway, Message: message, ID: c.newID()})
	if err != nil {
		return Away{}, fmt.Errorf("away: %w", err)
	}
	a, _ := ev.(Away)
	return a, nil
}

// Whois tells where a user is logged in, since when, and their away status
// (protocol 2).
func (c *Conn) Whois(ctx context.Context, user string) (Whois, error) {
	ev, err := c.call(ctx, protocol.StatusRequest{MessageType: protocol.TypeWhois, Username: user, ID: c.newID()})
	if err != nil {
		return Whois{}, fmt.Errorf("whois %s: %w", user, err)
	}
	w, _ := ev.(Whois)
	return w, nil
}

// Names lists one page of a group's members (after: "" or the Next of the
// page before; limit 0: the server's default), with where each is logged
// in and their away status (protocol 2).
func (c *Conn) Names(ctx context.Context, group, after string, limit int) (Names, error) {
	ev, err := c.call(ctx, protocol.StatusRequest{MessageType: protocol.TypeNames, Group: group, After: after, Limit: limit, ID: c.newID()})
	if err != nil {
		return Names{}, fmt.Errorf("names of %s: %w", group, err)
	}
	n, _ := ev.(Names)
	return n, nil
}

// Read tells the server that this user has read user's direct messages up
// to seq (protocol 2; no answer). The server keeps the mark and tells user.
func (c *Conn) Read(ctx context.Context, user string, seq int64) error {
	if err := c.tell(ctx, protocol.NoticeRequest{MessageType: protocol.TypeRead, ToUsername: user, Seq: seq}); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

// Typing tells user that this user is writing to them (protocol 2; no
// answer, nothing stored). Send it every few seconds while typing.
func (c *Conn) Typing(ctx context.Context, user string) error {
	if err := c.tell(ctx, protocol.NoticeRequest{MessageType: protocol.TypeTyping, ToUsername: user}); err != nil {
		return fmt.Errorf("typing: %w", err)
	}
	return nil
}

// tell writes a request that has no answer (ACK, READ, TYPING).
func (c *Conn) tell(ctx context.Context, msg any) error {
	b, err := marshal(msg)
	if err != nil {
		return err
	}
	wctx, cancel := c.withTimeout(ctx)
	defer cancel()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeBytesLocked(wctx, b)
}
