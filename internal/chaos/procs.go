package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"os"
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

// nodeAddr are a node's address and ports.
type nodeAddr struct {
	Host    string // 127.0.0.1, or the node's own alias with network faults on
	Coord   int    // TCP and UDP
	Client  int
	Metrics int // 0 when the binary has no --metrics-addr
}

// procs runs the ring's node processes, and tells the exits the harness
// caused from those nobody caused.
type procs struct {
	bin   string
	dir   string
	dsnOf func(id int64) string // the node's --db
	nodes string                // node list path
	key   string                // cluster key text
	flags map[int64][]string
	// logLevel is the nodes' --log-level ("": info).
	logLevel string
	addrs    map[int64]nodeAddr
	net      *netLayout // with network faults: each node runs under its own group id
	note     func(format string, args ...any)
	sup      procutil.Supervisor

	mu     sync.Mutex
	expect map[*procutil.Proc]string // exits the harness causes: "kill", "term"
	unexp  []*procutil.Proc          // exits nobody caused, not yet handled
}

func newProcs(bin, dir string, dsnOf func(int64) string, key string, n int, metrics bool, flags map[int64][]string,
	lay *netLayout, note func(string, ...any)) (*procs, error) {
	var b strings.Builder
	b.WriteString("id,host,coordination_port,client_port\n")
	addrs := map[int64]nodeAddr{}
	for id := int64(1); id <= int64(n); id++ {
		a := nodeAddr{Host: "127.0.0.1"}
		if lay != nil {
			a.Host = lay.addr(id)
		}
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
		fmt.Fprintf(&b, "%d,%s,%d,%d\n", id, a.Host, a.Coord, a.Client)
	}
	path := filepath.Join(dir, "nodes.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	p := &procs{bin: bin, dir: dir, dsnOf: dsnOf, nodes: path, key: key, flags: flags, addrs: addrs, net: lay, note: note,
		expect: map[*procutil.Proc]string{}}
	p.sup.OnExit = p.exited
	return p, nil
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

// start starts node id, which must not be running; each run logs to
// node-ID.RUN.log in the run's directory.
func (p *procs) start(id int64) error {
	args := []string{"run", "--id", strconv.FormatInt(id, 10), "--db", p.dsnOf(id), "--nodes", p.nodes,
		"--log-format", "json", "--log-level", cmp.Or(p.logLevel, "info"), "--mutex-probe", "--stats-interval", "10s"}
	if a := p.addrs[id]; a.Metrics != 0 {
		args = append(args, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", a.Metrics))
	}
	args = append(args, p.flags[id]...)
	attr := childAttr()
	if p.net != nil {
		// As setpriv --regid G --clear-groups --reuid 0 would: the
		// network faults tell the node's packets by this group.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: p.net.GID(id), Groups: []uint32{}}
	}
	path := p.bin
	if p.net != nil && p.net.Lab != nil {
		path, args = p.net.Lab.wrap(id, p.bin, args)
	}
	_, err := p.sup.Start(id, procutil.Spec{Path: path, Args: args, Dir: p.dir, LogDir: p.dir,
		Env: append(os.Environ(), "RINGNODE_CLUSTER_KEY="+p.key), SysProcAttr: attr})
	return err
}

// restart starts node id again as it was started (its next run), once its
// last run is over.
func (p *procs) restart(id int64) error {
	_, err := p.sup.Restart(id)
	return err
}

// exited records an exit nobody caused (the supervisor's OnExit).
func (p *procs) exited(in *procutil.Proc, e procutil.Exit) {
	p.mu.Lock()
	unexpected := p.expect[in] == ""
	if unexpected {
		p.unexp = append(p.unexp, in)
	}
	p.mu.Unlock()
	if unexpected {
		p.note("!!! node %d (run %d, pid %d) exited on its own: code %d %s (log %s)",
			in.ID, in.Run, in.Pid, e.Code, signalName(e.Signal), in.LogPath)
	}
}

// signalName is the name of the signal that ended a process ("killed"),
// "" when none did.
func signalName(sig syscall.Signal) string {
	if sig == 0 {
		return ""
	}
	return sig.String()
}

// exitLine describes an exit nobody caused, for the report.
func (r *runner) exitLine(in *procutil.Proc) string {
	e, _ := in.Exited()
	return fmt.Sprintf("node %d run %d (pid %d) exited on its own at +%s: code %d %s; log %s",
		in.ID, in.Run, in.Pid, r.since(e.At), e.Code, signalName(e.Signal), in.LogPath)
}

// running returns the live process of node id, or nil.
func (p *procs) running(id int64) *procutil.Proc {
	return p.sup.Live(id)
}

// expecting marks in's coming exit as caused by the harness (how: "kill",
// "term").
func (p *procs) expecting(in *procutil.Proc, how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expect[in] = how
}

// expected is how the harness ended in ("" if it did not).
func (p *procs) expected(in *procutil.Proc) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expect[in]
}

// last returns node id's last run, live or not (nil if never started).
func (p *procs) last(id int64) *procutil.Proc {
	return p.sup.Proc(id)
}

// kill sends SIGKILL to node id and waits for it to exit.
func (p *procs) kill(id int64) error {
	in := p.running(id)
	if in == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	p.expecting(in, "kill")
	_, err := in.Kill(30 * time.Second)
	return err
}

// term sends SIGTERM to node id and waits up to within for it to exit; it
// returns the exit code.
func (p *procs) term(id int64, within time.Duration) (int, error) {
	in := p.running(id)
	if in == nil {
		return 0, fmt.Errorf("node %d is not running", id)
	}
	p.expecting(in, "term")
	e, err := in.Term(within)
	return e.Code, err
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
	return in.Signal(sig)
}

// takeUnexpected returns the exits nobody caused since the last call.
func (p *procs) takeUnexpected() []*procutil.Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.unexp
	p.unexp = nil
	return out
}

// killAll kills every running node (cleanup).
func (p *procs) killAll() {
	live := p.sup.LiveProcs()
	p.mu.Lock()
	for _, in := range live {
		if p.expect[in] == "" {
			p.expect[in] = "kill"
		}
	}
	p.mu.Unlock()
	p.sup.StopAll(0)
}

// incarnations returns every run of a node started so far, in start order.
func (p *procs) incarnations() []*procutil.Proc {
	return p.sup.Procs()
}
