package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/metrics"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/server"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/wire"
)

// runOpts are the flags of a node process.
type runOpts struct {
	id         int64
	election   string
	drop       bool
	keyFile    string
	mutexProbe bool
	tick       time.Duration
	listen     string
	stats      time.Duration
	cpuProfile string
	chat       chatOpts
	leaseTTL   time.Duration
	metrics    string
	pprof      bool
}

func addRunFlags(fs *pflag.FlagSet, o *runOpts) {
	fs.Int64VarP(&o.id, "id", "i", 0, "this node's id in the node list")
	fs.StringVarP(&o.election, "election", "e", string(election.Default),
		"election method: ring, chang-roberts, bully or lease (also RING_BASED, CHANG_ROBERTS, BULLY)")
	fs.BoolVarP(&o.drop, "drop", "d", false, "reset the ring state in the store first (a fresh ring; queued messages are kept)")
	fs.StringVar(&o.keyFile, "cluster-key-file", "", "file holding the cluster key that signs node-to-node frames (make one with ringnode keygen; else RINGNODE_CLUSTER_KEY; required when the node list has a non-loopback host, else an insecure development key)")
	fs.BoolVar(&o.mutexProbe, "mutex-probe", false, "test only: check mutual exclusion with a counter in every critical section")
	fs.DurationVar(&o.tick, "tick", ring.DefaultConfig(1).Tick, "protocol tick; timeouts are multiples of it")
	fs.DurationVar(&o.stats, "stats-interval", 0, "log token statistics (hop times, visits) this often; 0: never")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", time.Duration(ring.DefaultConfig(1).Election.LeaseTicks)*ring.DefaultConfig(1).Tick,
		"lease election: how long the coordinator lease lasts (renewed every third of it; a dead holder is replaced after it)")
	fs.StringVar(&o.metrics, "metrics-addr", "", "serve Prometheus metrics (/metrics) and health (/healthz) on this loopback host:port; off when empty")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve pprof (/debug/pprof/) on --metrics-addr (for tuning; off by default)")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the whole run to this file (for tuning)")
	fs.StringVar(&o.listen, "listen", "", "host:port to listen on for ring traffic (default: the node's port, on its address if loopback, else all interfaces)")
	addChatFlags(fs, &o.chat)
}

