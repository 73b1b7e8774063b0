package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/protocol"
)

// ErrOffline is returned by Session requests while it is reconnecting.
var ErrOffline = errors.New("client: not connected (reconnecting)")

// Session defaults.
const (
	// DefaultRetryMin is the first pause between two rounds of reconnection
	// attempts: short, since another node usually answers at once.
	DefaultRetryMin = 100 * time.Millisecond
	// DefaultRetryMax caps the pause: a node restarting or a ring splicing
	// out a dead node takes seconds, and a person is waiting.
	DefaultRetryMax = 3 * time.Second
	// DefaultStallTimeout is how long a sent message may wait for its
	// receipt before the node is taken for stalled: a node stores within a
	// token visit, and a ring repairs itself in seconds.
	DefaultStallTimeout = 20 * time.Second
	// DefaultMaxOutbox bounds the messages waiting for a receipt.
	DefaultMaxOutbox = 10_000
	// DefaultPingEvery is how often a Session asks a node that granted
	// FeatureFailover whether it still answers (ALIVE with an id).
	DefaultPingEvery = 500 * time.Millisecond
	// DefaultPingTimeout is how long such a node may take to answer
	// before the Session leaves it: with DefaultPingEvery, a node that
	// stops answering (a stopped process, a cut link) is left within
	// 2 s, and another node has it logged in within 3 s.
	DefaultPingTimeout = 1500 * time.Millisecond
)

// SessionConfig configures a Session.
type SessionConfig struct {
	// Addrs are the client ports of the ring's nodes, the preferred first.
	Addrs    []string
	User     string
	Password string
	// Options of each connection: Timeout bounds dialing, logging in and
	// each request, KeepAlive the pings. The Session acknowledges a message
	// once its Events consumer has received it (AutoAck is ignored), and
	// shares one Seen between its connections (a new one if nil), so that
	// a message is delivered once across reconnections.
	Options Options
	// RetryMin and RetryMax bound the pause between reconnection rounds
	// (it doubles from RetryMin up to RetryMax). Zero means the default.
	RetryMin, RetryMax time.Duration
	// StallTimeout: a message without receipt this long on a connection
	// makes the Session drop it and reconnect (a stalled node keeps its
	// sockets open). Zero means DefaultStallTimeout; negative, never.
	StallTimeout time.Duration
	// MaxOutbox bounds the messages waiting to be stored (zero: default).
	MaxOutbox int
	// PingEvery and PingTimeout: a node that granted FeatureFailover is
	// asked every PingEvery whether it answers, and left when an answer
	// takes longer than PingTimeout. Zero means the defaults; a negative
	// PingTimeout never pings.
	PingEvery, PingTimeout time.Duration
	// OnNodes, if set, is called with the ring's nodes each time a login
	// answer lists them (FeatureFailover), for the caller to keep for its
	// next start. The Session itself fails over to them, after Addrs.
	OnNodes func([]protocol.NodeAddr)
}

func (c SessionConfig) withDefaults() SessionConfig {
	c.Options = c.Options.withDefaults()
	c.Options.AutoAck = false
	c.Options.ownerAcks = true
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	c.RetryMax = max(c.RetryMax, c.RetryMin)
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.MaxOutbox <= 0 {
		c.MaxOutbox = DefaultMaxOutbox
	}
	if c.PingEvery <= 0 {
		c.PingEvery = DefaultPingEvery
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = DefaultPingTimeout
	}
	if !slices.Contains(c.Options.Features, protocol.FeatureFailover) {
		c.Options.Features = append(slices.Clone(c.Options.Features), protocol.FeatureFailover)
	}
	return c
}

