package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/wire"
)

// request is a pending LOGIN, JOIN_GROUP or LEAVE_GROUP. Its fields other
// than done are guarded by Conn.mu; done is written once, under Conn.mu.
type request struct {
	typ       protocol.Type
	key       string
	id        string     // protocol 2: answers name it
	reply     Event      // protocol 2: the answer, set before done
	done      chan error // buffered 1
	queued    bool
	abandoned bool // its caller gave up; the answer is still consumed
}

func (c *Conn) enqueue(r *request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.endedLocked(); err != nil {
		return err
	}
	r.queued = true
	c.pending = append(c.pending, r)
	return nil
}

func (c *Conn) dequeue(r *request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(r)
}

func (c *Conn) removeLocked(r *request) {
	if i := slices.Index(c.pending, r); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
	}
	r.queued = false
}

// abandon marks r as given up. An answer that arrives later is consumed by
// r, so that it cannot be taken for the answer to a later request. If r was
// answered already, abandon returns that answer.
func (c *Conn) abandon(r *request) (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.queued {
		r.abandoned = true
		return nil, false
	}
	return <-r.done, true
}

// readLoop is the connection's one reader goroutine.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	defer close(c.events)

	refusal, err := c.readLines()

	c.mu.Lock()
	closing := c.closing
	err = readError(err, closing)
	c.err = err
	c.failPendingLocked(err, refusal)
	c.mu.Unlock()

	if !closing {
		c.nc.Close()
		c.emit(Disconnected{Err: err})
	}
}

// readLines reads the server's lines and dispatches their events until
// reading fails, and returns that error. refusal is an error naming no
// request, with a code, when it was the last line: the server's reason for
// closing (a full node, too many connections from this address, the login
// deadline).
func (c *Conn) readLines() (refusal *ServerError, err error) {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		var line []byte
		line, err = wire.ReadTextLine(br, MaxLineBytes, ErrLineTooLong)
		if err != nil {
			return refusal, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, derr := Decode(line)
		refusal = nil
		if e, ok := ev.(ErrorMessage); ok && derr == nil && e.ID == "" && e.Code != "" {
			refusal = &ServerError{Message: e.Message, Code: e.Code}
		}
		c.dispatchMu.Lock()
		if derr != nil {
			c.emit(ProtocolError{Line: string(line), Err: derr})
		} else {
			c.dispatch(ev)
		}
		c.dispatchMu.Unlock()
	}
}

// readError is the connection's error after reading failed with err:
// ErrClosed if it was being closed, ErrServerClosed if the server closed
// it.
func readError(err error, closing bool) error {
	switch {
	case closing:
		return ErrClosed
	case errors.Is(err, io.EOF):
		return ErrServerClosed
	case errors.Is(err, ErrLineTooLong):
		return err
	case errors.Is(err, net.ErrClosed): // closed after a failed write
		return fmt.Errorf("connection lost: %w", err)
	default:
		return fmt.Errorf("read: %w", err)
	}
}

// failPendingLocked answers every request still waiting with the
// connection's error err, with the server's refusal if it closed the
// connection after one. Caller holds c.mu.
func (c *Conn) failPendingLocked(err error, refusal *ServerError) {
	answer := err
	if refusal != nil && errors.Is(err, ErrServerClosed) {
		answer = fmt.Errorf("%w: %w", ErrServerClosed, refusal)
	}
	for _, r := range c.pending {
		r.queued = false
		r.done <- answer
	}
	c.pending = nil
}

// dispatch completes the pending request an event answers, or delivers it.
func (c *Conn) dispatch(ev Event) {
	switch ev := ev.(type) {
	case ChatMessage:
		if ev.ID != "" {
			c.deliverChat(ev)
			return
		}
	case Alive:
		c.answerID(ev.ID, ev, nil) // a Ping's answer; the rest are dropped
		return
	default:
		if c.answer(ev) {
			return
		}
	}
	c.emit(ev)
}

