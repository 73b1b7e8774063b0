// Package queue is the work a node does while it holds the token: it
// stores the messages its clients sent, fetches what is pending for the
// users logged in here and marks it delivered, applies their
// acknowledgements, prunes old history, and carries work hints and
// READ/TYPING notices round the ring in the token's App data, all in one
// transaction fenced by the token's stamp (Visit). Only after the commit
// do receipts and deliveries go to the sessions (Sessions, Sink), which
// belong to the chat service: the queue knows nothing of sockets.
//
// Wiring runs one way: the chat service submits work (Submit, Ack,
// Written, FetchFor, FetchAll, Notify); the queue asks for the token on
// Wants, a channel the node runtime reads; the node runs Visit at every
// token visit.
package queue

// runs on: Submit, Ack, Written, FetchFor, FetchAll, Notify, Drain and
// Stats on the chat service's goroutines (connections, the presence
// check); Visit on the node's visit goroutine. The fields of Queue under
// "guarded by q.mu" are shared between them; v is the visit goroutine's
// alone (visits of one node never overlap). Lock order: q.mu before the
// session table's lock (Sessions.Ready and Session are called with q.mu
// held; nothing of the chat service calls the queue with its own lock
// held).

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/store"
)

// Config configures a node's queue.
type Config struct {
	// NodeID is the node this queue belongs to.
	NodeID int64
	// Log receives the queue's log lines. They keep the wording they had
	// in the chat service ("chat: visit failed; ..."): the benchmark and
	// the end-to-end tests read them.
	Log zerolog.Logger
	// Lookup resolves a message's recipient in the visit's transaction:
	// its id, or found false for a name that does not exist.
	Lookup func(tx store.Tx, to Recipient) (id int64, found bool, err error)
	// OutboxLimit bounds the messages accepted here that wait for the token.
	OutboxLimit int
	// BatchStart and BatchMax bound the messages stored in one visit; the
	// batch adapts between 8 and BatchMax to the visit's time budget.
	BatchStart, BatchMax int
	// FetchLimit bounds the deliveries fetched in one visit, and
	// FetchPerClient those for one client.
	FetchLimit, FetchPerClient int
	// SafetyFetch: a node with clients fetches at least this often even if
	// the token's hints say nothing is pending here.
	SafetyFetch time.Duration
	// Retention is how long delivered messages stay for HISTORY; pruning
	// runs every PruneInterval. 0 keeps them forever.
	Retention     time.Duration
	PruneInterval time.Duration
	// PoisonStreak is how long one piece of work must have failed alone
	// with an error about its data before it is set aside (see poison).
	PoisonStreak time.Duration
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	switch {
	case c.NodeID < 1:
		return errors.New("queue: node id must be positive")
	case c.Lookup == nil:
		return errors.New("queue: no Lookup")
	case c.OutboxLimit < 1 || c.BatchStart < 1 || c.BatchMax < c.BatchStart:
		return errors.New("queue: OutboxLimit and BatchStart must be positive, BatchMax at least BatchStart")
	case c.FetchLimit < 1 || c.FetchPerClient < 1:
		return errors.New("queue: FetchLimit and FetchPerClient must be positive")
	case c.SafetyFetch <= 0:
		return errors.New("queue: SafetyFetch must be positive")
	case c.Retention < 0 || (c.Retention > 0 && c.PruneInterval <= 0):
		return errors.New("queue: Retention must not be negative, and needs a positive PruneInterval")
	case c.PoisonStreak < 0:
		return errors.New("queue: PoisonStreak must not be negative")
	}
	return nil
}

// Recipient is a message's addressee: a user or a group, by name.
type Recipient struct {
	Name  string
	Group bool
}

// Message is a message accepted from a client, stored at the next visit.
type Message struct {
	ID       string
	SenderID int64
	To       Recipient
	Content  string
	SentAt   time.Time
	// Version is the sender's protocol: a protocol-1 sender of a group
	// message is shown it too.
	Version int
	// From is the sender's session: the receipt goes there (it may have
	// closed meanwhile).
	From Sink
}

// Receipt is the outcome of a message a visit stored, or refused.
type Receipt struct {
	Msg    *Message
	Seq    int64
	SentAt time.Time // as stored
	// Unknown: the recipient does not exist (nothing was stored).
	Unknown bool
	// SetAside: the store refuses the message while it takes other work;
	// it is not stored and never will be.
	SetAside bool
}

// Sink is one session at this node as the queue sees it; the chat
// service's sessions implement it. Its methods are called on the visit
// goroutine, after the visit's commit, and must never wait on a client.
type Sink interface {
	// Version is the session's protocol.
	Version() int
	// Room is how many deliveries the session's queue takes now.
	Room() int
	// Starve notes that a visit left deliveries behind for lack of room:
	// the session asks for a fetch (FetchFor) when it has room again.
	Starve()
	// Receipt answers a message this session sent.
	Receipt(r Receipt)
	// Notice hands over a READ or TYPING notice for the session's user,
	// if the session asked for notices of its kind.
	Notice(n Notice)
}

