package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/protocol"
)

// maxAckBatch bounds the ids of one ACK line: half what a node takes.
const maxAckBatch = protocol.MaxAckIDs / 2

// Outgoing is a protocol-2 message sent but not yet stored.
type Outgoing struct {
	ID   string
	To   Recipient
	Text string
}

// Seen is a bounded set of message ids, for deduplication across
// reconnects. It is safe for concurrent use.
type Seen struct {
	mu    sync.Mutex
	max   int
	ids   map[string]struct{}
	order []string
}

// NewSeen returns a set remembering the last max ids (0: 100,000).
func NewSeen(max int) *Seen {
	if max <= 0 {
		max = 100_000
	}
	return &Seen{max: max, ids: map[string]struct{}{}}
}

// Add records id and reports whether it is new.
func (s *Seen) Add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		return false
	}
	if len(s.order) >= s.max {
		delete(s.ids, s.order[0])
		s.order = s.order[1:]
	}
	s.ids[id] = struct{}{}
	s.order = append(s.order, id)
	return true
}

// Remove forgets id, so that it counts as new again.
func (s *Seen) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; !ok {
		return
	}
	delete(s.ids, id)
	if i := slices.Index(s.order, id); i >= 0 {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

// Has reports whether id was added.
func (s *Seen) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func newChatV2(o Outgoing) protocol.ChatRequest {
	w := protocol.ChatRequest{MessageType: protocol.TypeChatMessage, ID: o.ID, MessageContent: o.Text}
	if o.To.Group {
		w.ToGroup = o.To.Name
	} else {
		w.ToUsername = o.To.Name
	}
	return w
}

// Version is the protocol spoken: 2 after LoginV2, else 1.
func (c *Conn) Version() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func (c *Conn) newID() string { return "r" + strconv.FormatUint(c.reqSeq.Add(1), 10) }

// call writes a protocol-2 request (a struct whose ID field is set) and
// waits for the answer naming its id.
func (c *Conn) call(ctx context.Context, msg any) (Event, error) {
	b, err := marshal(msg)
	if err != nil {
		return nil, err
	}
	var id string
	switch m := msg.(type) {
	case protocol.LoginRequest:
		id = m.ID
	case protocol.GroupV2:
		id = m.ID
	case protocol.AccountRequest:
		id = m.ID
	case protocol.InviteV2:
		id = m.ID
	case protocol.QueryRequest:
		id = m.ID
	case protocol.ChatRequest:
		id = m.ID
	case protocol.StatusRequest:
		id = m.ID
	case protocol.AliveV2:
		id = m.ID
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	r := &request{id: id, done: make(chan error, 1)}
	c.wmu.Lock()
	if err := c.enqueue(r); err != nil {
		c.wmu.Unlock()
		return nil, err
	}
	err = c.writeBytesLocked(ctx, b)
	c.wmu.Unlock()
	if err != nil {
		c.dequeue(r)
		return nil, err
	}
	select {
	case err := <-r.done:
		return r.reply, err
	case <-ctx.Done():
		if err, answered := c.abandon(r); answered {
			return r.reply, err
		}
		return nil, ctx.Err()
	}
}

// LoginV2 logs in with protocol 2. A non-empty password claims the name on
// its first use and is required from then on. A refusal is a *ServerError
// (Code USER_ONLINE: logged in elsewhere; BAD_PASSWORD; ...).
func (c *Conn) LoginV2(ctx context.Context, user, password string) error {
	if user == "" {
		return fmt.Errorf("client: login: %w: empty username", ErrInvalidMessage)
	}
	return c.loginV2(ctx, user, password, 0)
}

// loginV2 is LoginV2 from a client that has just left node leaving (0:
// none) because it stopped answering or said it cannot serve: the node
// replaces the user's presence there (FeatureFailover).
func (c *Conn) loginV2(ctx context.Context, user, password string, leaving int64) error {
	if _, err := c.call(ctx, protocol.LoginRequest{MessageType: protocol.TypeLogin, Username: user, Version: protocol.V2,
		Password: password, Features: c.loginFeatures(), Leaving: leaving, ID: c.newID()}); err != nil {
		return fmt.Errorf("login %s: %w", user, err)
	}
	return nil
}

// Register makes an account with a password (protocol 2; before or
// instead of logging in). It does not log in. A name in use is refused
// (*ServerError, Code NAME_TAKEN).
func (c *Conn) Register(ctx context.Context, user, password string) error {
	if user == "" || password == "" {
		return fmt.Errorf("client: register: %w: empty username or password", ErrInvalidMessage)
	}
	if _, err := c.call(ctx, protocol.AccountRequest{MessageType: protocol.TypeRegister, Username: user, Password: password, ID: c.newID()}); err != nil {
		return fmt.Errorf("register %s: %w", user, err)
	}
	return nil
}

// SetPassword sets or replaces the logged-in user's password (protocol
// 2): from then on every login of the name needs it.
func (c *Conn) SetPassword(ctx context.Context, password string) error {
	if password == "" {
		return fmt.Errorf("client: set password: %w: empty password", ErrInvalidMessage)
	}
	if _, err := c.call(ctx, protocol.AccountRequest{MessageType: protocol.TypeSetPassword, Password: password, ID: c.newID()}); err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	return nil
}

// JoinInviteOnly joins a group, creating it invite-only if it does not
// exist (protocol 2). An existing open group of that name is refused.
func (c *Conn) JoinInviteOnly(ctx context.Context, group string) error {
	if _, err := c.call(ctx, protocol.GroupV2{MessageType: protocol.TypeJoinGroup, Group: group, InviteOnly: true, ID: c.newID()}); err != nil {
		return fmt.Errorf("join %s: %w", group, err)
	}
	return nil
}

// Invite lets user join the invite-only group this user is a member of
// (protocol 2).
func (c *Conn) Invite(ctx context.Context, group, user string) error {
	if _, err := c.call(ctx, protocol.InviteV2{MessageType: protocol.TypeInvite, Group: group, Username: user, ID: c.newID()}); err != nil {
		return fmt.Errorf("invite %s to %s: %w", user, group, err)
	}
	return nil
}

// Post sends a chat message with a new id (UUIDv7) and returns the id
// without waiting: its STORED receipt (or ERROR) arrives on Events. Until
// then it is in Unstored.
func (c *Conn) Post(ctx context.Context, to Recipient, text string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	o := Outgoing{ID: id.String(), To: to, Text: text}
	if err := c.post(ctx, o); err != nil {
		return "", fmt.Errorf("send to %s: %w", to, err)
	}
	return o.ID, nil
}

func (c *Conn) post(ctx context.Context, o Outgoing) error {
	if c.Version() < 2 {
		return errors.New("client: protocol 2 needs LoginV2")
	}
	b, err := marshal(newChatV2(o))
	if err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.unstored = append(c.unstored, o)
	c.mu.Unlock()
	return c.writeBytesLocked(ctx, b)
}

// SendWait sends a chat message (protocol 2) and waits for its STORED
// receipt; a refusal is a *ServerError. A message the node dropped because
// this connection sent lines too fast (RATE_LIMITED) is sent again with its
// id after a pause (rateLimitPause, doubling while it is dropped), until it
// is stored or ctx ends (then the refusal is returned).
func (c *Conn) SendWait(ctx context.Context, to Recipient, text string) (Stored, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Stored{}, err
	}
	o := Outgoing{ID: id.String(), To: to, Text: text}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	for pause := rateLimitPause; ; pause = min(2*pause, rateLimitPauseMax) {
		c.mu.Lock()
		c.unstored = append(c.unstored, o)
		c.mu.Unlock()
		ev, err := c.call(ctx, newChatV2(o))
		if err == nil {
			st, _ := ev.(Stored)
			return st, nil
		}
		var se *ServerError
		if !errors.As(err, &se) || se.Code != protocol.CodeRateLimited || !sleepCtx(ctx, pause) {
			return Stored{}, fmt.Errorf("send to %s: %w", to, err)
		}
	}
}

// rateLimitPause is SendWait's first pause before it sends again a message
// the node dropped for its rate limit: a line's worth at the default limit
// of 50 lines a second. It doubles while the node drops the message, up to
// rateLimitPauseMax.
const (
	rateLimitPause    = 20 * time.Millisecond
	rateLimitPauseMax = time.Second
)

// sleepCtx waits d, or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Unstored lists, in sending order, the messages sent on this connection
// that have neither a STORED receipt nor an ERROR. After a disconnect,
// Resend them on the next connection: the server stores an id once.
func (c *Conn) Unstored() []Outgoing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.unstored)
}

