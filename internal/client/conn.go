// Package client talks to a ringnode's client port: newline-delimited JSON,
// protocol v1 as DESIGN.md ("Chat") fixes it, and protocol v2
// (docs/PROTOCOL.md) after LoginV2.
//
// A Conn has one reader goroutine. Requests that the server echoes (LOGIN,
// JOIN_GROUP, LEAVE_GROUP) wait for their echo or for an ERROR; since v1 has
// no request ids, pending requests form a FIFO: an echo completes the oldest
// pending request of the same type and value, an ERROR fails the oldest
// pending request. In v2 every request carries an id and its answer (echo,
// STORED, WHO, GROUPS, HISTORY or ERROR) names it. Everything else arrives
// on Events.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
)

// MaxLineBytes bounds an incoming line (without its newline). A longer line
// ends the connection with ErrLineTooLong.
const MaxLineBytes = 1 << 20

// DefaultTimeout is used when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

const eventBuffer = 128

// Connection errors.
var (
	ErrClosed       = errors.New("client: connection closed")
	ErrServerClosed = errors.New("server closed the connection")
	ErrLineTooLong  = fmt.Errorf("line from server longer than %d bytes", MaxLineBytes)
	ErrNotLoggedIn  = errors.New("client: not logged in")
)

// DefaultKeepAlive is how often an otherwise silent connection sends ALIVE
// (servers close connections idle for minutes).
const DefaultKeepAlive = 30 * time.Second

// Options configure a connection.
type Options struct {
	// Timeout bounds dialing, and each request or write whose context has
	// no deadline of its own. Zero means DefaultTimeout.
	Timeout time.Duration
	// KeepAlive is how often ALIVE is sent. Zero means DefaultKeepAlive; a
	// negative value sends none.
	KeepAlive time.Duration
	// AutoAck (protocol 2) acknowledges each chat message as soon as it is
	// on Events. Without it, call Ack once the message is safe.
	AutoAck bool
	// CumulativeAck (protocol 2) asks LOGIN for
	// protocol.FeatureCumulativeAck. Where the node grants it, AutoAck
	// (and a Session) acknowledge received messages with one ACK_UPTO per
	// batch, naming the newest sequence before which every message of the
	// connection was taken in, instead of their ids; AckUpTo sends one.
	// A node without the feature is acknowledged by ids, as without it.
	CumulativeAck bool
	// ownerAcks: the Session that owns the connection acknowledges each
	// chat message once its consumer has it (queueAck), as AutoAck does.
	ownerAcks bool
	// Seen (protocol 2) remembers the ids of messages already delivered,
	// so that a message delivered again after a reconnect is not delivered
	// twice. Share one Seen between the connections of one user; nil
	// means a new one per connection.
	Seen *Seen
	// TLS, if set, makes Dial speak TLS with this configuration (a node
	// started with --tls-cert). An empty ServerName is taken from the
	// address dialed, so one configuration serves every node of a list.
	TLS *tls.Config
	// FailFast makes DialV2 give up at once on what a first login should
	// not wait out: the user logged in elsewhere (after loginGrace, for a
	// connection of the user's own still closing) and nodes of which none
	// listens (ErrNothingListens). Without it, both are retried until the
	// context ends, as a client reconnecting after a failure must.
	FailFast bool
	// Features (protocol 2) asks LOGIN for notices beyond the answers to
	// requests: protocol.FeatureAway, FeatureRead, FeatureTyping. Events
	// then carries Away (of a user written to), ReadNotice and
	// TypingNotice. With protocol.FeatureFailover (a Session always asks
	// for it) the LOGIN answer lists the ring's nodes (Conn.Nodes), ALIVE
	// is answered (Conn.Ping) and Notice events tell when the node cannot
	// serve. Every Conn asks for protocol.FeatureLimits
	// (Conn.MaxMessageBytes).
	Features []string
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.Seen == nil {
		o.Seen = NewSeen(0)
	}
	return o
}

