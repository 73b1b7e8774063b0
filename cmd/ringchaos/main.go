// Command ringchaos is the fault-injection suite (make chaos): a ring of
// ringnode processes on MariaDB, protocol-2 chat clients, faults at seeded
// random times, a hostile-input barrage, and the invariant checks. It exits
// 1 if any check fails, printing the seed to replay, and 2 if the run could
// not be carried out.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// errChecks says that the run finished and some check failed.
var errChecks = errors.New("checks failed")

func run(ctx context.Context, args []string) int {
	cmd := newRoot()
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errChecks):
		return 1
	}
	fmt.Fprintln(os.Stderr, "ringchaos: "+err.Error())
	return 2
}

func newRoot() *cobra.Command {
	cfg := chaos.DefaultConfig()
	var faults string
	var seed uint64
	var gap, hold, every, netHold [2]string
	cmd := &cobra.Command{
		Use:   "ringchaos",
		Short: "Fault injection on a real ring over MariaDB, with invariant checks",
		Long: `ringchaos starts --nodes ringnode processes (mutex probe on) on a private MariaDB
server of its own (or --db, a server DSN), logs in --clients protocol-2 chat
clients that send direct and group messages at --rate each, and for --duration
injects faults at random times drawn from --seed: kill -9 of a random node, of the
coordinator and of the token holder; SIGSTOP then SIGCONT; SIGTERM and restart; a
MariaDB restart; clients dropping their connection and logging in at another node;
network delay on lo where tc netem works; with --net (root and nft), network faults
made with an nftables table of its own: a node cut from its successor (one way, both
ways), from the store, from the ring; the coordinator cut from the ring; a 2 | 3 split with the store on both sides or
one; 1, 5 and 20 % packet loss; a flapping link. A barrage of malformed, oversized and
flooding input hits every client port, and unauthenticated, forged, stale and
replayed frames every coordination port over TCP and UDP.

Then it checks that every message with a STORED receipt reached every recipient,
that none was shown twice, FIFO per sender and recipient, the mutex probe, one
coordinator per epoch, the repair after every fault (p50 and max per kind), that no
node exited unless killed, that memory and goroutines stayed flat, and that every
node dropped and counted the hostile input; with --net, that during each network fault
the nodes that reach the store and each other delivered again within 2 s, and every
pair within 2 s of the heal. Exit status: 0 all checks passed, 1 a
check failed (the seed is printed to replay it), 2 the run could not be made.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Faults, err = chaos.ParseKinds(faults); err != nil {
				return err
			}
			if cfg.Gap, err = parseRange(gap); err != nil {
				return fmt.Errorf("--gap: %w", err)
			}
			if cfg.Hold, err = parseRange(hold); err != nil {
				return fmt.Errorf("--hold: %w", err)
			}
			if cfg.ClientEvery, err = parseRange(every); err != nil {
				return fmt.Errorf("--client-every: %w", err)
			}
			if cfg.NetHold, err = parseRange(netHold); err != nil {
				return fmt.Errorf("--net-hold: %w", err)
			}
			cfg.Seed = seed
			if cfg.Ringnode == "" {
				exe, _ := os.Executable()
				cfg.Ringnode = filepath.Join(filepath.Dir(exe), "ringnode")
			}
			if _, err := os.Stat(cfg.Ringnode); err != nil {
				return fmt.Errorf("ringnode binary: %w (build it: make build, or give --ringnode)", err)
			}
			cfg.Out = cmd.OutOrStdout()
			rep, err := chaos.Run(cmd.Context(), cfg)
			if rep != nil {
				_ = rep.Write(cmd.OutOrStdout())
			}
			if err != nil {
				if rep == nil && cfg.Seed != 0 {
					return fmt.Errorf("%w (seed %d)", err, cfg.Seed)
				}
				return err
			}
			if !rep.OK() {
				return errChecks
			}
			return nil
		},
	}
	d := chaos.DefaultConfig()
	fs := cmd.Flags()
	fs.DurationVar(&cfg.Duration, "duration", d.Duration, "how long faults are injected and clients send (setup and drain come on top)")
	fs.IntVar(&cfg.Nodes, "nodes", d.Nodes, "ring size")
	fs.IntVar(&cfg.Clients, "clients", d.Clients, "protocol-2 chat clients, one user each")
	fs.IntVar(&cfg.BigGroup, "big-group", d.BigGroup, `members seeded (offline) into the group "big" before the clients log in; a quarter of the clients (at least 2) join it and send to it; 0: no big group`)
	fs.Uint64Var(&seed, "seed", 0, "seed of every random choice; 0: a new one (printed)")
	fs.StringVar(&cfg.DB, "db", d.DB, `"private": a mariadbd of our own on its own port and data directory (MariaDB restarts are injected into it); "galera": a 3-server Galera cluster of our own, the nodes spread over it (galera-kill kills one server and restarts it); else a MariaDB server DSN on which a fresh database is made (no restarts)`)
	fs.StringVar(&cfg.GaleraScript, "galera-script", d.GaleraScript, "the script that runs the Galera cluster of --db galera")
	fs.StringVar(&cfg.Ringnode, "ringnode", "", "ringnode binary (default: beside ringchaos)")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "directory for node lists, logs and the private database (default: a temporary one, removed after a passing run)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the work directory and database even when every check passes")
	fs.StringVar(&cfg.NodeLogLevel, "node-log-level", "info", "the nodes' log level (debug: every visit, store operation and election step in their logs; slower)")
	fs.Float64Var(&cfg.Rate, "rate", d.Rate, "messages a second per client (one in flight: the next waits for the STORED receipt)")
	fs.StringVar(&cfg.Election, "election", d.Election, `election method of every node (ring, chang-roberts, bully, lease), or "mixed"`)
	fs.StringVar(&faults, "faults", "all", "fault kinds, comma-separated: all, or some of "+kindNames()+"; -KIND removes one (all,-net-delay)")
	fs.BoolVar(&cfg.Hostile, "hostile", d.Hostile, "run the hostile-input barrage")
	fs.BoolVar(&cfg.Net, "net", d.Net, "network faults (the net-* kinds) with nft: nodes on 127.0.0.11.., each under its own group id; needs root and nftables, else the run says so and goes on without them")
	fs.StringVar(&cfg.Lab, "lab", "", "with --net: run node ID on lab host ID of scripts/netlab.sh's lab NAME:SUBNET (as rclab:198.18.0), cut links on its bridge and take hosts off it (net-host-down); --db must be the lab's store (make chaos NET=lab)")
	fs.StringVar(&netHold[0], "net-hold-min", d.NetHold[0].String(), "shortest time a network cut or split stays")
	fs.StringVar(&netHold[1], "net-hold-max", d.NetHold[1].String(), "longest such time")
	fs.DurationVar(&cfg.NetLong, "net-long", d.NetLong, "how long packet loss and a flapping link last")
	fs.DurationVar(&cfg.NetFlapEvery, "net-flap-every", d.NetFlapEvery, "how often a flapping link goes down or up")
	fs.StringVar(&cfg.MoveStyle, "move-style", d.MoveStyle, `how a moving client drops its connection: "close" (at once), "half-close" (reads to the end first) or "mixed"`)
	fs.StringVar(&gap[0], "gap-min", d.Gap[0].String(), "shortest pause between two ring faults")
	fs.StringVar(&gap[1], "gap-max", d.Gap[1].String(), "longest pause between two ring faults")
	fs.StringVar(&hold[0], "hold-min", d.Hold[0].String(), "shortest time a fault stays in place after the ring repaired around it")
	fs.StringVar(&hold[1], "hold-max", d.Hold[1].String(), "longest such time")
	fs.StringVar(&every[0], "client-every-min", d.ClientEvery[0].String(), "shortest pause between two client moves")
	fs.StringVar(&every[1], "client-every-max", d.ClientEvery[1].String(), "longest pause between two client moves")
	fs.DurationVar(&cfg.RepairTimeout, "repair-timeout", d.RepairTimeout, "a fault the ring has not repaired within this fails the run")
	fs.DurationVar(&cfg.StoreTimeout, "store-timeout", d.StoreTimeout, "a client without a STORED receipt this long logs in at another node")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", d.DrainTimeout, "after the fault phase, the longest wait for every stored message to arrive")
	return cmd
}

// parseRange parses a [min, max] pair of durations.
func parseRange(s [2]string) ([2]time.Duration, error) {
	var out [2]time.Duration
	for i, v := range s {
		d, err := time.ParseDuration(v)
		if err != nil {
			return out, err
		}
		out[i] = d
	}
	return out, nil
}

func kindNames() string {
	names := make([]string, len(chaos.AllKinds))
	for i, k := range chaos.AllKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
