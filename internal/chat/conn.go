package chat

// runs on: a connection's reader goroutine (readLoop: the fields under
// "Owned by the reader goroutine") and its writer goroutine (writeLoop,
// finish); the visit goroutine and others only queue lines (send, which
// never waits) and close it (closeWith, once).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"

	"github.com/ringchat/ringchat/internal/wire"
)

// queueReserve is the part of a write queue that deliveries leave free, for
// the replies and errors of the client's own requests.
const queueReserve = 16

// finalWriteTimeout bounds writing the last line (the reason for closing).
const finalWriteTimeout = time.Second

// conn is one client connection: a reader goroutine (readLoop: decode,
// handle, reply) and a writer goroutine (writeLoop: the bounded queue to the
// socket). Nothing else ever blocks on the socket.
type conn struct {
	s      *Server
	nc     net.Conn
	remote string
	ip     string // sourceIP of remote: the per-address count's key
	out    chan outItem
	// loginBy is when a connection that has not logged in is closed, fixed
	// at accept: nothing the client sends before its login extends it.
	loginBy time.Time

	closeOnce  sync.Once
	quit       chan struct{} // closed by closeWith
	final      *Error        // the reason, written last (nil: a graceful close)
	writerDone chan struct{}

	// sessPtr is sess for the writer goroutine.
	sessPtr atomic.Pointer[session]

	// Owned by the reader goroutine.
	version int
	sess    *session
	limiter *bucket
	refused int // lines refused in a row by the rate limit
	// lastTyping: when this connection's last TYPING went on to the ring.
	lastTyping time.Time
	// toldAway: the away statuses (name and message) this sender was told.
	toldAway map[string]bool
}

// outItem is one line for the writer. A protocol-1 delivery carries its
// recipient row: once written it counts as delivered and is removed.
type outItem struct {
	line []byte
	ack  store.RecipientSeq
}

func newConn(s *Server, nc net.Conn, ip string) *conn {
	now := time.Now()
	return &conn{
		s:          s,
		nc:         nc,
		remote:     nc.RemoteAddr().String(),
		ip:         ip,
		loginBy:    now.Add(s.cfg.LoginTimeout),
		out:        make(chan outItem, s.cfg.WriteQueue),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		version:    protocol.V1,
		limiter:    newBucket(s.cfg.RateLimit, s.cfg.RateBurst, now),
	}
}

// send queues a line for the client without ever waiting: a full queue
// means the client does not read, and it is dropped.
func (c *conn) send(it outItem) bool {
	select {
	case <-c.quit:
		return false
	default:
	}
	select {
	case c.out <- it:
		return true
	default:
		c.s.log.Info().Str("remote", c.remote).Int("queued", cap(c.out)).Msg("chat: dropping a client that does not read")
		c.closeWith(errorf(protocol.CodeSlowConsumer, "too many messages waiting (%d): the client does not read fast enough", cap(c.out)))
		return false
	}
}

func (c *conn) sendLine(line []byte) bool { return c.send(outItem{line: line}) }

// reply answers the client in its protocol version.
func (c *conn) reply(e *Error) { c.sendLine(encodeError(c.version, e)) }

// room is how many deliveries the queue takes now.
func (c *conn) room() int { return cap(c.out) - len(c.out) - queueReserve }

// closeWith ends the connection: the writer writes reason (if any) as the
// last line, or, for a graceful close (nil), what is still queued; then it
// closes the socket, which ends the reader.
func (c *conn) closeWith(reason *Error) {
	c.closeOnce.Do(func() {
		c.final = reason
		if reason != nil {
			// A write in progress to a client that does not read fails
			// soon instead of after WriteTimeout.
			_ = c.nc.SetWriteDeadline(time.Now().Add(finalWriteTimeout))
			if reason.Code != protocol.CodeShutdown {
				c.s.stats.dropped.Add(1)
			}
		}
		close(c.quit)
	})
}

func (c *conn) closed() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// writeLoop is the connection's one writer.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	defer c.nc.Close()
	bw := bufio.NewWriterSize(c.nc, 32<<10)
	var acks []store.RecipientSeq
	write := func(it outItem) error {
		if _, err := bw.Write(it.line); err != nil {
			return err
		}
		if it.ack.RecipientID != 0 {
			acks = append(acks, it.ack)
		}
		return nil
	}
	for {
		select {
		case it := <-c.out:
			acks = acks[:0]
			if c.closed() {
				c.finish(bw, it)
				return
			}
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
			err := write(it)
		more:
			for err == nil && bw.Buffered() < 64<<10 {
				select {
				case it = <-c.out:
					err = write(it)
				default:
					break more
				}
			}
			if err == nil {
				err = bw.Flush()
			}
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && !c.closed() {
					c.s.log.Info().Str("remote", c.remote).Dur("timeout_ms", c.s.cfg.WriteTimeout).Msg("chat: dropping a client that does not read")
					c.closeWith(errorf(protocol.CodeSlowConsumer, "nothing read for %v", c.s.cfg.WriteTimeout))
				} else if !c.closed() {
					c.s.log.Debug().Err(err).Str("remote", c.remote).Msg("chat: write failed; closing")
				}
				c.closeWith(nil)
				return
			}
			if len(acks) > 0 {
				// In the socket's buffer: delivered, as the original counted it.
				c.s.q.Written(acks)
			}
			if sess := c.sessPtr.Load(); sess != nil && sess.starved.Load() && len(c.out) < cap(c.out)/4 {
				sess.starved.Store(false)
				c.s.q.FetchFor(sess.userID)
			}
		case <-c.quit:
			c.finish(bw)
			return
		}
	}
}