// Session is a protocol-2 login that outlives its connections: when the
// node dies, the network drops or the node stalls, it logs in again at
// another node of Addrs (or the same one, with backoff), receives what was
// queued meanwhile, and sends again every message that has no receipt yet,
// with its id, so that each is stored once. Messages delivered again are
// shown once (one Seen for all its connections) and acknowledged.
//
// Post never waits for the network: a message is queued in the outbox and
// written, in order, as soon as a connection is up. Events delivers what
// the connections receive (chat messages, STORED receipts, ERRORs) and the
// Session's own ConnectionLost, Reconnecting and Connected (after each
// reconnection; Where tells the first connection); Disconnected is the
// last event when the Session gives up (a login refused for good, such as
// a wrong password). A chat message is acknowledged once it has been
// received from Events: one not received before Close comes again at the
// next login. Methods are safe for concurrent use.
type Session struct {
	cfg    SessionConfig
	events chan Event
	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	conn    *Conn // nil while reconnecting
	gen     uint64
	addr    string
	node    int64
	outbox  []*outEntry
	changed chan struct{} // closed and replaced when the outbox or the connection changes
	stalled error         // why the writer dropped the connection
	closed  bool
	// password is the one to log in again with, once SetPassword changed
	// it (nil: cfg.Password).
	password *string
	// learned: the ring's nodes as the last login answer listed them.
	learned []protocol.NodeAddr
	// maxMessage: the largest message of the last node (0: not known
	// yet); see MaxMessageBytes.
	maxMessage int
	// leaving: the node the Session left on purpose (it stopped
	// answering, or said it cannot serve), told to the next login.
	leaving int64

	// Events on their way to the consumer: the connection's reader never
	// waits for the consumer (receipts settle the outbox at once), up to
	// maxQueued.
	qmu       sync.Mutex
	queue     []delivery
	qchanged  chan struct{} // closed and replaced when queue or qdone change
	qdone     bool          // run has ended: deliver the rest, then close events
	delivered chan struct{} // closed when deliver has exited
}

// delivery is an event for the consumer, and the connection that brought
// it (to acknowledge a chat message on).
type delivery struct {
	ev   Event
	conn *Conn
}

// maxQueued bounds the events waiting for the consumer; the connection's
// reader waits beyond it.
const maxQueued = 4096

// outEntry is a message waiting for its receipt.
type outEntry struct {
	o       Outgoing
	gen     uint64    // the connection it was last written on (0: none)
	sentAt  time.Time // when it was written there
	retryAt time.Time // not before (after a BUSY or UNAVAILABLE refusal)
}

// StartSession logs cfg.User in at the first of cfg.Addrs that lets it, and
// keeps the login alive until Close. The first login must succeed before
// ctx ends (without a deadline, within cfg.Options.Timeout); its error
// says why not.
func StartSession(ctx context.Context, cfg SessionConfig) (*Session, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("client: no node address")
	}
	if cfg.User == "" {
		return nil, fmt.Errorf("client: login: %w: empty username", ErrInvalidMessage)
	}
	// Events is unbuffered: a message taken from it is one to acknowledge.
	s := &Session{cfg: cfg, events: make(chan Event), wake: make(chan struct{}, 1),
		changed: make(chan struct{}), qchanged: make(chan struct{}), delivered: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Options.Timeout)
		defer cancel()
	}
	conn, addr, err := s.connect(ctx, cfg.Addrs, nil, firstLogin(time.Now()))
	if err != nil {
		s.cancel()
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (gave up retrying)", err)
		}
		return nil, err
	}
	s.attach(conn, addr) // current at once: requests work as soon as this returns
	s.wg.Add(3)
	go s.run(conn, addr)
	go s.writer()
	go s.deliver()
	return s, nil
}

// Events delivers what the Session receives; it is closed after Close or
// after Disconnected. Keep receiving: the connection waits meanwhile.
func (s *Session) Events() <-chan Event { return s.events }

// User is the logged-in user.
func (s *Session) User() string { return s.cfg.User }

// Where reports the address and node id of the current connection, and
// whether there is one.
func (s *Session) Where() (addr string, node int64, connected bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr, s.node, s.conn != nil
}

// Post queues a chat message and returns it with its new id (UUIDv7). It
// is written as soon as a connection is up; its STORED receipt (or an
// ERROR naming its id) arrives on Events.
func (s *Session) Post(to Recipient, text string) (Outgoing, error) {
	switch {
	case text == "":
		return Outgoing{}, fmt.Errorf("client: send: %w: empty message", ErrInvalidMessage)
	case to.Name == "":
		return Outgoing{}, fmt.Errorf("client: send: %w: empty recipient", ErrInvalidMessage)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Outgoing{}, err
	}
	o := Outgoing{ID: id.String(), To: to, Text: text}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return Outgoing{}, ErrClosed
	case len(s.outbox) >= s.cfg.MaxOutbox:
		s.mu.Unlock()
		return Outgoing{}, fmt.Errorf("client: send to %s: %d messages are waiting to be sent already", to, len(s.outbox))
	}
	if err := TooLong(len(text), s.maxMessageLocked()); err != nil {
		s.mu.Unlock()
		return Outgoing{}, fmt.Errorf("client: send to %s: %w", to, err)
	}
	s.outbox = append(s.outbox, &outEntry{o: o})
	s.mu.Unlock()
	s.poke()
	return o, nil
}