func newRunCmd(g *globals) *cobra.Command {
	o := &runOpts{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one ring node",
		Long: `run starts node --id: it migrates the store if needed, adds the node list's new
nodes, joins the ring through the coordinator (or forms it), passes the token and
serves its part of the ring until SIGINT or SIGTERM, when it hands the token on,
asks to be spliced out and exits 0.

The original invocation works too: ringnode -i 1 -f nodes.csv -e CHANG_ROBERTS -d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNode(cmd, g, o) },
	}
	addRunFlags(cmd.Flags(), o)
	return cmd
}

func runNode(cmd *cobra.Command, g *globals, o *runOpts) error {
	method, err := checkRunOpts(o)
	if err != nil {
		return err
	}
	log := g.log.With().Int64("node", o.id).Logger()
	ctx := cmd.Context()
	p, err := g.prepareStore(cmd, log)
	if err != nil {
		return err
	}
	defer p.st.Close()
	for _, m := range p.res.Applied {
		log.Info().Str("migration", m.Name).Msg("schema migrated")
	}
	table, self, err := nodeTable(ctx, p.st, o, g.nodes, log)
	if err != nil {
		return err
	}
	codec, err := nodeCodec(o, table, log)
	if err != nil {
		return err
	}
	ccfg, err := nodeChatConfig(o, *self, table, p.st, log)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	srv, err := server.New(ctx, server.Config{Store: p.st, Table: table, Codec: codec, ListenAddr: listenAddr(*self, o.listen),
		Node: nodeConfig(o, method, log), Chat: ccfg, MetricsAddr: o.metrics, Pprof: o.pprof, Log: g.log})
	if err != nil {
		return err
	}
	log.Info().Str("listen", srv.CoordAddr()).Str("store", p.dsn.String()).Str("election", string(method)).
		Dur("tick_ms", o.tick).Bool("mutex_probe", o.mutexProbe).
		Dur("lease_ttl_ms", o.leaseTTL).Msg("node starting")
	return srv.Run(ctx)
}

// checkRunOpts refuses flags that do not go together and returns the
// election method.
func checkRunOpts(o *runOpts) (election.Method, error) {
	if o.id < 1 {
		return "", usageError{errors.New("--id (-i) is required: the node's id in the node list")}
	}
	method, err := election.ParseMethod(o.election)
	if err != nil {
		return "", usageError{err}
	}
	if o.tick < time.Millisecond {
		return "", usageError{fmt.Errorf("--tick %v is below 1ms", o.tick)}
	}
	if o.metrics != "" {
		if err := metrics.CheckAddr(o.metrics); err != nil {
			return "", usageError{fmt.Errorf("--metrics-addr: %w", err)}
		}
	}
	if o.pprof && o.metrics == "" {
		return "", usageError{errors.New("--pprof is served on the metrics listener: give --metrics-addr too")}
	}
	if o.chat.auth != "" {
		if _, err := chat.ParseAuthMode(o.chat.auth); err != nil {
			return "", usageError{fmt.Errorf("--auth: %w", err)}
		}
	}
	if o.leaseTTL < 3*o.tick {
		return "", usageError{fmt.Errorf("--lease-ttl %v must be at least three ticks (%v)", o.leaseTTL, 3*o.tick)}
	}
	return method, nil
}

// nodeTable resets the ring state first with --drop, and returns the node
// table and this node's row in it.
func nodeTable(ctx context.Context, st store.Store, o *runOpts, nodes string, log zerolog.Logger) ([]store.NodeRow, *store.NodeRow, error) {
	if o.drop {
		if err := st.ResetRing(ctx); err != nil {
			return nil, nil, err
		}
		log.Info().Msg("ring state reset (--drop)")
	}
	table, err := st.Nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	var self *store.NodeRow
	for i := range table {
		if table[i].ID == o.id {
			self = &table[i]
		}
	}
	if self == nil {
		return nil, nil, fmt.Errorf("node %d is not in the node table (add it to %s and run again, or check --db)", o.id, nodes)
	}
	return table, self, nil
}

// nodeCodec signs the node's frames with the cluster key: the key file's,
// RINGNODE_CLUSTER_KEY's, or the development key where it is allowed.
func nodeCodec(o *runOpts, table []store.NodeRow, log zerolog.Logger) (*wire.Codec, error) {
	key, isDev, err := wire.LoadKey(o.keyFile, os.Getenv("RINGNODE_CLUSTER_KEY"))
	if err != nil {
		return nil, err
	}
	if isDev {
		if err := devKeyAllowed(table, o.listen); err != nil {
			return nil, err
		}
		ev := log.Warn()
		if os.Getenv(devKeyWarnedEnv) == "1" {
			ev = log.Debug() // ringnode cluster said it once for all
		}
		ev.Msg("no cluster key (--cluster-key-file or RINGNODE_CLUSTER_KEY): using the insecure development key (loopback only)")
	} else if o.keyFile != "" {
		if fi, err := os.Stat(o.keyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn().Str("file", o.keyFile).Str("mode", fi.Mode().Perm().String()).Msg("the cluster key file is readable by other users: chmod 600 it")
		}
	}
	return wire.NewCodec(key)
}

// nodeChatConfig is the chat service's configuration, with the login
// policy (logged).
func nodeChatConfig(o *runOpts, self store.NodeRow, table []store.NodeRow, st store.Store, log zerolog.Logger) (chat.Config, error) {
	auth, err := authMode(o.chat, self, table)
	if err != nil {
		return chat.Config{}, err
	}
	if auth == chat.AuthOpen {
		log.Info().Msg("logins: open (--auth open): protocol-1 clients welcome; names without a password can be used by anyone")
	} else {
		log.Info().Msg("logins: password (--auth password): protocol 2 and a password for every login")
	}
	return chatConfig(self, st, o.chat, auth)
}

// nodeConfig is the node runtime's configuration.
func nodeConfig(o *runOpts, method election.Method, log zerolog.Logger) node.Config {
	ncfg := node.DefaultConfig(o.id)
	ncfg.Ring.Tick = o.tick
	ncfg.Ring.Election.Method = method
	ncfg.Ring.Election.LeaseTicks = int(o.leaseTTL / o.tick)
	ncfg.StatsInterval = o.stats
	if o.mutexProbe {
		ncfg.Sections = append(ncfg.Sections, node.MutexProbe(log))
	}
	return ncfg
}

// startCPUProfile profiles the whole run into file (none when it is ""); stop
// ends the profile and closes the file.
func startCPUProfile(file string) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// devKeyAllowed refuses the public development key for a ring that is
// reachable off this machine: a node list with a non-loopback host, or a
// ring port on a non-loopback address.
func devKeyAllowed(table []store.NodeRow, listen string) error {
	const how = "give --cluster-key-file FILE (make one with `ringnode keygen FILE` and copy it to every node's host) or RINGNODE_CLUSTER_KEY"
	for _, n := range table {
		if !loopbackHost(n.Host) {
			return usageError{fmt.Errorf("node %d's host %s is not a loopback address: a ring off this machine needs a cluster key; %s", n.ID, n.Host, how)}
		}
	}
	if listen != "" {
		if host, _, err := net.SplitHostPort(listen); err == nil && !loopbackHost(host) {
			return usageError{fmt.Errorf("--listen %s is not a loopback address: a ring off this machine needs a cluster key; %s", listen, how)}
		}
	}
	return nil
}

// loopbackHost reports whether host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenAddr is where a node listens: an explicit --listen, else its port on
// its own address when that is a loopback one (several nodes on one
// machine), else on all interfaces (one node per lab machine).
func listenAddr(self store.NodeRow, explicit string) string {
	if explicit != "" {
		return explicit
	}
	port := strconv.Itoa(self.CoordPort)
	if ip := net.ParseIP(self.Host); (ip != nil && ip.IsLoopback()) || self.Host == "localhost" {
		return net.JoinHostPort(self.Host, port)
	}
	return net.JoinHostPort("", port)
}