// Delivery is one message handed to one session.
type Delivery struct {
	To Sink
	D  store.Delivery
}

// Sessions is the node's table of sessions (the chat service's).
type Sessions interface {
	// Ready returns the sessions visits deliver to now, by user id, in a
	// new map the caller owns.
	Ready() map[int64]Sink
	// Session returns user's session here (nil if there is none: one
	// logging in or out is there, and not ready).
	Session(user int64) (sess Sink, ready bool)
	// Deliver hands the visit's deliveries to their sessions' queues, in
	// order, without waiting, and returns the rows of those whose session
	// is gone (they are made pending again for the user's next session).
	Deliver(ds []Delivery) (lost []store.RecipientSeq)
}

// Errors of Submit.
var (
	ErrDraining = errors.New("queue: shutting down: no new messages")
	ErrFull     = errors.New("queue: outbox full")
)

// Queue is a node's message queue: the work its token visits do.
type Queue struct {
	cfg      Config
	log      zerolog.Logger
	sessions Sessions
	wants    chan struct{}
	stats    counters

	mu       sync.Mutex // guards the fields below, down to v
	outbox   []*Message // messages accepted here, waiting for the token
	notices  []Notice   // READ and TYPING notices waiting for the token
	acks     []store.RecipientSeq
	ackIDs   map[int64][]string // protocol-2 ACKs by user id
	ackCount int
	fetchReq uint64 // bumped when every local user needs a fetch (presence restored)
	// fetchFor: users whose own pending messages the next visit reads
	// (logged in, room again in their queue, got some in the last fetch,
	// named by a hint): a fetch for them alone reads only their rows.
	fetchFor map[int64]ask
	asks     uint64 // asks made, for their order
	more     bool   // the last fetch of every user left deliveries behind
	draining bool   // shutting down: no new messages
	visited  chan struct{}

	// Owned by the visit goroutine (visits of one node never overlap).
	v visitState
}

type counters struct {
	queued, stored, delivered, visits, storeVisits, failedVisits atomic.Uint64
	poisoned, pruned, fetchesCut                                 atomic.Uint64
}

// Stats are counters of the queue's life.
type Stats struct {
	Queued       uint64 // messages accepted from clients
	Stored       uint64 // messages stored by this node's visits
	Delivered    uint64 // deliveries handed to sessions
	Visits       uint64 // token visits
	StoreVisits  uint64 // visits that opened a store transaction
	FailedVisits uint64 // visits whose transaction failed (nothing committed)
	Poisoned     uint64 // pieces of work set aside after failing alone
	FetchesCut   uint64 // fetches stopped at their share of a visit (the visit committed)
	Pruned       uint64 // old messages pruned
	OutboxLen    int    // messages waiting for the token
	PendingAcks  int    // acknowledgements waiting for the token: rows and ids
	StrayAcks    int    // of them, the ids to look up in the store
	FetchAsked   int    // users whose pending messages a visit is to read (asked at login, or known to have some)
}

// New checks cfg and builds a queue whose results go to sessions.
func New(cfg Config, sessions Sessions) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sessions == nil {
		return nil, errors.New("queue: no sessions")
	}
	q := &Queue{
		cfg:      cfg,
		log:      cfg.Log,
		sessions: sessions,
		wants:    make(chan struct{}, 1),
		ackIDs:   map[int64][]string{},
		fetchFor: map[int64]ask{},
		visited:  make(chan struct{}),
	}
	q.v.batch = cfg.BatchStart
	q.v.fetchMax = cfg.FetchLimit
	q.v.pruneSlice = pruneSliceStart
	// The first prune comes a minute after start (or after the interval,
	// if shorter), not in the storm of reconnecting clients a (re)started
	// node meets.
	q.v.lastPrune = time.Now().Add(min(cfg.PruneInterval, firstPruneAfter) - cfg.PruneInterval)
	q.v.ackMax = maxAckRows
	return q, nil
}

// Wants signals that the queue has work for the token: the node runtime
// reads it and asks the ring for the token (node.Config.Wants).
func (q *Queue) Wants() <-chan struct{} { return q.wants }

// want asks for the token; it never blocks.
func (q *Queue) want() {
	select {
	case q.wants <- struct{}{}:
	default:
	}
}

