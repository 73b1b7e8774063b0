package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// FreePort returns a port free for both TCP and UDP on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := procutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Proc is a node process started by a Ring.
type Proc struct {
	ID   int64
	cmd  *exec.Cmd
	log  *procutil.Buffer
	done chan struct{}
	err  error
}

// Ring runs ringnode processes on 127.0.0.1 with their own node list.
type Ring struct {
	t      testing.TB
	Bin    string
	Dir    string
	DSN    string
	Nodes  string // node list path
	Ports  map[int64][2]int
	Extra  []string // extra flags for every node
	mu     sync.Mutex
	procs  map[int64]*Proc
	allLog map[int64]*bytes.Buffer // logs of earlier incarnations
}

// NewRing writes a node list of ids with free ports.
func NewRing(t testing.TB, bin, dsn string, ids ...int64) *Ring {
	t.Helper()
	r := &Ring{t: t, Bin: bin, Dir: t.TempDir(), DSN: dsn, Ports: map[int64][2]int{},
		procs: map[int64]*Proc{}, allLog: map[int64]*bytes.Buffer{}}
	var b bytes.Buffer
	b.WriteString("id,host,coordination_port,client_port\n")
	// Distinct: two searches can find the same free port.
	ports, err := procutil.FreePorts(2 * len(ids))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		p := [2]int{ports[2*i], ports[2*i+1]}
		r.Ports[id] = p
		fmt.Fprintf(&b, "%d,127.0.0.1,%d,%d\n", id, p[0], p[1])
	}
	r.Nodes = filepath.Join(r.Dir, "nodes.csv")
	if err := os.WriteFile(r.Nodes, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.KillAll)
	return r
}

// Start starts node id (which must not be running).
func (r *Ring) Start(id int64, flags ...string) {
	r.t.Helper()
	args := append([]string{"run", "--id", strconv.FormatInt(id, 10), "--db", r.DSN, "--nodes", r.Nodes,
		"--log-format", "json", "--log-level", "info"}, r.Extra...)
	args = append(args, flags...)
	cmd := exec.Command(r.Bin, args...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), "RINGNODE_CLUSTER_KEY=0123456789abcdef0123456789abcdef-test-key")
	buf := &procutil.Buffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start node %d: %v", id, err)
	}
	p := &Proc{ID: id, cmd: cmd, log: buf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	r.mu.Lock()
	r.procs[id] = p
	r.mu.Unlock()
}

// Signal sends sig to node id.
func (r *Ring) Signal(id int64, sig syscall.Signal) {
	r.t.Helper()
	p := r.proc(id)
	if err := p.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %v to node %d: %v", sig, id, err)
	}
}

func (r *Ring) proc(id int64) *Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[id]
	if p == nil {
		r.t.Fatalf("node %d is not running", id)
	}
	return p
}

// Wait waits for node id to exit and returns its exit code.
func (r *Ring) Wait(id int64, within time.Duration) int {
	r.t.Helper()
	p := r.proc(id)
	select {
	case <-p.done:
	case <-time.After(within):
		r.t.Fatalf("node %d did not exit within %v", id, within)
	}
	r.retire(id)
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// Kill sends SIGKILL to node id and waits for it.
func (r *Ring) Kill(id int64) {
	r.t.Helper()
	r.Signal(id, syscall.SIGKILL)
	r.Wait(id, 10*time.Second)
}

// Running reports the ids of processes started and not yet waited for.
func (r *Ring) Running() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for id := range r.procs {
		ids = append(ids, id)
	}
	return ids
}

// Exited reports whether node id has exited (without waiting).
func (r *Ring) Exited(id int64) bool {
	p := r.proc(id)
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (r *Ring) retire(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[id]
	if p == nil {
		return
	}
	if r.allLog[id] == nil {
		r.allLog[id] = &bytes.Buffer{}
	}
	r.allLog[id].Write(p.log.Bytes())
	delete(r.procs, id)
}

// Log returns everything node id has logged, over all its incarnations.
func (r *Ring) Log(id int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	if old := r.allLog[id]; old != nil {
		b.Write(old.Bytes())
	}
	if p := r.procs[id]; p != nil {
		b.Write(p.log.Bytes())
	}
	return b.Bytes()
}

// KillAll kills every running node (test cleanup), printing their logs if
// the test failed.
func (r *Ring) KillAll() {
	for _, id := range r.Running() {
		p := r.proc(id)
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
		r.retire(id)
	}
	if r.t.Failed() {
		for id, b := range r.allLog {
			tail := b.Bytes()
			if len(tail) > 6000 {
				tail = tail[len(tail)-6000:]
			}
			r.t.Logf("--- node %d log (tail) ---\n%s", id, tail)
		}
	}
}
