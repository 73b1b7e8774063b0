package testutil

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// Ring runs ringnode processes on 127.0.0.1 with their own node list.
type Ring struct {
	t     testing.TB
	Bin   string
	Dir   string
	DSN   string
	Nodes string // node list path
	Ports map[int64][2]int
	Extra []string // extra flags for every node
	sup   procutil.Supervisor

	mu      sync.Mutex
	logs    map[int64][]*procutil.Buffer // every run's output, in start order
	retired map[*procutil.Proc]bool      // runs waited for
}

// NewRing writes a node list of ids with free ports.
func NewRing(t testing.TB, bin, dsn string, ids ...int64) *Ring {
	t.Helper()
	r := &Ring{t: t, Bin: bin, Dir: t.TempDir(), DSN: dsn, Ports: map[int64][2]int{},
		logs: map[int64][]*procutil.Buffer{}, retired: map[*procutil.Proc]bool{}}
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
	buf := &procutil.Buffer{}
	r.mu.Lock()
	r.logs[id] = append(r.logs[id], buf)
	r.mu.Unlock()
	_, err := r.sup.Start(id, procutil.Spec{Path: r.Bin, Args: args, Dir: r.Dir, Log: buf,
		Env: append(os.Environ(), "RINGNODE_CLUSTER_KEY=0123456789abcdef0123456789abcdef-test-key")})
	if err != nil {
		r.t.Fatal(err)
	}
}

// Signal sends sig to node id.
func (r *Ring) Signal(id int64, sig syscall.Signal) {
	r.t.Helper()
	if err := r.proc(id).Signal(sig); err != nil {
		r.t.Fatal(err)
	}
}

// proc is node id's last run, which must not have been waited for.
func (r *Ring) proc(id int64) *procutil.Proc {
	r.t.Helper()
	p := r.sup.Proc(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil || r.retired[p] {
		r.t.Fatalf("node %d is not running", id)
	}
	return p
}

// Wait waits for node id to exit and returns its exit code.
func (r *Ring) Wait(id int64, within time.Duration) int {
	r.t.Helper()
	p := r.proc(id)
	e, err := p.Wait(within)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.retired[p] = true
	r.mu.Unlock()
	return e.Code
}

// Kill sends SIGKILL to node id and waits for it.
func (r *Ring) Kill(id int64) {
	r.t.Helper()
	r.Signal(id, syscall.SIGKILL)
	r.Wait(id, 10*time.Second)
}

// Running reports the ids of processes started and not yet waited for.
func (r *Ring) Running() []int64 {
	var ids []int64
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.logs {
		if p := r.sup.Proc(id); p != nil && !r.retired[p] {
			ids = append(ids, id)
		}
	}
	return ids
}

// Exited reports whether node id has exited (without waiting).
func (r *Ring) Exited(id int64) bool {
	r.t.Helper()
	_, done := r.proc(id).Exited()
	return done
}

// Log returns everything node id has logged, over all its runs.
func (r *Ring) Log(id int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	for _, run := range r.logs[id] {
		b.Write(run.Bytes())
	}
	return b.Bytes()
}

// KillAll kills every running node (test cleanup), printing their logs if
// the test failed.
func (r *Ring) KillAll() {
	r.sup.StopAll(0)
	if !r.t.Failed() {
		return
	}
	r.mu.Lock()
	ids := slices.Sorted(maps.Keys(r.logs))
	r.mu.Unlock()
	for _, id := range ids {
		tail := r.Log(id)
		if len(tail) > 6000 {
			tail = tail[len(tail)-6000:]
		}
		r.t.Logf("--- node %d log (tail) ---\n%s", id, tail)
	}
}