// Conn is a client connection. Its methods are safe for concurrent use.
type Conn struct {
	nc     net.Conn
	opts   Options
	now    func() time.Time // stamps sentAt; replaced in tests
	events chan Event

	wmu sync.Mutex // serialises writes, and keeps pending in wire order

	mu      sync.Mutex
	user    string
	version int                 // 2 after LoginV2, else 1
	node    int64               // protocol 2: the node that accepted the login
	granted []string            // protocol 2: features the login answer granted
	ring    []protocol.NodeAddr // protocol 2 (protocol.FeatureFailover): the ring's nodes
	// maxMessage (protocol 2, FeatureLimits): the largest message the
	// node takes; 0: it did not say.
	maxMessage int
	pending    []*request
	unstored   []Outgoing // protocol 2: sent, no STORED or ERROR yet
	closing    bool       // Close was called
	err        error      // why the connection ended; set when the reader exits

	reqSeq atomic.Uint64
	ackMu  sync.Mutex
	ackBuf []string
	// ackOpen (cumulative acknowledgement): the chat messages received on
	// this connection, in order, not yet covered by an ACK_UPTO sent;
	// ackSent: the newest sequence sent in one. Guarded by ackMu.
	ackOpen []openAck
	ackSent int64
	// cumulative: acknowledge with ACK_UPTO (grantCumulative).
	cumulative atomic.Bool
	ackWake    chan struct{}
	ackSend    sync.Mutex // held while taking and writing a batch of acknowledgements

	dispatchMu sync.Mutex     // held by the reader while it delivers an event and queues its ACK
	stopEmit   chan struct{}  // closed first by Close: nothing more is delivered
	bg         sync.WaitGroup // keep-alive and acknowledgement goroutines

	closeOnce  sync.Once
	closeErr   error
	closingCh  chan struct{} // closed by Close
	readerDone chan struct{} // closed when the reader goroutine has exited
}

// Dial connects to a client port at addr ("host:port").
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	d := &net.Dialer{Timeout: opts.Timeout}
	var nc net.Conn
	var err error
	if opts.TLS != nil {
		// The handshake is part of dialing: a node that does not speak TLS,
		// or whose certificate does not verify, fails here.
		td := &tls.Dialer{NetDialer: d, Config: opts.TLS}
		nc, err = td.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("TLS to %s: %w", addr, err)
		}
	} else if nc, err = d.DialContext(ctx, "tcp", addr); err != nil {
		return nil, err // *net.OpError: "dial tcp ADDR: ..."
	}
	return NewConn(nc, opts), nil
}

// NewConn wraps an established connection and starts its reader. The Conn
// owns nc from now on.
func NewConn(nc net.Conn, opts Options) *Conn {
	c := &Conn{
		nc:         nc,
		opts:       opts.withDefaults(),
		now:        time.Now,
		events:     make(chan Event, eventBuffer),
		closingCh:  make(chan struct{}),
		stopEmit:   make(chan struct{}),
		readerDone: make(chan struct{}),
		version:    1,
		ackWake:    make(chan struct{}, 1),
	}
	go c.readLoop()
	c.bg.Add(1)
	go c.ackLoop()
	if c.opts.KeepAlive > 0 {
		c.bg.Add(1)
		go c.keepAlive()
	}
	return c
}

// Events delivers chat messages, server errors that no request claimed,
// unmatched echoes, ProtocolError and, last, Disconnected. It is closed when
// the reader exits. The reader waits while the channel's buffer is full, and
// so do echoes behind it: keep receiving while you make requests.
func (c *Conn) Events() <-chan Event { return c.events }

// User is the name of the logged-in user, "" before a successful Login.
func (c *Conn) User() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user
}

// Node is the id of the node that accepted a protocol-2 login, 0 before
// one (and always with protocol 1, whose answer does not name it).
func (c *Conn) Node() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// Err is why the connection ended (ErrClosed after Close), or nil while it
// is open.
func (c *Conn) Err() error { return c.ended() }

// Login sends LOGIN and waits for its echo. A refusal is a *ServerError.
func (c *Conn) Login(ctx context.Context, user string) error {
	if user == "" {
		return fmt.Errorf("client: login: %w: empty username", ErrInvalidMessage)
	}
	if err := c.request(ctx, Login{Username: user}, protocol.TypeLogin, user); err != nil {
		return fmt.Errorf("login %s: %w", user, err)
	}
	return nil
}

// Join sends JOIN_GROUP and waits for its echo.
func (c *Conn) Join(ctx context.Context, group string) error {
	if c.Version() >= 2 {
		if _, err := c.call(ctx, protocol.GroupV2{MessageType: protocol.TypeJoinGroup, Group: group, ID: c.newID()}); err != nil {
			return fmt.Errorf("join %s: %w", group, err)
		}
		return nil
	}
	if err := c.request(ctx, JoinGroup{Group: group}, protocol.TypeJoinGroup, group); err != nil {
		return fmt.Errorf("join %s: %w", group, err)
	}
	return nil
}