// Resend sends messages again with their ids (after a reconnect).
func (c *Conn) Resend(ctx context.Context, msgs []Outgoing) error {
	for _, o := range msgs {
		if err := c.post(ctx, o); err != nil {
			return fmt.Errorf("resend %s: %w", o.ID, err)
		}
	}
	return nil
}

func (c *Conn) dropUnstored(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unstored = slices.DeleteFunc(c.unstored, func(o Outgoing) bool { return o.ID == id })
}

// Ack acknowledges messages (protocol 2): the server removes them from the
// queue. A message not acknowledged is delivered again after a reconnect.
func (c *Conn) Ack(ctx context.Context, ids ...string) error {
	for chunk := range slices.Chunk(ids, maxAckBatch) {
		if err := c.tell(ctx, protocol.AckRequest{MessageType: protocol.TypeAck, IDs: chunk}); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	return nil
}

// queueAck hands a received message to the acknowledgement goroutine
// (the reader never writes): its id, or, on a connection that
// acknowledges cumulatively, its place among those received.
func (c *Conn) queueAck(id string, seq int64) {
	c.ackMu.Lock()
	if !c.ackDone(seq) {
		c.ackBuf = append(c.ackBuf, id)
	}
	c.ackMu.Unlock()
	select {
	case c.ackWake <- struct{}{}:
	default:
	}
}

// ackLoop sends queued acknowledgements in batches.
func (c *Conn) ackLoop() {
	defer c.bg.Done()
	for {
		select {
		case <-c.readerDone:
			return
		case <-c.closingCh:
			return
		case <-c.ackWake:
		}
		c.sendAcks(0)
	}
}

// sendAcks writes the queued acknowledgements, within timeout (zero: the
// connection's timeout). A failed write ends the connection.
func (c *Conn) sendAcks(timeout time.Duration) {
	c.ackSend.Lock()
	defer c.ackSend.Unlock()
	c.ackMu.Lock()
	ids := c.ackBuf
	c.ackBuf = nil
	upTo := c.ackFrontier()
	c.ackMu.Unlock()
	if len(ids) == 0 && upTo == 0 {
		return
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	if upTo > 0 {
		_ = c.AckUpTo(ctx, upTo)
	}
	if len(ids) > 0 {
		_ = c.Ack(ctx, ids...)
	}
}

// keepAlive sends ALIVE every KeepAlive.
func (c *Conn) keepAlive() {
	defer c.bg.Done()
	t := time.NewTicker(c.opts.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.readerDone:
			return
		case <-c.closingCh:
			return
		case <-t.C:
		}
		ctx, cancel := c.withTimeout(context.Background())
		c.wmu.Lock()
		_ = c.writeLocked(ctx, Alive{})
		c.wmu.Unlock()
		cancel()
	}
}

// Who lists the users online in the ring and their nodes (protocol 2).
func (c *Conn) Who(ctx context.Context) ([]protocol.OnlineUser, error) {
	ev, err := c.call(ctx, protocol.QueryRequest{MessageType: protocol.TypeWho, ID: c.newID()})
	if err != nil {
		return nil, fmt.Errorf("who: %w", err)
	}
	w, _ := ev.(Who)
	return w.Users, nil
}

// Groups lists every group, its size and whether this user is a member
// (protocol 2).
func (c *Conn) Groups(ctx context.Context) ([]protocol.GroupInfo, error) {
	ev, err := c.call(ctx, protocol.QueryRequest{MessageType: protocol.TypeGroups, ID: c.newID()})
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	g, _ := ev.(Groups)
	return g.Groups, nil
}

// History returns the last limit (0: the server's default) messages
// between this user and a user, or of a group this user is a member of,
// oldest first (protocol 2).
func (c *Conn) History(ctx context.Context, with Recipient, limit int) ([]ChatMessage, error) {
	h, err := c.HistoryBefore(ctx, with, limit, 0)
	return h.Messages, err
}

// HistoryBefore returns up to limit messages of a conversation older than
// sequence before (0: the last ones), oldest first, with how far the other
// user has read this user's messages (History.ReadSeq; protocol 2).
func (c *Conn) HistoryBefore(ctx context.Context, with Recipient, limit int, before int64) (History, error) {
	q := protocol.QueryRequest{MessageType: protocol.TypeHistory, ID: c.newID(), Limit: limit, Before: before}
	if with.Group {
		q.ToGroup = with.Name
	} else {
		q.ToUsername = with.Name
	}
	ev, err := c.call(ctx, q)
	if err != nil {
		return History{}, fmt.Errorf("history of %s: %w", with, err)
	}
	h, _ := ev.(History)
	return h, nil
}

// ErrNothingListens is DialV2's error (with Options.FailFast) when no node
// of the list accepts a connection: the ring is not running there.
var ErrNothingListens = errors.New("client: nothing listens")

// loginGrace is how long a FailFast login retries USER_ONLINE: the user's
// own previous connection (a command run just before) may still be
// closing at its node.
const loginGrace = time.Second

// loginRefused judges, for DialV2, a login to one of nodes refused with
// err, refused being the nodes in a row that were full before: it returns
// that count after this refusal, and whether the refusal ends the dial.
// It does when every node in a row is full, when waiting cannot help (a
// wrong password, a bad name), or, with failFast, when the user is still
// logged in elsewhere loginGrace after start.
func loginRefused(err error, refused, nodes int, failFast bool, start time.Time) (int, bool) {
	var se *ServerError
	switch {
	case errors.As(err, &se) && (se.Code == protocol.CodeServerFull || se.Code == protocol.CodeTooManyConns):
		// Another node may have room; when none has, say why.
		refused++
		return refused, refused >= nodes
	case errors.As(err, &se) && !slices.Contains([]protocol.Code{protocol.CodeUserOnline, protocol.CodeShutdown, protocol.CodeUnavailable, protocol.CodeBusy}, se.Code):
		return refused, true
	case errors.As(err, &se) && se.Code == protocol.CodeUserOnline && failFast && time.Since(start) >= loginGrace:
		return refused, true // logged in elsewhere: the server said so
	default:
		return 0, false
	}
}

// countUntrusted returns the count of nodes in a row whose certificate did
// not verify, after err: one more if err is such a failure, 0 otherwise.
func countUntrusted(err error, untrusted int) int {
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		return untrusted + 1
	}
	return 0
}