// answer completes the pending request ev answers, if any, and reports
// whether ev is consumed by it (not to be delivered).
func (c *Conn) answer(ev Event) bool {
	switch ev := ev.(type) {
	case Login:
		return c.answerID(ev.ID, ev, nil) || c.answerEcho(protocol.TypeLogin, ev.Username)
	case JoinGroup:
		return c.answerID(ev.ID, ev, nil) || c.answerEcho(protocol.TypeJoinGroup, ev.Group)
	case LeaveGroup:
		return c.answerID(ev.ID, ev, nil) || c.answerEcho(protocol.TypeLeaveGroup, ev.Group)
	case ErrorMessage:
		return c.answerErrorMessage(ev)
	case Stored:
		c.dropUnstored(ev.ID)
		return c.answerID(ev.ID, ev, nil)
	case Away:
		return ev.ID != "" && c.answerID(ev.ID, ev, nil)
	}
	if id, ok := replyID(ev); ok {
		return c.answerID(id, ev, nil)
	}
	return false
}

// replyID is the request id of an event that is only ever a reply
// (protocol 2): WHO, REGISTER and SET_PASSWORD, INVITE, GROUPS, HISTORY,
// WHOIS, NAMES.
func replyID(ev Event) (string, bool) {
	switch ev := ev.(type) {
	case Who:
		return ev.ID, true
	case Account:
		return ev.ID, true
	case Invite:
		return ev.ID, true
	case Groups:
		return ev.ID, true
	case History:
		return ev.ID, true
	case Whois:
		return ev.ID, true
	case Names:
		return ev.ID, true
	}
	return "", false
}

// answerErrorMessage fails the request an ERROR answers, and reports
// whether the ERROR is consumed by it. Protocol 2 names the request by
// id (a refused message is not to be sent again); a protocol-1 ERROR fails
// the oldest pending request.
func (c *Conn) answerErrorMessage(ev ErrorMessage) bool {
	if ev.ID != "" {
		c.dropUnstored(ev.ID) // refused: not to be sent again
		return c.answerID(ev.ID, nil, &ServerError{Message: ev.Message, Code: ev.Code})
	}
	if c.Version() >= 2 {
		return false // protocol 2 names the request an error answers: this one answers none
	}
	claimed, deliver := c.answerError(ev.Message)
	return claimed && !deliver
}

// deliverChat delivers a chat message with an id once: one seen before (a
// reconnect) is acknowledged again and not delivered.
func (c *Conn) deliverChat(ev ChatMessage) {
	c.noteReceived(ev) // first: ACK_UPTO never passes a message not yet taken in
	if !c.opts.Seen.Add(ev.ID) {
		c.queueAck(ev.ID, ev.Seq) // delivered before (a reconnect): acknowledge again, deliver once
		return
	}
	if !c.emit(ev) {
		// Not delivered (the Conn is closing) and not acknowledged: the
		// server sends it again, and the next connection sharing this
		// Seen must take it for new.
		c.opts.Seen.Remove(ev.ID)
		return
	}
	if c.opts.AutoAck {
		c.queueAck(ev.ID, ev.Seq)
	}
}

// answerID completes the pending request with this id (protocol 2).
func (c *Conn) answerID(id string, ev Event, err error) bool {
	if id == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.pending, func(r *request) bool { return r.id == id })
	if i < 0 {
		return false
	}
	r := c.pending[i]
	c.removeLocked(r)
	if l, ok := ev.(Login); ok && err == nil {
		c.user, c.version, c.node = l.Username, max(l.Version, 1), l.Node
		c.granted, c.ring, c.maxMessage = l.Features, l.Nodes, l.MaxMessageBytes
		c.grantCumulative(l.Features)
	}
	r.reply = ev
	r.done <- err
	return true
}

// answerEcho completes the oldest pending request of this type and value.
func (c *Conn) answerEcho(typ protocol.Type, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.pending, func(r *request) bool { return r.id == "" && r.typ == typ && r.key == key })
	if i < 0 {
		return false
	}
	r := c.pending[i]
	c.removeLocked(r)
	if typ == protocol.TypeLogin {
		c.user = key
	}
	r.done <- nil
	return true
}

// answerError fails the oldest pending request. An ERROR consumed by an
// abandoned request is still delivered, so that nobody misses it.
func (c *Conn) answerError(msg string) (claimed, deliver bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.pending, func(r *request) bool { return r.id == "" })
	if i < 0 {
		return false, true
	}
	r := c.pending[i]
	c.removeLocked(r)
	r.done <- &ServerError{Message: msg}
	return true, r.abandoned
}

// emit delivers ev, waiting for room unless the Conn is being closed, and
// reports whether it did.
func (c *Conn) emit(ev Event) bool {
	select {
	case c.events <- ev:
		return true
	case <-c.stopEmit:
		return false
	}
}