// Submit queues a message for the next visit: ErrDraining while shutting
// down, ErrFull with OutboxLimit messages waiting.
func (q *Queue) Submit(m *Message) error {
	q.mu.Lock()
	var err error
	switch {
	case q.draining:
		err = ErrDraining
	case len(q.outbox) >= q.cfg.OutboxLimit:
		err = ErrFull
	default:
		q.outbox = append(q.outbox, m)
	}
	q.mu.Unlock()
	if err != nil {
		return err
	}
	q.stats.queued.Add(1)
	q.want()
	return nil
}

// maxAckBacklog bounds the acknowledgements waiting at a node for the
// token; past it a client's ACKs are refused with BUSY (sent again, they
// are taken later).
const maxAckBacklog = 200_000

// maxStrayAcks bounds the acknowledged ids of one user waiting to be
// looked up in the store (ids that are not the session's open
// deliveries); the rest are dropped: their messages only come again.
const maxStrayAcks = 1000

// Ack queues a user's protocol-2 acknowledgements for the next visit: rows
// (the session's open deliveries) and ids to look up in the store (at most
// maxStrayAcks waiting per user, the rest dropped). It takes nothing and
// returns false if the backlog would grow past its bound.
func (q *Queue) Ack(user int64, rows []store.RecipientSeq, ids []string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.acks)+q.ackCount+len(rows)+len(ids) > maxAckBacklog {
		return false
	}
	q.acks = append(q.acks, rows...)
	for _, id := range ids {
		if len(q.ackIDs[user]) >= maxStrayAcks {
			break
		}
		q.ackIDs[user] = append(q.ackIDs[user], id)
		q.ackCount++
	}
	return true
}

// Written records protocol-1 deliveries written to their socket: they are
// removed from the queue at the next visit (protocol 1 has no ACK).
func (q *Queue) Written(rows []store.RecipientSeq) {
	q.mu.Lock()
	q.acks = append(q.acks, rows...)
	q.mu.Unlock()
}

// FetchFor makes the next visit fetch the user's deliveries: its queue
// has room again for deliveries left behind.
func (q *Queue) FetchFor(user int64) {
	q.mu.Lock()
	q.askFetch(user, false)
	q.mu.Unlock()
	q.want()
}

// LoggedIn makes a visit soon fetch what waits for a user who has just
// logged in here. Such a fetch usually finds nothing (what the user was
// sent is mostly acknowledged), and a crowd logging in at once would
// make every visit long (see askedUsers).
func (q *Queue) LoggedIn(user int64) {
	q.mu.Lock()
	q.askFetch(user, true)
	q.mu.Unlock()
	q.want()
}

// An ask is a user's place in fetchFor.
type ask struct {
	seq   uint64 // when it was asked, for the order
	login bool   // asked by the login alone: nothing is known to wait
}

// askFetch puts a user in fetchFor, as asked at login (login) or known to
// have deliveries waiting; a user asked both ways is the second. Caller
// holds q.mu.
func (q *Queue) askFetch(user int64, login bool) {
	a, ok := q.fetchFor[user]
	if !ok {
		q.asks++
		a = ask{seq: q.asks, login: login}
	}
	a.login = a.login && login
	q.fetchFor[user] = a
}

// FetchAll makes the next visit fetch deliveries for every user here.
func (q *Queue) FetchAll() {
	q.mu.Lock()
	q.fetchReq++
	q.mu.Unlock()
	q.want()
}

// Drain stops taking messages and waits, at most limit, until the token
// has stored every message and acknowledgement queued here. It returns
// how many are left.
func (q *Queue) Drain(limit time.Duration) int {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		q.mu.Lock()
		q.draining = true
		left := len(q.outbox) + len(q.acks) + q.ackCount
		visited := q.visited
		q.mu.Unlock()
		if left == 0 {
			return 0
		}
		q.want()
		select {
		case <-visited:
		case <-deadline.C:
			return left
		}
	}
}

// Stats returns a snapshot of the counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	st := Stats{OutboxLen: len(q.outbox), PendingAcks: len(q.acks) + q.ackCount, StrayAcks: q.ackCount, FetchAsked: len(q.fetchFor)}
	q.mu.Unlock()
	st.Queued, st.Stored, st.Delivered = q.stats.queued.Load(), q.stats.stored.Load(), q.stats.delivered.Load()
	st.Visits, st.StoreVisits, st.FailedVisits = q.stats.visits.Load(), q.stats.storeVisits.Load(), q.stats.failedVisits.Load()
	st.Poisoned, st.Pruned, st.FetchesCut = q.stats.poisoned.Load(), q.stats.pruned.Load(), q.stats.fetchesCut.Load()
	return st
}

// visitedNotify wakes those waiting for a visit (Drain).
func (q *Queue) visitedNotify() {
	q.mu.Lock()
	close(q.visited)
	q.visited = make(chan struct{})
	q.mu.Unlock()
}
