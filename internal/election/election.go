package election

import (
	"fmt"
	"slices"
)

// Kind names an election message.
type Kind string

// Election messages. Every method uses a subset:
//
//	ring:          ELECTION (candidate list), ELECTED (announcement round), ACK
//	chang-roberts: ELECTION (best candidate), ELECTED (announcement round), ACK
//	bully:         ELECTION (to higher ids), OK, ELECTED (to all)
//	lease:         none (the store decides)
const (
	KindElection Kind = "ELECTION"
	KindOK       Kind = "OK"      // bully: a higher node is alive and takes over
	KindElected  Kind = "ELECTED" // the announcement: Leader won Round
	KindAck      Kind = "ACK"     // ring methods: the hop message Seq arrived (the next node is alive)
)

// Round identifies one election: the node that started it and that node's
// counter. Messages of one round are deduplicated by it.
type Round struct {
	Initiator int64  `json:"i"`
	N         uint64 `json:"n"`
}

func (r Round) String() string { return fmt.Sprintf("%d#%d", r.Initiator, r.N) }

// Msg is an election message. From and To are set by the sender's host
// (the ring node) and travel in the frame header; the rest is the payload.
type Msg struct {
	From int64 `json:"-"`
	To   int64 `json:"-"`

	Method Method  `json:"method"`
	Kind   Kind    `json:"kind"`
	Round  Round   `json:"round"`
	Seq    uint64  `json:"seq,omitempty"`    // hop id, echoed by ACK (ring methods)
	Cands  []int64 `json:"cands,omitempty"`  // ring: the ids the list has visited, in order
	Cand   int64   `json:"cand,omitempty"`   // chang-roberts: best candidate so far
	Leader int64   `json:"leader,omitempty"` // ELECTED: the winner
	Hops   int     `json:"hops,omitempty"`   // hops this message has made (a bound against circulating forever)
}

// Validate rejects messages no method can act on.
func (m Msg) Validate() error {
	if _, err := ParseMethod(string(m.Method)); err != nil || m.Method == Lease {
		return fmt.Errorf("election: message of method %q", m.Method)
	}
	switch m.Kind {
	case KindElection, KindOK, KindElected, KindAck:
	default:
		return fmt.Errorf("election: unknown message kind %q", m.Kind)
	}
	if m.Round.Initiator < 1 || m.Cand < 0 || m.Leader < 0 || m.Hops < 0 || len(m.Cands) > MaxPeers ||
		slices.ContainsFunc(m.Cands, func(id int64) bool { return id < 1 }) {
		return fmt.Errorf("election: %s %s with invalid ids", m.Method, m.Kind)
	}
	if m.Kind == KindElected && m.Leader < 1 {
		return fmt.Errorf("election: ELECTED without leader")
	}
	return nil
}

// MaxPeers bounds the node table an election works over.
const MaxPeers = 1024

// LeaseOpKind names a store operation of the lease method.
type LeaseOpKind uint8

// Lease operations.
const (
	LeaseAcquire LeaseOpKind = iota + 1 // take the lease if it is free or expired (a new epoch)
	LeaseRenew                          // extend the lease held for Epoch
)

// LeaseOp asks the host to run a lease operation in the store, for
// Config.LeaseTicks. The host answers with Machine.LeaseDone.
type LeaseOp struct {
	Kind  LeaseOpKind
	Epoch int64 // renew: the epoch held
}

// LeaseResult is the store's answer to a LeaseOp.
type LeaseResult struct {
	Op LeaseOp
	// OK: acquired (Epoch is the new epoch) or renewed.
	OK bool
	// Failed: the store could not be reached; nothing is known.
	Failed bool
	// Holder and Epoch are the lease as the store has it afterwards;
	// RemainingTicks is how long it stays valid from the store's clock.
	Holder         int64
	Epoch          int64
	RemainingTicks int
}

// Report describes a finished election at one node, for the log and the
// metrics.
type Report struct {
	Method       Method
	Round        Round
	Leader       int64
	Won          bool  // this node is the winner
	Participants int   // nodes this node knows took part
	MsgsSent     int   // election messages this node sent in the round (acks included)
	Ticks        int64 // from this node's first involvement to the result
}

// Counters are totals since start, for metrics.
type Counters struct {
	Started  uint64 // elections this node initiated
	Won      uint64
	Restarts uint64 // elections restarted after a timeout
	Sent     map[Method]uint64
	Received map[Method]uint64
}

// Ready is what the host must do after an input.
type Ready struct {
	Msgs []Msg
	// Win: this node won an election of a voting method; the host claims
	// the coordinator role in the store (compare-and-set on the epoch it
	// knows) and then calls Claimed, or ClaimLost.
	Win bool
	// Lease operations to run (lease method).
	LeaseOps []LeaseOp
	// LeaseWon: the lease was acquired for LeaseEpoch; the node is the
	// coordinator for that epoch. LeaseLost: the lease held is gone (not
	// renewed in time, or taken): the node must stop acting as coordinator.
	LeaseWon   bool
	LeaseEpoch int64
	LeaseLost  bool
	Reports    []Report
}

// Empty reports whether there is nothing to do.
func (r Ready) Empty() bool {
	return len(r.Msgs) == 0 && !r.Win && len(r.LeaseOps) == 0 && !r.LeaseWon && !r.LeaseLost && len(r.Reports) == 0
}

// Config configures a node's election machine. Durations are in ticks.
type Config struct {
	ID     int64
	Method Method // the method this node starts elections with
	// TimeoutTicks: a hop ACK (ring methods) or an OK (bully) not received
	// within this is a lost message or a dead node.
	TimeoutTicks int
	// Retries: a hop or a bully ELECTION is sent this many times in all
	// before the addressee is taken for dead.
	Retries int
	// ResultTicks: a node taking part in an election that has not seen its
	// result (ELECTED, or a coordinator observed) within this starts a new
	// one.
	ResultTicks int
	// ChallengeTicks: a node that observes a coordinator with a lower id
	// than its own starts an election after this (unless one ends first).
	ChallengeTicks int
	// LeaseTicks is the lease duration; the holder renews every third.
	LeaseTicks int
	// Incarnation tells this process's messages from an earlier run's:
	// round numbers and hop ids start above it, so peers that remember
	// the previous run's rounds do not take the new ones for duplicates.
	// The runtime sets it from the start time; 0 is fine in simulations
	// that never restart a node within a few seconds.
	Incarnation uint64
}

// DefaultConfig is tuned for a 20 ms tick on loopback or a LAN.
func DefaultConfig(id int64, m Method) Config {
	return Config{
		ID:             id,
		Method:         m,
		TimeoutTicks:   3,  // 60 ms: a loopback or LAN datagram answers within a few ms
		Retries:        2,  // one resend before a node is skipped: a single lost datagram costs 60 ms
		ResultTicks:    40, // 800 ms: a 16-node round with a few dead nodes finishes well within
		ChallengeTicks: 10, // 200 ms: lets the acting coordinator's own election run first
		LeaseTicks:     50, // 1 s lease, renewed every 333 ms
	}
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.ID < 1 {
		return fmt.Errorf("election: node id %d < 1", c.ID)
	}
	if _, err := ParseMethod(string(c.Method)); err != nil {
		return err
	}
	if c.TimeoutTicks < 1 || c.Retries < 1 || c.ResultTicks < 1 || c.ChallengeTicks < 1 || c.LeaseTicks < 3 {
		return fmt.Errorf("election: timeouts must be positive and LeaseTicks at least 3")
	}
	return nil
}