// Pending lists the messages posted that have no receipt yet, in order.
func (s *Session) Pending() []Outgoing {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Outgoing, len(s.outbox))
	for i, e := range s.outbox {
		out[i] = e.o
	}
	return out
}

// Flush waits until every posted message has its receipt (or was
// refused), or ctx ends.
func (s *Session) Flush(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch, closed := len(s.outbox), s.changed, s.closed
		s.mu.Unlock()
		switch {
		case n == 0:
			return nil
		case closed:
			return fmt.Errorf("client: %s not sent: %w", messages(n), ErrClosed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("client: %s without receipt: %w", messages(n), ctx.Err())
		}
	}
}

func messages(n int) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}

// Join joins a group on the current connection.
func (s *Session) Join(ctx context.Context, group string) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("join %s: %w", group, err)
	}
	return c.Join(ctx, group)
}

// JoinInviteOnly joins a group, creating it invite-only if it is new.
func (s *Session) JoinInviteOnly(ctx context.Context, group string) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("join %s: %w", group, err)
	}
	return c.JoinInviteOnly(ctx, group)
}

// Invite lets user join an invite-only group the session's user is in.
func (s *Session) Invite(ctx context.Context, group, user string) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("invite %s: %w", user, err)
	}
	return c.Invite(ctx, group, user)
}

// SetPassword sets the user's password; the session logs in with it from
// then on.
func (s *Session) SetPassword(ctx context.Context, password string) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if err := c.SetPassword(ctx, password); err != nil {
		return err
	}
	s.mu.Lock()
	s.password = &password
	s.mu.Unlock()
	return nil
}

// Leave leaves a group on the current connection.
func (s *Session) Leave(ctx context.Context, group string) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("leave %s: %w", group, err)
	}
	return c.Leave(ctx, group)
}

// Who lists the users online in the ring.
func (s *Session) Who(ctx context.Context) ([]protocol.OnlineUser, error) {
	c, err := s.current()
	if err != nil {
		return nil, fmt.Errorf("who: %w", err)
	}
	return c.Who(ctx)
}

// Groups lists every group and whether the user is a member.
func (s *Session) Groups(ctx context.Context) ([]protocol.GroupInfo, error) {
	c, err := s.current()
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return c.Groups(ctx)
}

// History returns the last messages of a conversation, oldest first.
func (s *Session) History(ctx context.Context, with Recipient, limit int) ([]ChatMessage, error) {
	c, err := s.current()
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", with, err)
	}
	return c.History(ctx, with, limit)
}

// HistoryBefore returns the messages of a conversation before a sequence
// (0: the last ones), oldest first, with the other user's read mark.
func (s *Session) HistoryBefore(ctx context.Context, with Recipient, limit int, before int64) (History, error) {
	c, err := s.current()
	if err != nil {
		return History{}, fmt.Errorf("history of %s: %w", with, err)
	}
	return c.HistoryBefore(ctx, with, limit, before)
}

// SetAway sets the user's away message; an empty one clears it.
func (s *Session) SetAway(ctx context.Context, message string) (Away, error) {
	c, err := s.current()
	if err != nil {
		return Away{}, fmt.Errorf("away: %w", err)
	}
	return c.SetAway(ctx, message)
}

// Whois tells where a user is logged in, since when, and their away status.
func (s *Session) Whois(ctx context.Context, user string) (Whois, error) {
	c, err := s.current()
	if err != nil {
		return Whois{}, fmt.Errorf("whois %s: %w", user, err)
	}
	return c.Whois(ctx, user)
}

// Names lists one page of a group's members.
func (s *Session) Names(ctx context.Context, group, after string, limit int) (Names, error) {
	c, err := s.current()
	if err != nil {
		return Names{}, fmt.Errorf("names of %s: %w", group, err)
	}
	return c.Names(ctx, group, after, limit)
}

// Read tells the server (and the other user) that this user has read a
// user's messages up to seq. Offline, it is dropped: the next one says it.
func (s *Session) Read(ctx context.Context, user string, seq int64) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return c.Read(ctx, user, seq)
}

// Typing tells a user that this one is writing to them. Offline, it is
// dropped.
func (s *Session) Typing(ctx context.Context, user string) error {
	c, err := s.current()
	if err != nil {
		return fmt.Errorf("typing: %w", err)
	}
	return c.Typing(ctx, user)
}

