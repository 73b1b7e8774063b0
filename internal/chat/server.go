package chat

// runs on: New and Listen on the assembling goroutine; Run, acceptLoop
// and the presence check (reconcileLoop, handlers.go) on their own
// goroutines; the connections' reader and writer goroutines (conn.go).
// Server's session table and connection counts are guarded by s.mu; a
// session's fields marked mu too. Nothing here holds s.mu while calling
// the queue (s.q, which has its own lock and calls the table with it
// held). The message queue's state is the queue's (internal/queue).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/store"
)

// Server is the client port of one node. New, then Listen (it binds the
// port and clears presence this node left behind), then Run until its
// context ends; Run returns once every goroutine has exited.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	st      store.Queue
	hashSem chan struct{}
	guard   *throttle // failed attempts per address (per account: in the store)
	names   nameCache
	opens   groupSet  // ids of groups known to be open (not invite-only)
	aways   awayCache // users' away status, for senders of direct messages
	stats   counters

	ln     net.Listener
	wg     sync.WaitGroup
	runCtx context.Context // ends when Run's context ends; bounds store calls of connections

	// q is the node's message queue: the token visits' work. It takes
	// the messages, acknowledgements, fetch requests and notices of the
	// connections, and hands receipts, deliveries and notices to the
	// sessions (sink.go).
	q *queue.Queue

	mu       sync.Mutex // guards the fields below
	conns    map[*conn]struct{}
	perIP    map[string]int      // open connections by source address
	sessions map[int64]*session  // by user id: logged in, logging in, or logging out
	closing  bool                // shutting down: no new connections or logins
	dirty    bool                // a presence row of ours may be stale (a clear failed)
	retry    chan struct{}       // wakes the presence check soon after dirty is set
	health   Health              // set by the node's assembly (SetHealth)
	nodes    []protocol.NodeAddr // the ring's nodes, for the LOGIN answer (SetNodes)
	// readySeq counts the sessions made ready; a presence check judges
	// only those made ready before it read the rows.
	readySeq uint64
}

// session is a user logged in (or logging in, or out) on a connection of
// this node. Fields marked mu are guarded by Server.mu.
type session struct {
	c       *conn
	userID  int64
	name    string
	version int
	// features: the notices asked for at LOGIN (featAway, ...).
	features int

	ready   bool // mu: visits deliver to it
	closing bool // mu: logging out; a new login of the user waits for gone
	gone    chan struct{}
	starved atomic.Bool // a visit left deliveries behind for lack of queue room
	// unacked maps the ids of protocol-2 deliveries not yet acknowledged
	// to their row (mu; a group message's with its group), so that ACKs
	// become rows removed, or cursors moved, in bulk.
	unacked map[string]openDelivery
	// handedMax is the highest sequence of the protocol-2 deliveries
	// handed to this session (mu): ACK_UPTO may not go past it.
	handedMax int64
	// ackedUpTo is the highest ACK_UPTO served (mu). Every delivery it
	// could take is taken, and one handed since has its after at or
	// above it: an ACK_UPTO at or below it takes nothing, and is not
	// looked into (a client repeating one costs no scan of unacked).
	ackedUpTo int64
	// readyAt is Server.readySeq when it was made ready (mu).
	readyAt uint64
}

// openDelivery is a protocol-2 delivery handed to a session and not yet
// acknowledged: its row, and after, the highest sequence handed to the
// session before it. ACK_UPTO n takes it only if its sequence is at most
// n and after is below n: the client has then received the delivery that
// carried a sequence of at least n, and so every one handed before that,
// this one included (a connection is one ordered stream).
type openDelivery struct {
	row   store.RecipientSeq
	after int64
}

// maxUnacked bounds a session's unacked map; ACKs of ids beyond it are
// applied by id, one statement per user.
const maxUnacked = 20_000

// Stats are counters of the server's life.
type Stats struct {
	Clients         int    // open connections now
	Sessions        int    // logged-in users now
	Accepted        uint64 // connections accepted
	Refused         uint64 // connections refused (SERVER_FULL, TOO_MANY_CONNECTIONS)
	Dropped         uint64 // connections closed by the server for bad behaviour
	PresenceCleared uint64 // stale presence rows removed
	// Stats are the message queue's counters (stored, delivered, visits,
	// the outbox...), promoted.
	queue.Stats
}

type counters struct {
	accepted, refused, dropped, presenceCleared atomic.Uint64
}

// New checks cfg and builds a server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Log.With().Str("part", "chat").Logger(),
		st:       newGatedStore(cfg.Store, cfg.StoreSlots),
		hashSem:  make(chan struct{}, cfg.HashWorkers),
		guard:    newThrottle(cfg.Throttle),
		conns:    map[*conn]struct{}{},
		perIP:    map[string]int{},
		sessions: map[int64]*session{},
		retry:    make(chan struct{}, 1),
		runCtx:   context.Background(),
	}
	s.names.init()
	q, err := queue.New(s.queueConfig(), (*sessionTable)(s))
	if err != nil {
		return nil, err
	}
	s.q = q
	return s, nil
}

