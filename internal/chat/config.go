package chat

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/store"
)

// Observer takes one measurement; a Prometheus histogram is one.
type Observer interface{ Observe(float64) }

// Config configures a chat server.
type Config struct {
	// NodeID is the node this server belongs to (presence is recorded
	// under it).
	NodeID int64
	// Store is the shared store; the server does not close it.
	Store store.Queue
	// Addr is the client port's listen address ("host:port").
	Addr string
	// DeliveryLatency, if set, observes each delivery's latency in
	// seconds: from the sender's node accepting the message to handing it
	// to the recipient's connection (metrics).
	DeliveryLatency Observer
	// Log receives the server's log lines.
	Log zerolog.Logger

	// TLS, if set, serves the client port over TLS with this
	// configuration (it must hold a certificate).
	TLS *tls.Config

	// MaxClients bounds open client connections; more are refused with
	// SERVER_FULL.
	MaxClients int
	// MaxClientsPerIP bounds the open connections from one source address;
	// more are refused with TOO_MANY_CONNECTIONS, so that one host cannot
	// take every slot.
	MaxClientsPerIP int
	// WriteQueue bounds the lines waiting to be written to one client; a
	// client whose queue overflows is dropped (SLOW_CONSUMER).
	WriteQueue int
	// WriteTimeout drops a client that accepts no bytes for this long.
	WriteTimeout time.Duration
	// SocketBuffer is the kernel send buffer of a client socket (0: the
	// system's default, which on Linux grows to megabytes per socket).
	SocketBuffer int
	// IdleTimeout closes a protocol-2 session that sent nothing (not even
	// ALIVE) for this long: half-open connections do not hold a slot
	// forever. A protocol-1 session is never closed for silence: the
	// original client sends no ALIVE, so its silence says nothing about
	// it; KeepAlive finds its dead peers.
	IdleTimeout time.Duration
	// KeepAlive is the TCP keep-alive of accepted client connections (the
	// TCP connection under TLS included): after Idle with nothing from the
	// peer, a probe every Interval; Count probes unanswered and the socket
	// fails, which closes the connection as a reset does. It is what
	// notices a dead peer of a protocol-1 session (never closed for
	// silence), or of a protocol-2 one before IdleTimeout. It must be
	// enabled, with positive values.
	KeepAlive net.KeepAliveConfig
	// LoginTimeout bounds the time from accepting a connection to its
	// login (the TLS handshake included). The deadline is fixed at accept:
	// blank lines, ALIVE or failed logins do not extend it, so connections
	// that never log in cannot hold the slots for long.
	LoginTimeout time.Duration
	// RateLimit and RateBurst bound the lines per second of one connection
	// (a token bucket); 0 disables the limit. Lines over the limit are
	// dropped with RATE_LIMITED (the first of a run, and every protocol-2
	// request by its id); FloodLimit such lines in a row close the
	// connection (FLOOD).
	RateLimit  float64
	RateBurst  int
	FloodLimit int
	// StoreTimeout bounds one store operation made for a client (login,
	// join, WHO, ...), waiting for a slot included.
	StoreTimeout time.Duration
	// StoreSlots bounds the store transactions this node runs for its
	// clients at once (logins, joins, WHO, HISTORY, presence); more wait
	// for a slot. The token's visits never wait for one.
	StoreSlots int
	// The fields from OutboxLimit to PoisonStreak configure the node's
	// message queue (internal/queue: the token visits' work), which New
	// builds.

	// OutboxLimit bounds the messages accepted here that wait for the token.
	OutboxLimit int
	// BatchStart and BatchMax bound the messages stored in one visit; the
	// batch adapts between 8 and BatchMax to the visit's time budget.
	BatchStart, BatchMax int
	// FetchLimit bounds the deliveries fetched in one visit, and
	// FetchPerClient those for one client.
	FetchLimit, FetchPerClient int
	// SafetyFetch: a node with clients fetches at least this often even if
	// the token's hints say nothing is pending here (hints lost with a
	// crashed holder's token are recovered).
	SafetyFetch time.Duration
	// Retention is how long delivered messages stay for HISTORY; pruning
	// runs every PruneInterval. 0 keeps them forever.
	Retention     time.Duration
	PruneInterval time.Duration
	// PoisonStreak is how long one piece of work (a message, a user's
	// fetch) must have failed alone with an error about its data, visit
	// after visit right after the store took an empty transaction, before
	// it is set aside as the cause: a message refused to its sender, a
	// fetch paused. Shorter failures, and any failure that is the store's
	// (an outage, a timeout, a deadlock), never set work aside: it waits.
	PoisonStreak time.Duration
	// ShutdownDrain bounds how long a stopping server waits for the token
	// to store what its clients sent.
	ShutdownDrain time.Duration
	// ReconcileInterval is how often presence in the store is checked
	// against this node's sessions (stale rows cleared, lost rows restored).
	// After a failure the check comes sooner: 250 ms (at most this
	// interval), doubling back up to it.
	ReconcileInterval time.Duration
	// Joined, if set, signals that the node has (re)joined the ring: if it
	// was spliced out meanwhile (it stalled), the coordinator removed its
	// presence rows, and the presence check restores them at once instead
	// of at its next round. The node writes it (node.Config.Joined); the
	// presence check's goroutine reads it.
	Joined <-chan struct{}
	// HashWorkers bounds concurrent password hashes (each costs CPU and
	// memory). A login waits for a slot at most as long as its store
	// operations may take (StoreTimeout), then gets BUSY.
	HashWorkers int
	// Auth is the login policy: AuthOpen lets protocol-1 clients and
	// names without passwords in; AuthPassword requires protocol 2 and a
	// password for every login, accounts being made by REGISTER (or the
	// operator).
	Auth AuthMode
	// Throttle delays logins after failed ones, per account and per
	// address.
	Throttle ThrottleConfig
}