// Leave sends LEAVE_GROUP and waits for its echo.
func (c *Conn) Leave(ctx context.Context, group string) error {
	if c.Version() >= 2 {
		if _, err := c.call(ctx, protocol.GroupV2{MessageType: protocol.TypeLeaveGroup, Group: group, ID: c.newID()}); err != nil {
			return fmt.Errorf("leave %s: %w", group, err)
		}
		return nil
	}
	if err := c.request(ctx, LeaveGroup{Group: group}, protocol.TypeLeaveGroup, group); err != nil {
		return fmt.Errorf("leave %s: %w", group, err)
	}
	return nil
}

// Send writes a CHAT_MESSAGE from the logged-in user, stamped now. v1 has
// no acknowledgement: an ERROR the server sends about it arrives on Events
// (or fails a request pending at that moment).
func (c *Conn) Send(ctx context.Context, to Recipient, text string) error {
	user := c.User()
	if user == "" {
		return ErrNotLoggedIn
	}
	if text == "" {
		return fmt.Errorf("client: send: %w: empty message", ErrInvalidMessage)
	}
	if c.Version() >= 2 {
		_, err := c.Post(ctx, to, text)
		return err
	}
	msg := ChatMessage{From: user, To: to, Content: text, SentAt: c.now().Format(protocol.TimeLayout)}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writeLocked(ctx, msg); err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	return nil
}

// CloseWrite half-closes the connection: the server reads EOF after all
// that was sent, while replies still arrive on Events until it closes its
// side (Disconnected with ErrServerClosed).
func (c *Conn) CloseWrite() error {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("client: connection cannot be half-closed")
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return cw.CloseWrite()
}

// Close closes the socket and returns once the reader goroutine has exited.
// Pending requests fail with ErrClosed. With AutoAck, every message that
// was delivered on Events is acknowledged first (a message still in flight
// is not delivered, and comes again at the next login). It is safe to call
// more than once.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.stopEmit)
		// A barrier: once the reader lets go, the event it was delivering,
		// if any, has its ACK queued.
		c.dispatchMu.Lock()
		//lint:ignore SA2001 the lock is taken only to wait for the reader
		c.dispatchMu.Unlock()
		c.sendAcks(time.Second)
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		close(c.closingCh)
		if err := c.nc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = err // net.ErrClosed: the connection had ended already
		}
	})
	<-c.readerDone
	c.bg.Wait()
	return c.closeErr
}

func (c *Conn) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// request writes msg and waits until the reader completes the matching
// pending entry, the connection ends, or ctx is done.
func (c *Conn) request(ctx context.Context, msg Event, typ protocol.Type, key string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	r := &request{typ: typ, key: key, done: make(chan error, 1)}

	c.wmu.Lock()
	if err := c.enqueue(r); err != nil {
		c.wmu.Unlock()
		return err
	}
	err := c.writeLocked(ctx, msg)
	c.wmu.Unlock()
	if err != nil {
		c.dequeue(r)
		return err
	}

	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if err, answered := c.abandon(r); answered {
			return err
		}
		return ctx.Err()
	}
}

// writeLocked writes one line; c.wmu must be held. A failed write may have
// left half a line on the wire, so it ends the connection.
func (c *Conn) writeLocked(ctx context.Context, msg Event) error {
	b, err := Encode(msg)
	if err != nil {
		return err
	}
	return c.writeBytesLocked(ctx, b)
}

// writeBytesLocked writes b and a newline; c.wmu must be held.
func (c *Conn) writeBytesLocked(ctx context.Context, b []byte) error {
	if err := c.ended(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.Timeout)
	}
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return c.writeFailed(err)
	}
	if _, err := c.nc.Write(append(b, '\n')); err != nil {
		return c.writeFailed(err)
	}
	return nil
}

func (c *Conn) writeFailed(err error) error {
	if ended := c.ended(); ended != nil {
		return ended
	}
	c.nc.Close() // the reader notices, fails pending requests and reports
	return fmt.Errorf("client: write: %w", err)
}

// ended returns why the connection is unusable, or nil while it is usable.
func (c *Conn) ended() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endedLocked()
}

func (c *Conn) endedLocked() error {
	switch {
	case c.closing:
		return ErrClosed
	case c.err != nil:
		return c.err
	}
	return nil
}