// queueConfig is the configuration of the server's message queue.
func (s *Server) queueConfig() queue.Config {
	c := s.cfg
	return queue.Config{
		NodeID: c.NodeID, Log: s.log, Lookup: s.lookupQueued,
		OutboxLimit: c.OutboxLimit, BatchStart: c.BatchStart, BatchMax: c.BatchMax,
		FetchLimit: c.FetchLimit, FetchPerClient: c.FetchPerClient, SafetyFetch: c.SafetyFetch,
		Retention: c.Retention, PruneInterval: c.PruneInterval, PoisonStreak: c.PoisonStreak,
	}
}

// Queue is the server's message queue: the node runs its Visit at every
// token visit, and reads its Wants.
func (s *Server) Queue() *queue.Queue { return s.q }

// Listen binds the client port and clears the presence rows this node id
// left in the store (a crash or kill leaves them behind).
func (s *Server) Listen(ctx context.Context) error {
	if s.ln != nil {
		return errors.New("chat: already listening")
	}
	// Every accepted connection gets the keep-alive (a TLS one under its
	// TLS layer): dead peers are noticed, of sessions never closed for
	// silence too.
	lc := net.ListenConfig{KeepAliveConfig: s.cfg.KeepAlive}
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("chat: listen on %s: %w", s.cfg.Addr, err)
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	var n int
	err = s.st.Update(sctx, func(tx store.Tx) error {
		var err error
		n, err = tx.ClearNodePresence(s.cfg.NodeID)
		return err
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("chat: clear this node's old presence: %w", err)
	}
	if n > 0 {
		s.log.Info().Int("users", n).Msg("cleared presence left by an earlier run of this node")
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.ln = ln
	return nil
}

// Addr is the bound client port (after Listen).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// goFunc starts f on a goroutine that Run waits for.
func (s *Server) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Run serves clients until ctx ends. It then stops accepting, gives the
// token ShutdownDrain to store what clients sent, closes every connection
// with SHUTTING_DOWN, removes this node's presence rows and returns once
// every goroutine has exited. The token must keep visiting (the node keeps
// running) until Run returns.
func (s *Server) Run(ctx context.Context) error {
	if s.ln == nil {
		if err := s.Listen(ctx); err != nil {
			return err
		}
	}
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	s.mu.Lock()
	s.runCtx = work
	s.mu.Unlock()
	s.log.Info().Str("listen", s.ln.Addr().String()).Int("max_clients", s.cfg.MaxClients).Int("max_clients_per_ip", s.cfg.MaxClientsPerIP).Bool("tls", s.cfg.TLS != nil).Msg("chat: serving clients")
	s.goFunc(s.acceptLoop)
	s.goFunc(func() { s.reconcileLoop(work) })

	<-ctx.Done()
	s.ln.Close()
	s.drain()
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeWith(errorf(protocol.CodeShutdown, "server shutting down"))
	}
	stopWork()
	s.wg.Wait()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StoreTimeout)
	defer cancel()
	err := s.st.Update(cctx, func(tx store.Tx) error {
		_, err := tx.ClearNodePresence(s.cfg.NodeID)
		return err
	})
	if err != nil {
		s.log.Warn().Err(err).Msg("chat: could not clear presence at shutdown (the next start does)")
	}
	st := s.Stats()
	s.log.Info().Uint64("stored", st.Stored).Uint64("delivered", st.Delivered).Int("unsent", st.OutboxLen).Msg("chat: stopped")
	return nil
}

// drain waits (at most ShutdownDrain) until the token has stored every
// message queued here. New messages are refused meanwhile.
func (s *Server) drain() {
	if left := s.q.Drain(s.cfg.ShutdownDrain); left > 0 {
		s.log.Warn().Int("left", left).Msg("chat: stopping with messages or acknowledgements not stored")
	}
}