// AuthMode is a login policy.
type AuthMode string

// Login policies (docs/PROTOCOL.md, "Accounts").
const (
	AuthOpen     AuthMode = "open"
	AuthPassword AuthMode = "password"
)

// ParseAuthMode reads "open" or "password".
func ParseAuthMode(s string) (AuthMode, error) {
	switch m := AuthMode(s); m {
	case AuthOpen, AuthPassword:
		return m, nil
	}
	return "", fmt.Errorf("chat: unknown auth mode %q (open or password)", s)
}

// ThrottleConfig bounds password guessing. After Free wrong passwords for
// one account (AddressFree failed attempts from one address, a REGISTER
// counting as one) the next attempt waits Base, then twice as long after
// each further failure, up to Max; a success resets the account's count,
// and a key with no failure for Forget starts afresh. The account's count
// is kept in the store, so every node together checks at most Free
// passwords before the waits begin; the address's is this node's own, in
// memory, for at most MaxKeys addresses (the oldest is dropped first), so
// memory stays bounded whatever an attacker sends.
type ThrottleConfig struct {
	Free, AddressFree int
	Base, Max, Forget time.Duration
	MaxKeys           int
}

// DefaultThrottle is the throttle of DefaultConfig.
func DefaultThrottle() ThrottleConfig {
	return ThrottleConfig{
		Free:        3,                // typos are forgiven
		AddressFree: 10,               // a lab behind one address has several users
		Base:        time.Second,      // then 1 s, 2 s, 4 s, ...
		Max:         5 * time.Minute,  // ... up to 5 min: ~300 guesses a day per account
		Forget:      30 * time.Minute, // a quiet key starts afresh
		MaxKeys:     10_000,           // ~1 MB at most
	}
}

// DefaultKeepAlive is the TCP keep-alive of DefaultConfig: a peer that
// answers nothing for 60 s is probed every 15 s, and dropped after 4
// unanswered probes, so a dead peer is noticed within 2 minutes of its
// last sign of life, for one probe segment a minute on a quiet connection.
func DefaultKeepAlive() net.KeepAliveConfig {
	return net.KeepAliveConfig{
		Enable:   true,
		Idle:     60 * time.Second,
		Interval: 15 * time.Second,
		Count:    4,
	}
}

// DefaultConfig returns defaults for node id; Store and Addr must be set.
func DefaultConfig(id int64) Config {
	return Config{
		NodeID:            id,
		Log:               zerolog.Nop(),
		MaxClients:        1000,             // "hundreds of clients per node", with room
		MaxClientsPerIP:   16,               // a user's few clients, or a small NAT; one host cannot fill MaxClients
		WriteQueue:        1024,             // a burst of deliveries to one client fits; a stuck one fills it in seconds
		WriteTimeout:      10 * time.Second, // a client that reads nothing for 10 s is gone
		SocketBuffer:      256 << 10,        // kernel memory per client stays bounded with hundreds of clients
		IdleTimeout:       5 * time.Minute,  // protocol 2 only: our client sends ALIVE every 30 s
		KeepAlive:         DefaultKeepAlive(),
		LoginTimeout:      30 * time.Second, // a person types a name in less
		RateLimit:         50,               // lines a second: far above a person typing, far below a flood
		RateBurst:         200,              // pasting or a reconnect's resends fit in the burst
		FloodLimit:        400,              // two bursts' worth of refused lines: a flood, not a hiccup
		StoreTimeout:      5 * time.Second,  // as the node's store operations
		StoreSlots:        2,                // a login storm queues here, not in the store the visits use
		OutboxLimit:       20000,            // ~1 s of a busy ring's throughput; then BUSY
		BatchStart:        64,               // fits a 100 ms visit on MariaDB with room
		BatchMax:          1000,             // the adaptive batch never exceeds this
		FetchLimit:        2000,             // deliveries per visit
		FetchPerClient:    512,              // one backlog cannot fill a visit
		SafetyFetch:       30 * time.Second, // a lost hint delays delivery by at most this
		Retention:         7 * 24 * time.Hour,
		PruneInterval:     10 * time.Minute,
		PoisonStreak:      5 * time.Second, // longer than a storm of logins keeps the store busy
		ShutdownDrain:     3 * time.Second, // a few rotations of a busy ring
		ReconcileInterval: 10 * time.Second,
		HashWorkers:       4,
		Auth:              AuthOpen, // the original client has no passwords; ringnode picks per node list
		Throttle:          DefaultThrottle(),
	}
}

