// Package chaos is the fault-injection suite: it runs a ring of real
// ringnode processes on MariaDB with the mutex probe on, drives protocol-2
// chat clients through it, injects faults at seeded random times (kill -9 of
// a node, of the coordinator and of the token holder, SIGSTOP/SIGCONT,
// SIGTERM and restart, a MariaDB restart, client moves, network delay where
// tc netem works), aims a hostile barrage at every port, and then checks the
// invariants the system promises: nothing stored is lost, nothing is shown
// twice, FIFO per sender and recipient, mutual exclusion, one coordinator
// per epoch, repair after every fault, no unexpected exits, stable memory.
//
// cmd/ringchaos is its command line (make chaos); e2e/chaos_test.go runs a
// seeded short version in CI.
package chaos

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/election"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds. Ring faults run one at a time (inject, wait for the
// repair, hold, restore, wait for the repair); client moves run on their
// own schedule at the same time.
const (
	KillNode        Kind = "kill9-node"        // kill -9 of a random node
	KillCoordinator Kind = "kill9-coordinator" // kill -9 of the coordinator
	KillHolder      Kind = "kill9-holder"      // kill -9 of the current token holder
	StopCont        Kind = "sigstop"           // SIGSTOP of a random node, SIGCONT later
	TermRestart     Kind = "sigterm"           // SIGTERM (clean leave, exit 0), restart later
	DBRestart       Kind = "mariadb-restart"   // kill -9 of the private mariadbd, restarted
	GaleraKill      Kind = "galera-kill"       // kill -9 of one Galera server, restarted (it rejoins by state transfer)
	NetDelay        Kind = "net-delay"         // tc netem delay on lo, if usable
	ClientMove      Kind = "client-reconnect"  // a client drops its connection, logs in at another node

	// Network faults (Config.Net; netfault.go makes them with nft).
	NetCutSuccOneWay Kind = "net-cut-succ-oneway" // a node's packets to its successor dropped, not the other way
	NetCutSucc       Kind = "net-cut-succ"        // a node and its successor cut from each other, both ways
	NetCutStore      Kind = "net-cut-store"       // a node cut from the store only
	NetCutRing       Kind = "net-cut-ring"        // a node cut from every other node, not from the store
	NetCutCoord      Kind = "net-cut-coordinator" // the coordinator cut from every other node, not from the store
	NetSplit         Kind = "net-split"           // the ring split 2 | 3, the store reachable from both sides
	NetSplitStore    Kind = "net-split-store"     // the same, the store reachable from one side only
	NetLoss1         Kind = "net-loss-1"          // 1 % of one node's packets dropped (ring and store)
	NetLoss5         Kind = "net-loss-5"          // 5 %
	NetLoss20        Kind = "net-loss-20"         // 20 %
	NetFlap          Kind = "net-flap"            // a node's link to its successor cut and healed every 2 s
)

// NetKinds are the network faults.
var NetKinds = []Kind{NetCutSuccOneWay, NetCutSucc, NetCutStore, NetCutRing, NetCutCoord, NetSplit, NetSplitStore, NetLoss1, NetLoss5, NetLoss20, NetFlap}

// RingKinds are the ring faults, in the order of the report.
var RingKinds = append([]Kind{KillNode, KillCoordinator, KillHolder, StopCont, TermRestart, DBRestart, GaleraKill, NetDelay}, NetKinds...)

// AllKinds is every fault kind.
var AllKinds = append(slices.Clone(RingKinds), ClientMove)

// Repair phases measured: the fault kinds, plus the rejoin of a node after
// SIGCONT and after a restart.
const (
	PhaseSigcont = "sigcont-rejoin"
	PhaseRestart = "restart-rejoin"
	// PhaseGaleraRejoin is a killed Galera server's return to the cluster.
	PhaseGaleraRejoin = "galera-rejoin"
)

