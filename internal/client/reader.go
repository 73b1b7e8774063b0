package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"github.com/ringchat/ringchat/internal/wire"
)

// request is a pending LOGIN, JOIN_GROUP or LEAVE_GROUP. Its fields other
// than done are guarded by Conn.mu; done is written once, under Conn.mu.
type request struct {
	typ       MessageType
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

	br := bufio.NewReaderSize(c.nc, 64<<10)
	var err error
	// refusal is an error naming no request, with a code, when it was the
	// last line: the server's reason for closing (a full node, too many
	// connections from this address, the login deadline). Requests still
	// waiting when the connection closes get it.
	var refusal *ServerError
	for {
		var line []byte
		line, err = wire.ReadTextLine(br, MaxLineBytes, ErrLineTooLong)
		if err != nil {
			break
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

	c.mu.Lock()
	closing := c.closing
	switch {
	case closing:
		err = ErrClosed
	case errors.Is(err, io.EOF):
		err = ErrServerClosed
	case errors.Is(err, ErrLineTooLong):
	case errors.Is(err, net.ErrClosed): // closed after a failed write
		err = fmt.Errorf("connection lost: %w", err)
	default:
		err = fmt.Errorf("read: %w", err)
	}
	c.err = err
	answer := err
	if refusal != nil && errors.Is(err, ErrServerClosed) {
		answer = fmt.Errorf("%w: %w", ErrServerClosed, refusal)
	}
	for _, r := range c.pending {
		r.queued = false
		r.done <- answer
	}
	c.pending = nil
	c.mu.Unlock()

	if !closing {
		c.nc.Close()
		c.emit(Disconnected{Err: err})
	}
}

// dispatch completes the pending request an event answers, or delivers it.
func (c *Conn) dispatch(ev Event) {
	switch ev := ev.(type) {
	case Login:
		if c.answerID(ev.ID, ev, nil) || c.answerEcho(TypeLogin, ev.Username) {
			return
		}
	case JoinGroup:
		if c.answerID(ev.ID, ev, nil) || c.answerEcho(TypeJoinGroup, ev.Group) {
			return
		}
	case LeaveGroup:
		if c.answerID(ev.ID, ev, nil) || c.answerEcho(TypeLeaveGroup, ev.Group) {
			return
		}
	case ErrorMessage:
		if ev.ID != "" {
			c.dropUnstored(ev.ID) // refused: not to be sent again
			if c.answerID(ev.ID, nil, &ServerError{Message: ev.Message, Code: ev.Code}) {
				return
			}
			break
		}
		if c.Version() >= 2 {
			break // protocol 2 names the request an error answers: this one answers none
		}
		if claimed, deliver := c.answerError(ev.Message); claimed && !deliver {
			return
		}
	case Stored:
		c.dropUnstored(ev.ID)
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case Who:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case Account:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case Invite:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case Groups:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case History:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case Away:
		if ev.ID != "" && c.answerID(ev.ID, ev, nil) {
			return
		}
	case Whois:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case Names:
		if c.answerID(ev.ID, ev, nil) {
			return
		}
	case ChatMessage:
		if ev.ID == "" {
			break
		}
		if !c.opts.Seen.Add(ev.ID) {
			c.queueAck(ev.ID) // delivered before (a reconnect): acknowledge again, deliver once
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
			c.queueAck(ev.ID)
		}
		return
	case Alive:
		return
	}
	c.emit(ev)
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
	}
	r.reply = ev
	r.done <- err
	return true
}

// answerEcho completes the oldest pending request of this type and value.
func (c *Conn) answerEcho(typ MessageType, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.pending, func(r *request) bool { return r.id == "" && r.typ == typ && r.key == key })
	if i < 0 {
		return false
	}
	r := c.pending[i]
	c.removeLocked(r)
	if typ == TypeLogin {
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