// Validate reports a configuration that cannot run: the first problem
// found, checking the server and its clients, then the visits' work, then
// the workers and the login policy.
func (c Config) Validate() error {
	if err := c.validateClients(); err != nil {
		return err
	}
	if err := c.validateVisits(); err != nil {
		return err
	}
	if err := c.validateWorkers(); err != nil {
		return err
	}
	return c.Throttle.validate()
}

// validateClients checks the node, its store and the client port: the
// connections' bounds, timeouts, rate limit and TLS.
// validKeepAlive reports whether k turns TCP keep-alive on with every
// value set.
func validKeepAlive(k net.KeepAliveConfig) bool {
	return k.Enable && k.Idle > 0 && k.Interval > 0 && k.Count >= 1
}

func (c Config) validateClients() error {
	switch {
	case c.Store == nil:
		return errors.New("chat: no store")
	case c.NodeID < 1:
		return fmt.Errorf("chat: node id %d must be positive", c.NodeID)
	case c.MaxClients < 1 || c.WriteQueue < 16:
		return fmt.Errorf("chat: MaxClients %d must be positive and WriteQueue %d at least 16", c.MaxClients, c.WriteQueue)
	case c.MaxClientsPerIP < 1:
		return fmt.Errorf("chat: MaxClientsPerIP %d must be positive", c.MaxClientsPerIP)
	case c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil:
		return errors.New("chat: the TLS configuration has no certificate")
	case c.WriteTimeout <= 0 || c.IdleTimeout <= 0 || c.LoginTimeout <= 0 || c.StoreTimeout <= 0:
		return errors.New("chat: WriteTimeout, IdleTimeout, LoginTimeout and StoreTimeout must be positive")
	case !validKeepAlive(c.KeepAlive):
		return fmt.Errorf("chat: KeepAlive %+v must be enabled with a positive Idle, Interval and Count: it finds the dead peers of protocol-1 sessions, never closed for silence", c.KeepAlive)
	case c.RateLimit < 0 || (c.RateLimit > 0 && (c.RateBurst < 1 || c.FloodLimit < 1)):
		return fmt.Errorf("chat: rate %v/s needs a positive burst and flood limit", c.RateLimit)
	}
	return nil
}

// validateVisits checks the bounds of the token's visits: the outbox, the
// batch, the fetch, the intervals and the pruning of history.
func (c Config) validateVisits() error {
	switch {
	case c.OutboxLimit < 1 || c.BatchStart < 1 || c.BatchMax < c.BatchStart:
		return errors.New("chat: OutboxLimit and BatchStart must be positive, BatchMax at least BatchStart")
	case c.FetchLimit < 1 || c.FetchPerClient < 1:
		return errors.New("chat: FetchLimit and FetchPerClient must be positive")
	case c.SafetyFetch <= 0 || c.ReconcileInterval <= 0 || c.ShutdownDrain < 0:
		return errors.New("chat: SafetyFetch and ReconcileInterval must be positive")
	case c.Retention < 0 || (c.Retention > 0 && c.PruneInterval <= 0):
		return errors.New("chat: Retention must not be negative, and needs a positive PruneInterval")
	}
	return nil
}

// validateWorkers checks the workers that serve clients (password hashes,
// store slots), the poison streak and the login policy.
func (c Config) validateWorkers() error {
	switch {
	case c.HashWorkers < 1:
		return errors.New("chat: HashWorkers must be positive")
	case c.StoreSlots < 1:
		return errors.New("chat: StoreSlots must be positive")
	case c.PoisonStreak < 0:
		return errors.New("chat: PoisonStreak must not be negative")
	case c.Auth != AuthOpen && c.Auth != AuthPassword:
		return fmt.Errorf("chat: unknown auth mode %q (open or password)", c.Auth)
	}
	return nil
}

// validate reports a throttle that cannot run.
func (t ThrottleConfig) validate() error {
	if t.Free < 1 || t.AddressFree < 1 || t.Base <= 0 || t.Max < t.Base || t.Forget <= 0 || t.MaxKeys < 1 {
		return errors.New("chat: Throttle needs Free and AddressFree >= 1, 0 < Base <= Max, a positive Forget and MaxKeys")
	}
	return nil
}

// policy is the throttle's schedule for a key with free failures.
func (t ThrottleConfig) policy(free int) store.LoginThrottle {
	return store.LoginThrottle{Free: free, Base: t.Base, Max: t.Max, Forget: t.Forget}
}

// account is the store's wrong-password throttle per account.
func (t ThrottleConfig) account() store.LoginThrottle { return t.policy(t.Free) }