// Config configures a run. DefaultConfig gives the `make chaos` defaults.
type Config struct {
	// Duration is how long faults are injected and clients send; setup
	// before and the drain after come on top.
	Duration time.Duration
	// Nodes is the ring size (ids 1..Nodes).
	Nodes int
	// Clients is the number of protocol-2 chat clients, one user each.
	Clients int
	// BigGroup is how many members (users who never log in) are seeded
	// into the group BigGroupName before the clients log in; a quarter
	// of the clients (at least 2) join it too and send to it as to their
	// other groups, so that every such message goes to this many members
	// and more, most of them offline. 0: no big group.
	BigGroup int
	// Seed seeds every random choice: fault order, gaps, victims, message
	// destinations. 0 means pick one (printed).
	Seed uint64
	// DB is "private" (a mariadbd of our own, on its own port and data
	// directory: the only way a MariaDB restart can be injected without
	// disturbing anyone else) or the DSN of a MariaDB server, on which a
	// fresh database is created and dropped (no MariaDB restarts then),
	// or "galera": a 3-server Galera cluster of our own (scripts/galera.sh),
	// the nodes spread over its servers, one of which galera-kill kills.
	DB string
	// Ringnode is the ringnode binary.
	Ringnode string
	// WorkDir holds node lists, logs and the private database; "" makes a
	// temporary one, removed after a passing run unless Keep.
	WorkDir string
	Keep    bool
	// NodeLogLevel is the nodes' --log-level (info when empty): debug
	// shows each visit, store operation and election step, for a run
	// whose failure the info lines do not explain.
	NodeLogLevel string
	// GaleraScript is scripts/galera.sh, which runs the cluster of DB
	// "galera".
	GaleraScript string
	// Rate is the messages a second each client sends (one in flight at a
	// time: the next waits for the previous one's STORED receipt).
	Rate float64
	// Election is the method every node runs, or "mixed": a seeded choice
	// of ring, chang-roberts and bully per node.
	Election string
	// Faults are the enabled fault kinds.
	Faults []Kind
	// Hostile runs the hostile-input barrage during the fault phase.
	Hostile bool
	// Net turns the network faults on (NetKinds, where nft works: else
	// the run says so and goes on without them): the nodes listen on
	// loopback aliases 127.0.0.11.. and run under group ids of their own.
	Net bool
	// Lab, with Net, runs node ID on lab host ID of scripts/netlab.sh's lab
	// NAME:SUBNET (labnet.go) and makes the faults on its bridge; DB must
	// then be the lab's store.
	Lab string
	// NetHold bounds how long a cut or split stays; NetLong is how long
	// packet loss and a flapping link last; NetFlapEvery how often the
	// flapping link changes.
	NetHold      [2]time.Duration
	NetLong      time.Duration
	NetFlapEvery time.Duration
	// MoveStyle is how a client move drops its connection: "close" (at
	// once, Close), "half-close" (CloseWrite, read to the end, then Close)
	// or "mixed" (either, half and half).
	MoveStyle string
	// Gap bounds the pause between two ring faults; Hold how long a fault
	// is left in place (a node down, stopped, the database down) after the
	// ring repaired around it; ClientEvery the pause between client moves.
	Gap, Hold, ClientEvery [2]time.Duration
	// RepairTimeout bounds every wait for the ring to re-form; a fault not
	// repaired within it fails the run.
	RepairTimeout time.Duration
	// StoreTimeout is how long a client waits for a STORED receipt before
	// taking its node for dead and logging in at another.
	StoreTimeout time.Duration
	// DrainTimeout bounds the wait, after the fault phase, for every
	// stored message to reach every recipient.
	DrainTimeout time.Duration
	// SampleEvery is how often node memory and goroutines are sampled.
	SampleEvery time.Duration
	// Out receives progress lines and the report.
	Out io.Writer
}

