package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// ports hands out free ports, never the same one twice in this process
// (procutil.FreePort checks that a port is free now, and a port just
// released is often offered again).
var ports = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	for range 100 {
		p, err := procutil.FreePort()
		if err != nil {
			return 0, err
		}
		if !ports.used[p] {
			ports.used[p] = true
			return p, nil
		}
	}
	return 0, errors.New("chaos: no unused free port found")
}

// nodeAddr are a node's ports on 127.0.0.1.
type nodeAddr struct {
	Coord   int // TCP and UDP
	Client  int
	Metrics int // 0 when the binary has no --metrics-addr
}

// incarnation is one run of a node process.
type incarnation struct {
	Node    int64
	N       int // 1 for the first start of the node, 2 for the next...
	Pid     int
	LogPath string
	Started time.Time

	// Set by the harness before it signals the process.
	expect string // "" (must not exit), "kill", "term"

	done     chan struct{}
	exited   time.Time
	exitCode int    // -1 if killed by a signal
	signal   string // the signal that ended it, if any
	stopped  bool   // SIGSTOPped now
}

// procs runs the ring's node processes.
type procs struct {
	bin   string
	dir   string
	dsn   string
	nodes string // node list path
	key   string // cluster key text
	flags map[int64][]string
	addrs map[int64]nodeAddr
	note  func(format string, args ...any)

	mu    sync.Mutex
	cur   map[int64]*incarnation
	all   []*incarnation
	unexp []*incarnation // exits nobody caused, not yet handled
}

func newProcs(bin, dir, dsn, key string, n int, metrics bool, flags map[int64][]string,
	note func(string, ...any)) (*procs, error) {
	var b strings.Builder
	b.WriteString("id,host,coordination_port,client_port\n")
	addrs := map[int64]nodeAddr{}
	for id := int64(1); id <= int64(n); id++ {
		var a nodeAddr
		var err error
		if a.Coord, err = freePort(); err != nil {
			return nil, err
		}
		if a.Client, err = freePort(); err != nil {
			return nil, err
		}
		if metrics {
			if a.Metrics, err = freePort(); err != nil {
				return nil, err
			}
		}
		addrs[id] = a
		fmt.Fprintf(&b, "%d,127.0.0.1,%d,%d\n", id, a.Coord, a.Client)
	}
	path := filepath.Join(dir, "nodes.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return &procs{bin: bin, dir: dir, dsn: dsn, nodes: path, key: key, flags: flags, addrs: addrs, note: note,
		cur: map[int64]*incarnation{}}, nil
}

// ids returns every node id, ascending.
func (p *procs) ids() []int64 {
	out := make([]int64, 0, len(p.addrs))
	for id := range p.addrs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// start starts node id, which must not be running.
func (p *procs) start(id int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur[id] != nil {
		return fmt.Errorf("node %d is running", id)
	}
	n := 1
	for _, in := range p.all {
		if in.Node == id {
			n++
		}
	}
	logPath := filepath.Join(p.dir, fmt.Sprintf("node-%d.%d.log", id, n))
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child holds its own descriptor
	args := []string{"run", "--id", strconv.FormatInt(id, 10), "--db", p.dsn, "--nodes", p.nodes,
		"--log-format", "json", "--log-level", "info", "--mutex-probe", "--stats-interval", "10s"}
	if a := p.addrs[id]; a.Metrics != 0 {
		args = append(args, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", a.Metrics))
	}
	args = append(args, p.flags[id]...)
	cmd := exec.Command(p.bin, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "RINGNODE_CLUSTER_KEY="+p.key)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %d: %w", id, err)
	}
	in := &incarnation{Node: id, N: n, Pid: cmd.Process.Pid, LogPath: logPath, Started: time.Now(), done: make(chan struct{})}
	p.cur[id] = in
	p.all = append(p.all, in)
	go p.reap(cmd, in)
	return nil
}

// reap waits for an incarnation's exit and records it.
func (p *procs) reap(cmd *exec.Cmd, in *incarnation) {
	err := cmd.Wait()
	p.mu.Lock()
	in.exited = time.Now()
	in.exitCode = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		in.exitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			in.signal = ws.Signal().String()
		}
	} else if err != nil {
		in.exitCode = -1
	}
	if p.cur[in.Node] == in {
		delete(p.cur, in.Node)
	}
	unexpected := in.expect == ""
	if unexpected {
		p.unexp = append(p.unexp, in)
	}
	p.mu.Unlock()
	close(in.done)
	if unexpected {
		p.note("!!! node %d (run %d, pid %d) exited on its own: code %d %s (log %s)",
			in.Node, in.N, in.Pid, in.exitCode, in.signal, in.LogPath)
	}
}

// running returns the current incarnation of node id, or nil.
func (p *procs) running(id int64) *incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur[id]
}

// kill sends SIGKILL to node id and waits for it to exit.
func (p *procs) kill(id int64) error {
	in := p.running(id)
	if in == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	p.mu.Lock()
	in.expect = "kill"
	p.mu.Unlock()
	_ = syscall.Kill(in.Pid, syscall.SIGKILL)
	_ = syscall.Kill(in.Pid, syscall.SIGCONT)
	select {
	case <-in.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("node %d (pid %d) did not die within 30s of SIGKILL", id, in.Pid)
	}
}

// term sends SIGTERM to node id and waits up to within for it to exit; it
// returns the exit code.
func (p *procs) term(id int64, within time.Duration) (int, error) {
	in := p.running(id)
	if in == nil {
		return 0, fmt.Errorf("node %d is not running", id)
	}
	p.mu.Lock()
	in.expect = "term"
	p.mu.Unlock()
	_ = syscall.Kill(in.Pid, syscall.SIGTERM)
	select {
	case <-in.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return in.exitCode, nil
	case <-time.After(within):
		return 0, fmt.Errorf("node %d (pid %d) did not exit within %v of SIGTERM", id, in.Pid, within)
	}
}

// stop sends SIGSTOP (stop true) or SIGCONT to node id.
func (p *procs) stop(id int64, stop bool) error {
	in := p.running(id)
	if in == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(in.Pid, sig); err != nil {
		return fmt.Errorf("%v to node %d: %w", sig, id, err)
	}
	p.mu.Lock()
	in.stopped = stop
	p.mu.Unlock()
	return nil
}

// takeUnexpected returns the exits nobody caused since the last call.
func (p *procs) takeUnexpected() []*incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.unexp
	p.unexp = nil
	return out
}

// killAll kills every running node (cleanup).
func (p *procs) killAll() {
	p.mu.Lock()
	var ins []*incarnation
	for _, in := range p.cur {
		if in.expect == "" {
			in.expect = "kill"
		}
		ins = append(ins, in)
	}
	p.mu.Unlock()
	for _, in := range ins {
		_ = syscall.Kill(in.Pid, syscall.SIGKILL)
		_ = syscall.Kill(in.Pid, syscall.SIGCONT)
	}
	for _, in := range ins {
		<-in.done
	}
}

// incarnations returns every incarnation started so far, in start order.
func (p *procs) incarnations() []*incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.all)
}

// snapshot returns a copy of in's mutable fields.
func (p *procs) snapshot(in *incarnation) incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := *in
	return c
}
