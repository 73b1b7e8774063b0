package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/metrics"
	"github.com/ringchat/ringchat/internal/procutil"
	"github.com/ringchat/ringchat/internal/store"
)

// clusterStopGrace is how long children get to leave the ring after SIGTERM
// before they are killed.
const clusterStopGrace = 15 * time.Second

func newClusterCmd(g *globals) *cobra.Command {
	o := &runOpts{}
	var count int
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run the node list's nodes as child processes on this machine",
		Long: `cluster starts one "ringnode run" child per node of the node list (or the first
--count), with this command's store, election, chat, probe and statistics settings,
prefixes their output with the node id, and on Ctrl-C (or SIGTERM) stops them all:
each leaves the ring cleanly. With --drop the ring state is reset once before the
nodes start. With --metrics-addr HOST:PORT the i-th node (from 0) serves on
PORT+i; --cpu-profile FILE writes FILE.node<ID> per node.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCluster(cmd, g, o, count) },
	}
	addRunFlags(cmd.Flags(), o)
	_ = cmd.Flags().MarkHidden("id")
	_ = cmd.Flags().MarkHidden("listen")
	_ = cmd.Flags().MarkHidden("client-listen")
	cmd.Flags().IntVar(&count, "count", 0, "start only the first N nodes of the node list (0: all)")
	return cmd
}

// nodeArgs are the flags of the i-th node of the cluster, id: its id, and
// what cannot be shared: node i serves metrics on the --metrics-addr port
// plus i (port 0: one chosen for each), and writes its CPU profile to the
// --cpu-profile file with ".node<id>" appended.
func nodeArgs(o *runOpts, i int, id int64) ([]string, error) {
	args := []string{"--id", strconv.FormatInt(id, 10)}
	if o.metrics != "" {
		host, port, err := net.SplitHostPort(o.metrics)
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr %q: %w", o.metrics, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p+i > 65535 {
			return nil, fmt.Errorf("--metrics-addr %q: no port %s+%d for node %d", o.metrics, port, i, id)
		}
		if p != 0 {
			p += i
		}
		args = append(args, "--metrics-addr", net.JoinHostPort(host, strconv.Itoa(p)))
	}
	if o.cpuProfile != "" {
		args = append(args, "--cpu-profile", fmt.Sprintf("%s.node%d", o.cpuProfile, id))
	}
	return args, nil
}

func runCluster(cmd *cobra.Command, g *globals, o *runOpts, count int) error {
	if count < 0 {
		return usageError{fmt.Errorf("--count %d is negative", count)}
	}
	table, err := clusterTable(cmd, g, o.drop, count)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args, env, err := childCommand(cmd, g, o)
	if err != nil {
		return err
	}
	out := &lockedWriter{w: cmd.ErrOrStderr()}
	specs := make([]procutil.Spec, len(table))
	for i, n := range table {
		nargs, err := nodeArgs(o, i, n.ID)
		if err != nil {
			return usageError{err}
		}
		specs[i] = procutil.Spec{Path: self, Args: append(slices.Clone(args), nargs...), Env: nodeEnv(env, g, i),
			Log: out, Prefix: fmt.Sprintf("[node %d] ", n.ID)}
	}
	c := &cluster{out: out,
		restart: func(id int64) string { return restartCommand(self, g, o, id) }}
	return c.run(cmd.Context(), table, specs)
}

// clusterTable is the node table, reset first with drop, cut to its first
// count nodes (0: all).
func clusterTable(cmd *cobra.Command, g *globals, drop bool, count int) ([]store.NodeRow, error) {
	ctx := cmd.Context()
	p, err := g.prepareStore(cmd, g.log)
	if err != nil {
		return nil, err
	}
	st := p.st
	if drop {
		err = st.ResetRing(ctx)
	}
	table, terr := st.Nodes(ctx)
	st.Close()
	if err != nil {
		return nil, err
	}
	if terr != nil {
		return nil, terr
	}
	if count > 0 && count < len(table) {
		table = table[:count]
	}
	if len(table) == 0 {
		return nil, errors.New("cluster: the node table is empty (give a node list with --nodes)")
	}
	return table, nil
}

// childCommand is the command line and the environment the cluster's
// nodes share. The DSN reaches them in a file or the environment, never
// on their command lines (ps shows those to every user).
func childCommand(cmd *cobra.Command, g *globals, o *runOpts) (args, env []string, err error) {
	args = []string{"run", "--nodes", g.nodes, "--log-level", g.logLevel, "--log-format", childLogFormat(cmd, g),
		"--election", o.election, "--tick", o.tick.String(), "--lease-ttl", o.leaseTTL.String()}
	if o.keyFile != "" {
		args = append(args, "--cluster-key-file", o.keyFile)
	}
	env = os.Environ()
	if g.usedDBFile {
		args = append(args, "--db-file", g.dbFile)
		env = withoutEnv(env, "RINGCHAT_DB", "RINGNODE_DB")
	} else {
		env = append(withoutEnv(env, "RINGCHAT_DB", "RINGNODE_DB", "RINGNODE_DB_FILE"), "RINGCHAT_DB="+g.db)
	}
	if g.dbCA != "" {
		args = append(args, "--db-ca", g.dbCA)
	}
	if o.mutexProbe {
		args = append(args, "--mutex-probe")
	}
	if o.pprof {
		args = append(args, "--pprof")
	}
	args = append(args, chatArgs(cmd.Flags())...)
	if o.stats > 0 {
		args = append(args, "--stats-interval", o.stats.String())
	}
	if o.metrics != "" {
		if err := metrics.CheckAddr(o.metrics); err != nil {
			return nil, nil, usageError{fmt.Errorf("--metrics-addr: %w", err)}
		}
	}
	if o.keyFile == "" && os.Getenv("RINGNODE_CLUSTER_KEY") == "" {
		// The nodes would each warn; once is enough.
		fmt.Fprintln(cmd.ErrOrStderr(), "cluster: no cluster key (--cluster-key-file or RINGNODE_CLUSTER_KEY): the nodes use the insecure development key (loopback only)")
		env = append(env, devKeyWarnedEnv+"=1")
	}
	return args, env, nil
}

// childLogFormat is the nodes' --log-format: auto is console when the
// cluster's standard error is a terminal, JSON otherwise.
func childLogFormat(cmd *cobra.Command, g *globals) string {
	if g.logFormat != "auto" {
		return g.logFormat
	}
	if f, ok := cmd.ErrOrStderr().(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return "console"
	}
	return "json"
}

// cluster runs the nodes as child processes until its context ends, their
// output prefixed on out. A node that exits is not restarted: the cluster
// says so, with the command that starts it again by hand.
type cluster struct {
	out     io.Writer
	restart func(id int64) string // the command that starts node id again

	mu     sync.Mutex
	failed []error // the nodes that exited with an error
}

// run starts a node per spec (table's, in order), waits for ctx to end, then
// asks every node to leave and kills those still running after
// clusterStopGrace.
func (c *cluster) run(ctx context.Context, table []store.NodeRow, specs []procutil.Spec) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sup := &procutil.Supervisor{OnExit: func(p *procutil.Proc, e procutil.Exit) { c.exited(ctx, p, e) }}
	for i, n := range table {
		if _, err := sup.Start(n.ID, specs[i]); err != nil {
			cancel() // not a node dying: no command to restart it
			sup.StopAll(clusterStopGrace)
			return fmt.Errorf("cluster: %w", err)
		}
	}
	fmt.Fprintf(c.out, "cluster: %d nodes started; Ctrl-C stops them\n", len(table))
	<-ctx.Done()
	if live := len(sup.LiveProcs()); live < len(table) {
		fmt.Fprintf(c.out, "cluster: stopping %d nodes (%d had exited)\n", live, len(table)-live)
	} else {
		fmt.Fprintf(c.out, "cluster: stopping %d nodes\n", live)
	}
	sup.StopAll(clusterStopGrace)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failed) > 0 {
		return fmt.Errorf("cluster: %w", errors.Join(c.failed...))
	}
	return nil
}

// exited reports a node's exit (the supervisor's OnExit).
func (c *cluster) exited(ctx context.Context, p *procutil.Proc, e procutil.Exit) {
	if e.Err != nil {
		c.mu.Lock()
		c.failed = append(c.failed, fmt.Errorf("node %d: %v", p.ID, e.Err))
		c.mu.Unlock()
	}
	fmt.Fprintf(c.out, "cluster: node %d exited (%v)\n", p.ID, e)
	if ctx.Err() == nil {
		fmt.Fprintf(c.out, "cluster: node %d is not restarted; to start it again, in another terminal: %s\n", p.ID, c.restart(p.ID))
	}
}

// devKeyWarnedEnv tells the cluster's nodes that it has warned about the
// development key, so that they do not warn again, each.
const devKeyWarnedEnv = "RINGNODE_DEV_KEY_WARNED"

// restartCommand is how to start node id of the cluster by hand: its
// store is the cluster's (a --db-file, or RINGCHAT_DB as the cluster had).
func restartCommand(self string, g *globals, o *runOpts, id int64) string {
	c := fmt.Sprintf("%s run --id %d --nodes %s", self, id, g.nodes)
	if o.keyFile != "" {
		c += " --cluster-key-file " + o.keyFile
	}
	switch {
	case g.usedDBFile:
		return c + " --db-file " + g.dbFile
	case strings.HasPrefix(g.db, "sqlite:"): // a path, no secret
		return c + " --db " + g.db
	default:
		return c + " (with RINGCHAT_DB set to the cluster's store, or --db-file)"
	}
}

// nodeEnv is the i-th node's environment: with several database servers
// in RINGCHAT_DB (a Galera cluster), the i-th node starts on the i-th
// server, the others after it in order, so the ring's nodes spread over
// the cluster.
func nodeEnv(env []string, g *globals, i int) []string {
	if g.usedDBFile {
		return env
	}
	rotated := store.RotateHosts(g.db, i)
	if rotated == g.db {
		return env
	}
	return append(withoutEnv(env, "RINGCHAT_DB"), "RINGCHAT_DB="+rotated)
}

// withoutEnv is env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// lockedWriter serialises whole-line writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