// Close ends the session: the connection closes (the user logs out) and
// Events closes. Messages still in the outbox are not sent (Flush first).
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	conn := s.conn
	s.notifyLocked()
	s.mu.Unlock()
	s.cancel()
	<-s.delivered // the acknowledgement of the last message taken is queued
	if conn != nil {
		conn.Close() // sends it
	}
	s.wg.Wait()
	return nil
}

func (s *Session) current() (*Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case s.conn == nil:
		return nil, ErrOffline
	}
	return s.conn, nil
}

func (s *Session) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// emit queues ev for the consumer; conn is where a chat message came from.
func (s *Session) emit(ev Event, conn *Conn) {
	for {
		s.qmu.Lock()
		if len(s.queue) < maxQueued {
			s.queue = append(s.queue, delivery{ev, conn})
			close(s.qchanged)
			s.qchanged = make(chan struct{})
			s.qmu.Unlock()
			return
		}
		ch := s.qchanged
		s.qmu.Unlock()
		select {
		case <-ch:
		case <-s.ctx.Done():
			return
		}
	}
}

// deliver hands queued events to the consumer, and acknowledges each chat
// message once taken. It closes Events when run has ended and the queue
// is empty, or when the session is closed.
func (s *Session) deliver() {
	defer s.wg.Done()
	defer close(s.delivered)
	defer close(s.events)
	for {
		s.qmu.Lock()
		if len(s.queue) == 0 {
			done, ch := s.qdone, s.qchanged
			s.qmu.Unlock()
			if done {
				return
			}
			select {
			case <-ch:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		d := s.queue[0]
		s.queue = s.queue[1:]
		close(s.qchanged)
		s.qchanged = make(chan struct{})
		s.qmu.Unlock()
		select {
		case s.events <- d.ev:
			if m, ok := d.ev.(ChatMessage); ok && m.ID != "" && d.conn != nil {
				d.conn.queueAck(m.ID, m.Seq) // a closed connection drops it: the message comes again, and is skipped as seen
			}
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Session) finishQueue() {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.qdone = true
	close(s.qchanged)
	s.qchanged = make(chan struct{})
}

// retryable tells login refusals that pass (the previous connection is
// still being closed, the node is stopping, busy or full) from final ones.
// A session keeps trying a full node (with the reason shown each round);
// a one-shot DialV2 gives up once every node refused.
func retryable(err error) bool {
	var se *ServerError
	if !errors.As(err, &se) {
		return true // network errors, timeouts
	}
	return slices.Contains([]protocol.Code{protocol.CodeUserOnline, protocol.CodeShutdown, protocol.CodeUnavailable, protocol.CodeBusy, protocol.CodeServerFull, protocol.CodeTooManyConns}, se.Code)
}

// firstLogin is retryable for a Session's first login, begun at start:
// the user logged in elsewhere (USER_ONLINE) is final once loginGrace
// has passed (a connection of the user's own may still be closing), so
// that a name in use is said at once instead of after the timeout.
// Later logins (after a lost connection) wait it out: the user's
// presence at the node left is cleared when the ring splices it out.
func firstLogin(start time.Time) func(error) bool {
	return func(err error) bool {
		var se *ServerError
		if errors.As(err, &se) && se.Code == protocol.CodeUserOnline && time.Since(start) >= loginGrace {
			return false
		}
		return retryable(err)
	}
}

// connect runs rounds of login attempts over addrs until one succeeds, a
// refusal is final (retry says which are not), or ctx ends. onFail is
// told about each failed round.
func (s *Session) connect(ctx context.Context, addrs []string, onFail func(attempt int, err error, delay time.Duration), retry func(error) bool) (*Conn, string, error) {
	delay := s.cfg.RetryMin
	var last error
	for attempt := 1; ; attempt++ {
		for _, addr := range addrs {
			conn, err := s.login(ctx, addr)
			if err == nil {
				return conn, addr, nil
			}
			if ctx.Err() != nil {
				if last == nil {
					last = err
				}
				return nil, "", last
			}
			last = err
			if !retry(err) {
				return nil, "", err
			}
		}
		// Up to a fifth less, so that clients of one dead node do not
		// come back in step.
		d := delay - time.Duration(rand.Int64N(int64(delay)/5+1))
		if onFail != nil {
			onFail(attempt, last, d)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", last
		case <-t.C:
		}
		delay = min(2*delay, s.cfg.RetryMax)
	}
}

func (s *Session) login(ctx context.Context, addr string) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Options.Timeout)
	defer cancel()
	conn, err := Dial(ctx, addr, s.cfg.Options)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	password, leaving := s.cfg.Password, s.leaving
	if s.password != nil {
		password = *s.password
	}
	s.mu.Unlock()
	if err := conn.loginV2(ctx, s.cfg.User, password, leaving); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// run owns the connection: it forwards its events, and when it ends,
// logs in again.
func (s *Session) run(conn *Conn, addr string) {
	defer s.wg.Done()
	defer s.finishQueue()
	var from Connected // where it was, and why it left
	for reconnect := false; ; reconnect = true {
		if reconnect {
			resent, ok := s.attach(conn, addr)
			if !ok {
				conn.Close()
				return
			}
			s.emit(Connected{Addr: addr, Node: conn.Node(), Reconnect: true, Resent: resent, From: from.Addr, FromNode: from.Node, Why: from.Why}, nil)
		}
		stop := make(chan struct{})
		pinged := make(chan struct{})
		go func() { defer close(pinged); s.ping(conn, stop) }()
		for ev := range conn.Events() {
			s.handle(conn, ev)
		}
		close(stop)
		<-pinged
		err := s.detach(conn)
		conn.Close()
		if s.ctx.Err() != nil {
			return
		}
		from = Connected{Addr: addr, Node: conn.Node(), Why: err}
		s.emit(ConnectionLost{Addr: addr, Err: err}, nil)
		if conn, addr = s.reconnect(addr); conn == nil {
			return
		}
	}
}

// reconnect logs in again, at another node first, and returns the
// connection, or nil when the Session ends.
func (s *Session) reconnect(last string) (*Conn, string) {
	addrs := s.known()
	conn, addr, err := s.connect(s.ctx, rotate(addrs, last), func(attempt int, err error, delay time.Duration) {
		s.emit(Reconnecting{Attempt: attempt, Err: err, Delay: delay, Known: len(addrs)}, nil)
	}, retryable)
	if err != nil {
		if s.ctx.Err() == nil {
			s.emit(Disconnected{Err: err}, nil)
		}
		return nil, ""
	}
	return conn, addr
}

// known is the client ports to log in at: Addrs, then the ring's other
// nodes as the last login answer listed them.
func (s *Session) known() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := slices.Clone(s.cfg.Addrs)
	for _, n := range s.learned {
		if n.Addr != "" && !slices.Contains(addrs, n.Addr) {
			addrs = append(addrs, n.Addr)
		}
	}
	return addrs
}

// Nodes is the ring's nodes as the last login answer listed them
// (FeatureFailover; nil from a node that does not list them).
func (s *Session) Nodes() []protocol.NodeAddr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.learned)
}