// finish writes the connection's last lines: what is still queued, then
// the reason for closing, if any, all within finalWriteTimeout.
func (c *conn) finish(bw *bufio.Writer, first ...outItem) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(finalWriteTimeout))
	var acks []store.RecipientSeq
	var err error
	for _, it := range first {
		if _, err = bw.Write(it.line); err == nil && it.ack.RecipientID != 0 {
			acks = append(acks, it.ack)
		}
	}
queued:
	for err == nil {
		select {
		case it := <-c.out:
			_, err = bw.Write(it.line)
			if err == nil && it.ack.RecipientID != 0 {
				acks = append(acks, it.ack)
			}
		default:
			break queued
		}
	}
	if err == nil && c.final != nil {
		_, err = bw.Write(encodeError(c.finalVersion(), c.final))
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && len(acks) > 0 {
		c.s.q.Written(acks)
	}
}

// finalVersion is the protocol of the closing line (the writer does not
// read the reader's fields; the session knows it).
func (c *conn) finalVersion() int {
	if sess := c.sessPtr.Load(); sess != nil {
		return sess.version
	}
	return protocol.V1
}

// readLoop is the connection's one reader: it owns the session state.
func (c *conn) readLoop() {
	defer c.cleanup()
	br := bufio.NewReaderSize(c.nc, 16<<10)
	for !c.closed() {
		_ = c.nc.SetReadDeadline(c.readDeadline())
		line, err := wire.ReadTextLine(br, protocol.MaxLineBytes, errLineTooLong)
		if err != nil {
			c.readFailed(err)
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !c.limiter.allow(time.Now()) {
			c.overRate(line)
			continue
		}
		c.refused = 0
		c.handleLine(line)
	}
}

// overRate drops a line the rate limit refused. The first of a run is
// answered with RATE_LIMITED, and so is every protocol-2 request with an
// id, by its id: a client waiting for that request's answer (a message's
// STORED) learns at once that it was dropped and may send it again, instead
// of waiting for an answer that never comes. FloodLimit refused lines in a
// row close the connection.
func (c *conn) overRate(line []byte) {
	c.refused++
	if c.refused >= c.s.cfg.FloodLimit {
		c.s.log.Info().Str("remote", c.remote).Int("refused", c.refused).Msg("chat: closing a flooding client")
		c.closeWith(errorf(protocol.CodeFlood, "too many messages: over %v lines a second, %d refused in a row", c.s.cfg.RateLimit, c.refused))
		return
	}
	id := c.requestID(line)
	if c.refused > 1 && id == "" {
		return
	}
	e := errorf(protocol.CodeRateLimited, "too many messages: over %v lines a second; lines are dropped until you slow down", c.s.cfg.RateLimit)
	e.ID = id
	c.reply(e)
}

// requestID is the id of a protocol-2 request line, or "" if the
// connection speaks protocol 1 or the line names no valid id.
func (c *conn) requestID(line []byte) string {
	if c.version < protocol.V2 {
		return ""
	}
	var in struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(line, &in) != nil || len(in.ID) > protocol.MaxRequestID || !printable(in.ID) {
		return ""
	}
	return in.ID
}

// readDeadline is when the next read gives up: the fixed login deadline
// before a login; then IdleTimeout from now for a protocol-2 session, and
// never for a protocol-1 one (the zero time: no deadline). The original
// client sends no ALIVE, so its silence says nothing: TCP keep-alive
// (Config.KeepAlive) finds its dead peers.
func (c *conn) readDeadline() time.Time {
	switch {
	case c.sess == nil:
		return c.loginBy
	case c.version < protocol.V2:
		return time.Time{}
	}
	return time.Now().Add(c.s.cfg.IdleTimeout)
}

func (c *conn) idleTimeout() time.Duration {
	if c.sess == nil {
		return c.s.cfg.LoginTimeout
	}
	return c.s.cfg.IdleTimeout
}

// readFailed closes the connection for a read error, saying why.
func (c *conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, errLineTooLong):
		c.closeWith(errorf(protocol.CodeLineTooLong, "line longer than %d bytes", protocol.MaxLineBytes))
	case errors.Is(err, syscall.ETIMEDOUT):
		// The peer stopped answering: keep-alive probes (or a write's
		// retransmissions) went unanswered. A "timeout", but not our
		// deadline: the peer is gone, as with a reset.
		c.s.log.Debug().Err(err).Str("remote", c.remote).Msg("chat: the client stopped answering; closing")
		c.closeWith(nil)
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		if c.sess == nil {
			c.closeWith(errorf(protocol.CodeIdle, "not logged in after %v", c.idleTimeout()))
			return
		}
		c.closeWith(errorf(protocol.CodeIdle, "nothing received for %v (send ALIVE to keep an idle connection)", c.idleTimeout()))
	default: // EOF, reset, or the writer closed the socket
		c.closeWith(nil)
	}
}

// cleanup runs when the reader ends: it waits for the writer, then logs the
// user out (presence cleared; unacknowledged messages stay for the next
// login).
func (c *conn) cleanup() {
	c.closeWith(nil)
	<-c.writerDone
	s := c.s
	s.mu.Lock()
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
	sess := c.sess
	if sess != nil {
		sess.ready, sess.closing = false, true
	}
	closing := s.closing
	s.mu.Unlock()
	if sess == nil {
		return
	}
	if !closing { // at shutdown Run clears the node's presence in one go
		s.clearPresence(sess)
	}
	s.mu.Lock()
	if s.sessions[sess.userID] == sess {
		delete(s.sessions, sess.userID)
	}
	s.mu.Unlock()
	close(sess.gone)
	s.log.Debug().Str("user", sess.name).Str("remote", c.remote).Msg("chat: logged out")
}

var errLineTooLong = errors.New("chat: line too long")
