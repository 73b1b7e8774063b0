package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
	"github.com/ringchat/ringchat/internal/store"
)

// procRing runs ringnode processes on 127.0.0.1 with their own node list.
type procRing struct {
	bin   string
	dir   string
	dsn   string
	nodes string
	n     int
	flags []string
	// nodeFlags, if set, gives extra flags for one node (a metrics port).
	nodeFlags func(id int64) []string
	sup       procutil.Supervisor

	mu     sync.Mutex
	out    map[*procutil.Proc]*procutil.Buffer // every run's output
	killed map[*procutil.Proc]bool
}

func newProcRing(bin, dir, dsn string, n int, flags []string) (*procRing, error) {
	var b strings.Builder
	b.WriteString("id,host,coordination_port,client_port\n")
	ports, err := procutil.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	for id := 1; id <= n; id++ {
		if benchLab != nil {
			fmt.Fprintf(&b, "%d,%s,%d,%d\n", id, benchLab.host(int64(id)), labCoordPort, labClientPort)
			continue
		}
		fmt.Fprintf(&b, "%d,127.0.0.1,%d,%d\n", id, ports[2*id-2], ports[2*id-1])
	}
	if benchLab != nil {
		// Protocol-2 clients without passwords, as on loopback.
		flags = append(flags, "--auth", "open")
	}
	path := filepath.Join(dir, "nodes.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return &procRing{bin: bin, dir: dir, dsn: dsn, nodes: path, n: n, flags: flags,
		out: map[*procutil.Proc]*procutil.Buffer{}, killed: map[*procutil.Proc]bool{}}, nil
}

// startAll starts every node of the list; if one fails to start, it stops
// those started.
func (r *procRing) startAll() error {
	for id := int64(1); id <= int64(r.n); id++ {
		if err := r.start(id); err != nil {
			r.stopAll()
			return err
		}
	}
	return nil
}

// start starts node id, which must not be running.
func (r *procRing) start(id int64) error {
	args := append([]string{"run", "--id", strconv.FormatInt(id, 10), "--db", store.RotateHosts(r.dsn, int(id-1)), "--nodes", r.nodes,
		"--log-format", "json", "--log-level", "info"}, r.flags...)
	if r.nodeFlags != nil {
		args = append(args, r.nodeFlags(id)...)
	}
	out := &procutil.Buffer{}
	path := r.bin
	if benchLab != nil {
		path, args = benchLab.wrap(id, r.bin, args)
	}
	p, err := r.sup.Start(id, procutil.Spec{Path: path, Args: args, Dir: r.dir, Log: out,
		Env: append(os.Environ(), "RINGNODE_CLUSTER_KEY=ringbench-cluster-key-0123456789abcdef")})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.out[p] = out
	r.mu.Unlock()
	return nil
}

func (r *procRing) signal(id int64, sig syscall.Signal) error {
	return r.sup.Signal(id, sig)
}

// up returns node id's run unless it was killed (nil then).
func (r *procRing) up(id int64) *procutil.Proc {
	p := r.sup.Proc(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil || r.killed[p] {
		return nil
	}
	return p
}

// kill kills node id and waits for it.
func (r *procRing) kill(id int64) {
	p := r.up(id)
	if p == nil {
		return
	}
	r.mu.Lock()
	r.killed[p] = true
	r.mu.Unlock()
	_, _ = p.Kill(time.Minute)
}

func (r *procRing) stopAll() {
	r.mu.Lock()
	for _, p := range r.sup.Procs() {
		r.killed[p] = true
	}
	r.mu.Unlock()
	r.sup.StopAll(0)
}

// pid returns node id's process id (0 if it is not running).
func (r *procRing) pid(id int64) int {
	if p := r.up(id); p != nil {
		return p.Pid
	}
	return 0
}

// pids returns the process ids of the nodes not killed.
func (r *procRing) pids() []int {
	var out []int
	for id := int64(1); id <= int64(r.n); id++ {
		if p := r.up(id); p != nil {
			out = append(out, p.Pid)
		}
	}
	return out
}

// runLog is one run's output.
type runLog struct {
	id      int64
	running bool
	out     []byte
}

// runLogs returns every run's output, in start order.
func (r *procRing) runLogs() []runLog {
	var logs []runLog
	for _, p := range r.sup.Procs() {
		_, exited := p.Exited()
		r.mu.Lock()
		logs = append(logs, runLog{id: p.ID, running: !exited && !r.killed[p], out: r.out[p].Bytes()})
		r.mu.Unlock()
	}
	return logs
}

// logLines returns the JSON log lines of every node with the given message.
func (r *procRing) logLines(message string) []map[string]any {
	var out []map[string]any
	for _, l := range r.runLogs() {
		sc := bufio.NewScanner(bytes.NewReader(l.out))
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