// DialV2 connects to the first of addrs that lets user log in with
// protocol 2, trying them in turn until ctx ends: a node that is down, or a
// login refused because the user's previous connection is still being
// closed (USER_ONLINE, SHUTTING_DOWN, UNAVAILABLE), is tried again after a
// short pause. Wrong passwords and other refusals end it at once, and so
// does a certificate that does not verify on every node in a row. Pass the
// previous connection's Options (its Seen) to keep deduplicating, and
// Resend its Unstored messages.
func DialV2(ctx context.Context, addrs []string, user, password string, opts Options) (*Conn, error) {
	if len(addrs) == 0 {
		return nil, errors.New("client: no node address")
	}
	pause := 50 * time.Millisecond
	start := time.Now()
	var last error
	refused := 0   // nodes in a row that refused the connection (full)
	silent := 0    // nodes in a row on which nothing listens
	untrusted := 0 // nodes in a row whose certificate did not verify
	for i := 0; ; i++ {
		addr := addrs[i%len(addrs)]
		c, err := Dial(ctx, addr, opts)
		if errors.Is(err, syscall.ECONNREFUSED) {
			if silent++; opts.FailFast && silent >= len(addrs) {
				return nil, fmt.Errorf("%w at %s", ErrNothingListens, strings.Join(addrs, ", "))
			}
		} else {
			silent = 0
		}
		if untrusted = countUntrusted(err, untrusted); untrusted >= len(addrs) {
			return nil, err // waiting cannot make a certificate verify
		}
		if err == nil {
			if err = c.LoginV2(ctx, user, password); err == nil {
				return c, nil
			}
			c.Close()
			var end bool
			if refused, end = loginRefused(err, refused, len(addrs), opts.FailFast, start); end {
				return nil, err
			}
		}
		last = err
		if i%len(addrs) == len(addrs)-1 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("client: no node let %s log in: %w (last: %v)", user, ctx.Err(), last)
			case <-t.C:
			}
			pause = min(2*pause, time.Second)
		}
	}
}
