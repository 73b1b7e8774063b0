package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// procRing runs ringnode processes on 127.0.0.1 with their own node list.
type procRing struct {
	bin   string
	dir   string
	dsn   string
	nodes string
	flags []string
	// nodeFlags, if set, gives extra flags for one node (a metrics port).
	nodeFlags func(id int64) []string
	mu        sync.Mutex
	procs     map[int64]*proc
	logs      map[int64]*bytes.Buffer
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *procutil.Buffer
}

func newProcRing(bin, dir, dsn string, n int, flags []string) (*procRing, error) {
	var b strings.Builder
	b.WriteString("id,host,coordination_port,client_port\n")
	ports, err := procutil.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	for id := 1; id <= n; id++ {
		fmt.Fprintf(&b, "%d,127.0.0.1,%d,%d\n", id, ports[2*id-2], ports[2*id-1])
	}
	path := filepath.Join(dir, "nodes.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return &procRing{bin: bin, dir: dir, dsn: dsn, nodes: path, flags: flags,
		procs: map[int64]*proc{}, logs: map[int64]*bytes.Buffer{}}, nil
}

func (r *procRing) start(id int64) error {
	args := append([]string{"run", "--id", strconv.FormatInt(id, 10), "--db", r.dsn, "--nodes", r.nodes,
		"--log-format", "json", "--log-level", "info"}, r.flags...)
	if r.nodeFlags != nil {
		args = append(args, r.nodeFlags(id)...)
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "RINGNODE_CLUSTER_KEY=ringbench-cluster-key-0123456789abcdef")
	out := &procutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	r.mu.Lock()
	r.procs[id] = p
	r.mu.Unlock()
	return nil
}

func (r *procRing) signal(id int64, sig syscall.Signal) error {
	r.mu.Lock()
	p := r.procs[id]
	r.mu.Unlock()
	if p == nil {
		return fmt.Errorf("node %d not running", id)
	}
	return p.cmd.Process.Signal(sig)
}

// kill kills node id and waits for it.
func (r *procRing) kill(id int64) {
	r.mu.Lock()
	p := r.procs[id]
	delete(r.procs, id)
	r.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
	r.mu.Lock()
	if r.logs[id] == nil {
		r.logs[id] = &bytes.Buffer{}
	}
	r.logs[id].Write(p.out.Bytes())
	r.mu.Unlock()
}

func (r *procRing) stopAll() {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.procs))
	for id := range r.procs {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.kill(id)
	}
}

// pid returns node id's process id (0 if it is not running).
func (r *procRing) pid(id int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[id]; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

func (r *procRing) pids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, p := range r.procs {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

// logLines returns the JSON log lines of every node with the given message.
func (r *procRing) logLines(message string) []map[string]any {
	r.mu.Lock()
	var all [][]byte
	for _, b := range r.logs {
		all = append(all, b.Bytes())
	}
	for _, p := range r.procs {
		all = append(all, p.out.Bytes())
	}
	r.mu.Unlock()
	var out []map[string]any
	for _, b := range all {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["message"] == message {
				out = append(out, m)
			}
		}
	}
	return out
}

// cpuTime returns the CPU time consumed so far by every thread of pid, from
// the scheduler's own accounting (nanoseconds; /proc/PID/stat's tick-sampled
// counters are too coarse for a process that wakes briefly and often).
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(b))
		if len(fields) == 0 {
			continue
		}
		ns, _ := strconv.ParseInt(fields[0], 10, 64)
		sum += time.Duration(ns)
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("no such process %d", pid)
	}
	return sum, nil
}