// DefaultConfig returns the defaults of `make chaos`.
func DefaultConfig() Config {
	return Config{
		Duration:      10 * time.Minute,
		Nodes:         5,
		Clients:       20,
		BigGroup:      2000, // a group's work in a visit must be bounded whatever its size
		DB:            "private",
		GaleraScript:  "scripts/galera.sh",
		Rate:          2, // 40 messages a second from 20 clients: a busy ring, far from its limit
		Election:      string(election.Default),
		Faults:        slices.Clone(AllKinds),
		Hostile:       true,
		NetHold:       [2]time.Duration{8 * time.Second, 15 * time.Second}, // long enough to see the ring route around it and deliver again
		NetLong:       20 * time.Second,                                    // issue 28: loss and a flapping link for 20 s
		NetFlapEvery:  2 * time.Second,
		MoveStyle:     "mixed",
		Gap:           [2]time.Duration{2 * time.Second, 8 * time.Second},
		Hold:          [2]time.Duration{500 * time.Millisecond, 4 * time.Second},
		ClientEvery:   [2]time.Duration{2 * time.Second, 6 * time.Second},
		RepairTimeout: 60 * time.Second, // targets are a few seconds (docs/BENCHMARKS.md); this only flags a wedged ring
		StoreTimeout:  10 * time.Second, // a node stopped or cut off is left after this
		DrainTimeout:  2 * time.Minute,
		SampleEvery:   2 * time.Second,
		Out:           io.Discard,
	}
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	if c.Duration < time.Second {
		errs = append(errs, fmt.Errorf("duration %v: want at least 1s", c.Duration))
	}
	if c.Nodes < 3 {
		errs = append(errs, fmt.Errorf("nodes %d: want at least 3 (a fault takes one away)", c.Nodes))
	}
	if c.Clients < 2 {
		errs = append(errs, fmt.Errorf("clients %d: want at least 2", c.Clients))
	}
	if c.BigGroup < 0 || c.BigGroup > 1_000_000 {
		errs = append(errs, fmt.Errorf("big group %d: want 0 to 1,000,000 seeded members", c.BigGroup))
	}
	if c.Rate <= 0 || c.Rate > 20 {
		errs = append(errs, fmt.Errorf("rate %v: want 0 < rate <= 20 messages a second per client", c.Rate))
	}
	if !slices.Contains([]string{"mixed", "close", "half-close"}, c.MoveStyle) {
		errs = append(errs, fmt.Errorf(`move style %q: want "mixed", "close" or "half-close"`, c.MoveStyle))
	}
	if c.Ringnode == "" {
		errs = append(errs, errors.New("no ringnode binary"))
	}
	if c.DB == "" {
		errs = append(errs, errors.New(`db: want "private", "galera" or a MariaDB DSN`))
	}
	if c.Election != "mixed" {
		if _, err := election.ParseMethod(c.Election); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range c.Faults {
		if !slices.Contains(AllKinds, k) {
			errs = append(errs, fmt.Errorf("unknown fault kind %q (kinds: %s)", k, kindList(AllKinds)))
		}
	}
	for _, r := range []struct {
		name string
		v    [2]time.Duration
	}{{"gap", c.Gap}, {"hold", c.Hold}, {"client-every", c.ClientEvery}, {"net-hold", c.NetHold}} {
		if r.v[0] < 0 || r.v[1] < r.v[0] {
			errs = append(errs, fmt.Errorf("%s %v: want 0 <= min <= max", r.name, r.v))
		}
	}
	if c.Net && (c.NetLong <= 0 || c.NetFlapEvery <= 0 || c.NetHold[0] <= 0) {
		errs = append(errs, errors.New("network faults: hold, length and flap interval must be positive"))
	}
	if c.RepairTimeout <= 0 || c.StoreTimeout <= 0 || c.DrainTimeout <= 0 || c.SampleEvery <= 0 {
		errs = append(errs, errors.New("timeouts and the sample interval must be positive"))
	}
	return errors.Join(errs...)
}

// ParseKinds parses a comma-separated list of fault kinds; "all" is every
// kind, and "-kind" removes one ("all,-net-delay").
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "all":
			for _, k := range AllKinds {
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		case strings.HasPrefix(f, "-"):
			k := Kind(f[1:])
			if !slices.Contains(AllKinds, k) {
				return nil, fmt.Errorf("unknown fault kind %q (kinds: %s)", k, kindList(AllKinds))
			}
			out = slices.DeleteFunc(out, func(x Kind) bool { return x == k })
		default:
			k := Kind(f)
			if !slices.Contains(AllKinds, k) {
				return nil, fmt.Errorf("unknown fault kind %q (kinds: %s)", k, kindList(AllKinds))
			}
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