// ping asks conn, every PingEvery until stop, whether the node answers,
// and drops the connection when an answer takes longer than PingTimeout:
// a stopped or cut-off node keeps its socket open, and would keep the
// Session waiting. Only a node that granted FeatureFailover is asked.
func (s *Session) ping(conn *Conn, stop <-chan struct{}) {
	if s.cfg.PingTimeout < 0 || !conn.Granted(protocol.FeatureFailover) {
		return
	}
	t := time.NewTicker(s.cfg.PingEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.PingTimeout)
		err := conn.Ping(ctx)
		cancel()
		switch {
		case err == nil:
			continue
		case errors.Is(err, context.DeadlineExceeded) && s.ctx.Err() == nil:
			s.leave(conn, fmt.Errorf("node %d at %s did not answer for %v", conn.Node(), conn.nc.RemoteAddr(), s.cfg.PingTimeout))
		}
		return
	}
}

// leave drops conn, the current connection, for why: run logs in again
// elsewhere.
func (s *Session) leave(conn *Conn, why error) {
	s.mu.Lock()
	if s.conn == conn && s.stalled == nil {
		s.stalled, s.leaving = why, conn.Node()
	}
	s.mu.Unlock()
	conn.Close()
}

// rotate orders addrs to start after last (which comes last): another node
// is tried first.
func rotate(addrs []string, last string) []string {
	i := slices.Index(addrs, last)
	if i < 0 {
		return addrs
	}
	return append(slices.Clone(addrs[i+1:]), addrs[:i+1]...)
}

