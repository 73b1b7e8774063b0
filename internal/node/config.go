// Package node is the ringnode runtime: it owns the sockets, the ticker and
// the store, and drives the pure ring state machine (internal/ring) with
// them. One goroutine owns the state machine; store operations and critical
// sections run on worker goroutines and come back as inputs.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
	"github.com/ringchat/ringchat/internal/transport"
)

// Fenced runs fn in one store transaction fenced by the visiting token's
// stamp: if a newer token (or another copy of this one) has written, fn does
// not run and the error wraps store.ErrFenced. It is an alias, so that a
// section written against the same function type (queue.Queue.Visit) is a
// Section without importing this package.
type Fenced = func(fn func(store.Tx) error) error

// Section is work done while this node holds the token (a critical section
// on the message queue). It gets the token (whose App data it may replace)
// and a way to run fenced transactions; it should touch the store only when
// it has work. It returns the token's new App data and whether it did work.
type Section func(ctx context.Context, tok token.Token, fenced Fenced) (app json.RawMessage, worked bool, err error)

// Observer takes one measurement; a Prometheus histogram is one.
type Observer interface{ Observe(float64) }

// Config configures a node runtime.
type Config struct {
	Ring ring.Config
	// Store is the ring's part of the shared store; the node does not
	// close it. If it also names the database server in use (Server,
	// as store.Store does), the node records that in its row.
	Store store.Control
	// ClearPresence, if set, removes the presence rows of a node the
	// coordinator spliced out of the ring (nobody is logged in there any
	// more): the chat's part of the store, which the node does not hold.
	// A failure fails the topology change, which is retried.
	ClearPresence func(ctx context.Context, node int64) error
	// Transport carries ring frames; the node closes it when Run ends.
	Transport transport.Transport
	// Keys, if set, receives the token generation secrets the store
	// confirmed to this node, as they change, for the transport's HELLO
	// proofs (give the same Keys to transport.Config.Prover).
	Keys *token.Keys
	// Sections run, in order, at every token visit.
	Sections []Section
	// Wants, if set, signals new work for the token (the queue's
	// queue.Queue.Wants), as Want does.
	Wants <-chan struct{}
	// PeerRefresh is how often the node table is re-read (new nodes,
	// changed addresses).
	PeerRefresh time.Duration
	// StoreTimeout bounds one store operation.
	StoreTimeout time.Duration
	// CheckTimeout bounds a read a token waits on (its generation, or the
	// ring's predecessor): a node cut off from the store passes the token
	// on after it, rather than after StoreTimeout.
	CheckTimeout time.Duration
	// Log receives the node's log lines; the node adds its id.
	Log zerolog.Logger
	// Addresses is the node table's address book; the runtime keeps it
	// current (the transport's Resolver reads from it).
	Addresses *Addresses
	// StatsInterval, if positive, logs token statistics this often.
	StatsInterval time.Duration
	// Optional observers (metrics), in seconds: the time between two
	// token visits here (the rotation time) and a forwarded token's
	// send-to-acknowledgement time (the hop time).
	RotationObserver Observer
	HopObserver      Observer
	// Joined, if set, is signalled each time the node has joined the ring:
	// at start and after every rejoin (a stalled node that was spliced out,
	// whose presence rows the coordinator cleared). The node never blocks
	// on it: a signal not yet taken stands for the next; give it a buffer
	// of one. The reader runs on its own goroutine (the chat service's
	// presence check); nothing of its code runs on the node's.
	Joined chan<- struct{}
}

// DefaultConfig returns defaults for node id; Store and Transport must be
// set.
func DefaultConfig(id int64) Config {
	return Config{
		Ring:         ring.DefaultConfig(id),
		PeerRefresh:  10 * time.Second,       // nodes added to the table at run time are seen within 10 s
		StoreTimeout: 5 * time.Second,        // a store slower than this is treated as unavailable and retried
		CheckTimeout: 200 * time.Millisecond, // a one-row read takes about a millisecond; a token (and its sender, waiting 300 ms for the ack) waits at most this
		Log:          zerolog.Nop(),
	}
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	if err := c.Ring.Validate(); err != nil {
		return err
	}
	switch {
	case c.Store == nil:
		return errors.New("node: no store")
	case c.Transport == nil:
		return errors.New("node: no transport")
	case c.Ring.Tick <= 0:
		return fmt.Errorf("node: tick %v must be positive", c.Ring.Tick)
	case c.PeerRefresh <= 0 || c.StoreTimeout <= 0 || c.CheckTimeout <= 0:
		return errors.New("node: PeerRefresh, StoreTimeout and CheckTimeout must be positive")
	case c.Addresses == nil:
		return errors.New("node: no address book")
	}
	return nil
}
