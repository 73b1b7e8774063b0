package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/metrics"
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
	ctx := cmd.Context()
	p, err := g.prepareStore(cmd)
	if err != nil {
		return err
	}
	st := p.st
	if o.drop {
		err = st.ResetRing(ctx)
	}
	table, terr := st.Nodes(ctx)
	st.Close()
	if err != nil {
		return err
	}
	if terr != nil {
		return terr
	}
	if count > 0 && count < len(table) {
		table = table[:count]
	}
	if len(table) == 0 {
		return errors.New("cluster: the node table is empty (give a node list with --nodes)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFormat := g.logFormat
	if logFormat == "auto" {
		logFormat = "json"
		if f, ok := cmd.ErrOrStderr().(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			logFormat = "console"
		}
	}
	// The DSN reaches the children in a file or the environment, never on
	// their command lines (ps shows those to every user).
	args := []string{"run", "--nodes", g.nodes, "--log-level", g.logLevel, "--log-format", logFormat,
		"--election", o.election, "--tick", o.tick.String(), "--lease-ttl", o.leaseTTL.String()}
	if o.keyFile != "" {
		args = append(args, "--cluster-key-file", o.keyFile)
	}
	childEnv := os.Environ()
	if g.usedDBFile {
		args = append(args, "--db-file", g.dbFile)
		childEnv = withoutEnv(childEnv, "RINGCHAT_DB", "RINGNODE_DB")
	} else {
		childEnv = append(withoutEnv(childEnv, "RINGCHAT_DB", "RINGNODE_DB", "RINGNODE_DB_FILE"), "RINGCHAT_DB="+g.db)
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
			return usageError{fmt.Errorf("--metrics-addr: %w", err)}
		}
	}
	if o.keyFile == "" && os.Getenv("RINGNODE_CLUSTER_KEY") == "" {
		// The nodes would each warn; once is enough.
		fmt.Fprintln(cmd.ErrOrStderr(), "cluster: no cluster key (--cluster-key-file or RINGNODE_CLUSTER_KEY): the nodes use the insecure development key (loopback only)")
		childEnv = append(childEnv, devKeyWarnedEnv+"=1")
	}
	out := &lockedWriter{w: cmd.ErrOrStderr()}
	var running atomic.Int64
	var wg sync.WaitGroup
	var procs []*exec.Cmd
	failed := make(chan string, len(table))
	for i, n := range table {
		nargs, err := nodeArgs(o, i, n.ID)
		if err != nil {
			stopAll(procs)
			return usageError{err}
		}
		c := exec.Command(self, append(slices.Clone(args), nargs...)...)
		c.Env = childEnv
		prefix := fmt.Sprintf("[node %d] ", n.ID)
		stdout, _ := c.StdoutPipe()
		stderr, _ := c.StderrPipe()
		if err := c.Start(); err != nil {
			stopAll(procs)
			return fmt.Errorf("cluster: start node %d: %w", n.ID, err)
		}
		procs = append(procs, c)
		running.Add(1)
		for _, r := range []io.Reader{stdout, stderr} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				copyPrefixed(out, r, prefix)
			}()
		}
		id := n.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Wait()
			running.Add(-1)
			if err != nil {
				failed <- fmt.Sprintf("node %d: %v", id, err)
			}
			fmt.Fprintf(out, "cluster: node %d exited (%v)\n", id, exitText(err))
			if ctx.Err() == nil {
				fmt.Fprintf(out, "cluster: node %d is not restarted; to start it again, in another terminal: %s\n", id, restartCommand(self, g, o, id))
			}
		}()
	}
	fmt.Fprintf(out, "cluster: %d nodes started; Ctrl-C stops them\n", len(procs))
	<-ctx.Done()
	if live := running.Load(); int(live) < len(procs) {
		fmt.Fprintf(out, "cluster: stopping %d nodes (%d had exited)\n", live, len(procs)-int(live))
	} else {
		fmt.Fprintf(out, "cluster: stopping %d nodes\n", live)
	}
	stopAll(procs)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(clusterStopGrace):
		for _, p := range procs {
			_ = p.Process.Kill()
		}
		<-done
	}
	close(failed)
	var errs []error
	for f := range failed {
		errs = append(errs, errors.New(f))
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: %w", errors.Join(errs...))
	}
	return nil
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

// withoutEnv is env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// stopAll asks every child to leave the ring.
func stopAll(procs []*exec.Cmd) {
	for _, p := range procs {
		if p.Process != nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
}

// copyPrefixed copies r to w line by line, each line prefixed.
func copyPrefixed(w io.Writer, r io.Reader, prefix string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_, _ = w.Write([]byte(prefix + sc.Text() + "\n"))
	}
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

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}