// attach makes conn current and reports how many messages will be sent
// again on it. It keeps the ring's nodes the login answer listed, and
// hands them to OnNodes.
func (s *Session) attach(conn *Conn, addr string) (resent int, ok bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, false
	}
	s.conn, s.addr, s.node, s.stalled, s.leaving = conn, addr, conn.Node(), nil, 0
	s.gen++
	for _, e := range s.outbox {
		if e.gen != 0 {
			resent++
		}
	}
	nodes := conn.Nodes()
	if len(nodes) > 0 {
		s.learned = nodes
	}
	s.notifyLocked()
	s.mu.Unlock()
	s.poke()
	if len(nodes) > 0 && s.cfg.OnNodes != nil {
		s.cfg.OnNodes(nodes)
	}
	return resent, true
}

// detach forgets the ended connection and returns why it ended.
func (s *Session) detach(conn *Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == conn {
		s.conn = nil
		s.notifyLocked()
	}
	if s.stalled != nil {
		return s.stalled
	}
	if err := conn.Err(); err != nil {
		return err
	}
	return ErrServerClosed
}

// handle forwards one event of the connection, keeping the outbox.
func (s *Session) handle(conn *Conn, ev Event) {
	switch ev := ev.(type) {
	case Disconnected:
		return // run reports the end of the connection
	case ChatMessage:
		s.emit(ev, conn)
		return
	case Stored:
		s.settle(ev.ID)
	case ErrorMessage:
		if ev.ID != "" && s.refused(ev) {
			return
		}
	case Notice:
		if !ev.OK() && len(s.known()) > 1 {
			// Another node serves: the notice is why the Session moves
			// (ConnectionLost, then Connected tell it).
			s.leave(conn, errors.New(ev.Message))
			return
		}
	}
	s.emit(ev, nil)
}

// settle removes a message from the outbox.
func (s *Session) settle(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.indexLocked(id); i >= 0 {
		s.outbox = slices.Delete(s.outbox, i, i+1)
		s.notifyLocked()
	}
}

func (s *Session) indexLocked(id string) int {
	return slices.IndexFunc(s.outbox, func(e *outEntry) bool { return e.o.ID == id })
}

// refused handles an ERROR about a message of the outbox and reports
// whether to keep it from the caller: a refusal that passes (the node is
// busy, its store failed, it is stopping) sends the message again soon; any
// other removes it from the outbox and is delivered.
func (s *Session) refused(ev ErrorMessage) (hide bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.indexLocked(ev.ID)
	if i < 0 {
		return false
	}
	switch ev.Code {
	case protocol.CodeBusy, protocol.CodeUnavailable, protocol.CodeShutdown:
		const pause = 500 * time.Millisecond
		e := s.outbox[i]
		e.gen, e.retryAt = 0, time.Now().Add(pause)
		time.AfterFunc(pause, s.poke)
		return true
	}
	s.outbox = slices.Delete(s.outbox, i, i+1)
	s.notifyLocked()
	return false
}

// writer sends the outbox in order on the current connection, and drops a
// connection on which a message waits too long for its receipt.
func (s *Session) writer() {
	defer s.wg.Done()
	var tick <-chan time.Time
	if s.cfg.StallTimeout > 0 {
		t := time.NewTicker(max(s.cfg.StallTimeout/4, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
			s.send()
		case <-tick:
			s.checkStall()
		}
	}
}

func (s *Session) send() {
	for {
		s.mu.Lock()
		conn, gen := s.conn, s.gen
		// The first message not written on this connection is next: one
		// waiting to be retried holds the later ones back, keeping the
		// order of sending.
		var next *outEntry
		now := time.Now()
		if i := slices.IndexFunc(s.outbox, func(e *outEntry) bool { return e.gen != gen }); i >= 0 && !now.Before(s.outbox[i].retryAt) {
			next = s.outbox[i]
		}
		if conn == nil || next == nil {
			s.mu.Unlock()
			return
		}
		// Marked before writing, so that a refusal that arrives at once
		// is not overwritten.
		next.gen, next.sentAt = gen, now
		o := next.o
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Options.Timeout)
		err := conn.Resend(ctx, []Outgoing{o})
		cancel()
		if err != nil {
			return // the connection is lost: run reconnects, and the message is sent again
		}
	}
}

func (s *Session) checkStall() {
	s.mu.Lock()
	conn, gen := s.conn, s.gen
	var late bool
	for _, e := range s.outbox {
		if e.gen == gen && time.Since(e.sentAt) > s.cfg.StallTimeout {
			late = true
			break
		}
	}
	if conn == nil || !late {
		s.mu.Unlock()
		return
	}
	s.stalled = fmt.Errorf("no receipt from %s for %v: the node seems stalled", s.addr, s.cfg.StallTimeout)
	s.mu.Unlock()
	conn.Close() // run sees the end and reconnects
}