func (s *Server) acceptLoop() {
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn().Err(err).Dur("retry_in_ms", backoff).Msg("chat: accept failed")
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ip := sourceIP(nc.RemoteAddr())
		s.mu.Lock()
		switch {
		case s.closing:
			s.mu.Unlock()
			nc.Close()
		case len(s.conns) >= s.cfg.MaxClients:
			s.mu.Unlock()
			s.refuse(nc, errorf(protocol.CodeServerFull, "server full: %d clients; try another node", s.cfg.MaxClients))
		case s.perIP[ip] >= s.cfg.MaxClientsPerIP:
			s.mu.Unlock()
			s.log.Info().Str("remote", ip).Int("limit", s.cfg.MaxClientsPerIP).Msg("chat: refusing a connection: too many from one address")
			s.refuse(nc, errorf(protocol.CodeTooManyConns, "too many connections from %s: at most %d per address", ip, s.cfg.MaxClientsPerIP))
		default:
			if tc, ok := tcpConn(nc); ok && s.cfg.SocketBuffer > 0 {
				_ = tc.SetWriteBuffer(s.cfg.SocketBuffer)
			}
			c := newConn(s, nc, ip)
			s.conns[c] = struct{}{}
			s.perIP[ip]++
			s.mu.Unlock()
			s.stats.accepted.Add(1)
			s.goFunc(c.writeLoop)
			s.goFunc(c.readLoop)
		}
	}
}

// refuse writes the reason to a connection that is not served, and closes
// it. It never waits long: a fresh socket's buffer takes one line at once
// (over TLS the handshake comes first, bounded by the same deadline).
func (s *Server) refuse(nc net.Conn, e *Error) {
	s.stats.refused.Add(1)
	s.goFunc(func() {
		_ = nc.SetDeadline(time.Now().Add(refuseTimeout))
		// The code rides along (the connection's protocol is not known
		// yet; the original client's JSON reader ignores a field it does
		// not know), so a client can tell a full node from a lost one.
		_, _ = nc.Write(encodeError(protocol.V2, e))
		// Closing with the client's first lines unread would reset the
		// connection, and the client could lose the reason: shut our side,
		// read what comes (a little, within the deadline), then close.
		if cw, ok := nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(nc, refuseDrain))
		}
		nc.Close()
	})
}

// refuseTimeout bounds writing the reason to a refused connection.
const refuseTimeout = time.Second

// refuseDrain bounds what is read from a refused connection before it is
// closed.
const refuseDrain = 64 << 10

// sourceIP is the address connections are counted by: the remote IP.
func sourceIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// tcpConn is the TCP connection under nc (a TLS one included).
func tcpConn(nc net.Conn) (*net.TCPConn, bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	tc, ok := nc.(*net.TCPConn)
	return tc, ok
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{Clients: len(s.conns)}
	for _, sess := range s.sessions {
		if sess.ready {
			st.Sessions++
		}
	}
	s.mu.Unlock()
	st.Accepted, st.Refused, st.Dropped = s.stats.accepted.Load(), s.stats.refused.Load(), s.stats.dropped.Load()
	st.PresenceCleared = s.stats.presenceCleared.Load()
	st.Stats = s.q.Stats()
	return st
}

// storeCtx bounds a store call made for a client.
func (s *Server) storeCtx() (context.Context, context.CancelFunc) {
	s.mu.Lock()
	ctx := s.runCtx
	s.mu.Unlock()
	return context.WithTimeout(ctx, s.cfg.StoreTimeout)
}

// nameCache maps user and group names to ids. Users and groups are never
// deleted, so an id once seen stays right; unknown names are not cached.
type nameCache struct {
	mu     sync.Mutex
	users  map[string]int64
	groups map[string]int64
}

const nameCacheMax = 100_000

func (n *nameCache) init() {
	n.users, n.groups = map[string]int64{}, map[string]int64{}
}

func (n *nameCache) get(to Recipient) (int64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.users
	if to.Group {
		m = n.groups
	}
	id, ok := m[to.Name]
	return id, ok
}

func (n *nameCache) put(to Recipient, id int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := &n.users
	if to.Group {
		m = &n.groups
	}
	if len(*m) >= nameCacheMax {
		*m = map[string]int64{}
	}
	(*m)[to.Name] = id
}

// unknown is the refusal of a user or group name that does not exist.
func unknown(to Recipient) *Error {
	if to.Group {
		return errorf(protocol.CodeUnknownGroup, "no group %s (a group is created when someone joins it)", quote(to.Name))
	}
	return errorf(protocol.CodeUnknownUser, "no user %s (a user exists once they have logged in)", quote(to.Name))
}

// lookup resolves a recipient in tx: its id, or UNKNOWN_USER/UNKNOWN_GROUP.
func (s *Server) lookup(tx store.Tx, to Recipient) (int64, *Error, error) {
	if id, ok := s.names.get(to); ok {
		return id, nil, nil
	}
	id, err := store.RecipientID(tx, to.Name, to.Group)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, unknown(to), nil
	case err != nil:
		return 0, nil, err
	}
	s.names.put(to, id)
	return id, nil, nil
}

// lookupQueued resolves a queued message's recipient in a visit's
// transaction (queue.Config.Lookup): its id, or found false.
func (s *Server) lookupQueued(tx store.Tx, to queue.Recipient) (int64, bool, error) {
	id, refusal, err := s.lookup(tx, recipientOf(to))
	return id, refusal == nil, err
}
