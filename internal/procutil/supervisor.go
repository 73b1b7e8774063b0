package procutil

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Spec is how to start a node process.
type Spec struct {
	Path string   // the executable
	Args []string // its arguments, after the program's name
	Dir  string   // working directory; "" is this process's
	Env  []string // environment; nil is this process's

	// Log receives the process's standard output and error, both (nil:
	// neither is kept). With Prefix, it receives them line by line, each
	// line with Prefix before it; a last line without a newline gets one.
	Log    io.Writer
	Prefix string
	// LogDir, if set, takes the output instead of Log: each run of node ID
	// writes LogDir/node-ID.RUN.log, created (or emptied) at its start.
	LogDir string

	// SysProcAttr, if set, is the process's system attributes (its own
	// process group, a signal when its parent dies...).
	SysProcAttr *syscall.SysProcAttr
}

// Exit is how and when a process ended.
type Exit struct {
	At     time.Time
	Code   int            // exit status; -1 when a signal ended it or it could not be waited for
	Signal syscall.Signal // the signal that ended it; 0 when none did
	Err    error          // what waiting for it returned: nil for status 0
}

// String is "status 0", or the error ("exit status 1", "signal: killed").
func (e Exit) String() string {
	if e.Err == nil {
		return "status 0"
	}
	return e.Err.Error()
}

func exitOf(err error) Exit {
	e := Exit{At: time.Now(), Err: err}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		e.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		}
	case err != nil:
		e.Code = -1
	}
	return e
}

// Proc is one run of a node process.
type Proc struct {
	ID      int64     // the node's id
	Run     int       // 1 for the first start of ID, 2 for the next...
	Pid     int       // its process id
	Started time.Time // when it was started
	LogPath string    // its log file, with Spec.LogDir

	spec Spec
	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	exit    *Exit
	stopped bool
}

// Done is closed when the process has exited and the supervisor is done
// with it (its output written, OnExit returned).
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited returns how the process ended, and false while it runs.
func (p *Proc) Exited() (Exit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return Exit{}, false
	}
	return *p.exit, true
}

// Stopped reports whether the process was sent SIGSTOP and not SIGCONT
// since.
func (p *Proc) Stopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// Signal sends sig to the process; SIGSTOP and SIGCONT are remembered
// (Stopped).
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v to node %d (pid %d): %w", sig, p.ID, p.Pid, err)
	}
	switch sig {
	case syscall.SIGSTOP, syscall.SIGCONT:
		p.mu.Lock()
		p.stopped = sig == syscall.SIGSTOP
		p.mu.Unlock()
	}
	return nil
}

// Wait waits up to within for the process to be done and returns how it
// ended.
func (p *Proc) Wait(within time.Duration) (Exit, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.done:
		e, _ := p.Exited()
		return e, nil
	case <-t.C:
		return Exit{}, fmt.Errorf("node %d (pid %d) did not exit within %v", p.ID, p.Pid, within)
	}
}

// Kill sends SIGKILL (and SIGCONT, should it be stopped) and waits up to
// within for the process to be done.
func (p *Proc) Kill(within time.Duration) (Exit, error) {
	p.sendKill()
	e, err := p.Wait(within)
	if err != nil {
		return e, fmt.Errorf("SIGKILL: %w", err)
	}
	return e, nil
}

func (p *Proc) sendKill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.Signal(syscall.SIGCONT)
}

// Term sends SIGTERM and waits up to within for the process to be done
// (one that has just exited on its own is done at once).
func (p *Proc) Term(within time.Duration) (Exit, error) {
	_ = p.Signal(syscall.SIGTERM)
	e, err := p.Wait(within)
	if err != nil {
		return e, fmt.Errorf("SIGTERM: %w", err)
	}
	return e, nil
}

// Supervisor starts node processes, watches them exit and stops them: at
// most one live process per node id. Its zero value is ready to use, and it
// is safe for concurrent use, but Start must not race with StopAll.
type Supervisor struct {
	// OnExit, if set, is called once for every process that exits, from
	// the goroutine that waited for it: after its output is all written
	// and Exited reports the exit, before Done is closed. Set it before
	// the first Start.
	OnExit func(p *Proc, e Exit)

	mu     sync.Mutex
	latest map[int64]*Proc // every node's last run
	all    []*Proc         // every run, in start order
	wg     sync.WaitGroup  // the goroutines waiting for processes
}

// Start starts a process for node id, which must not have a live one.
func (s *Supervisor) Start(id int64, spec Spec) (*Proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := 1
	if last := s.latest[id]; last != nil {
		if _, done := last.Exited(); !done {
			return nil, fmt.Errorf("start node %d: it is running (pid %d)", id, last.Pid)
		}
		run = last.Run + 1
	}
	p := &Proc{ID: id, Run: run, spec: spec, done: make(chan struct{})}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = spec.Dir, spec.Env, spec.SysProcAttr
	flush, err := p.output(cmd)
	if err != nil {
		return nil, fmt.Errorf("start node %d: %w", id, err)
	}
	if err := cmd.Start(); err != nil {
		flush() // closes a log file
		return nil, fmt.Errorf("start node %d: %w", id, err)
	}
	p.cmd, p.Pid, p.Started = cmd, cmd.Process.Pid, time.Now()
	if s.latest == nil {
		s.latest = map[int64]*Proc{}
	}
	s.latest[id] = p
	s.all = append(s.all, p)
	s.wg.Go(func() { s.reap(p, flush) })
	return p, nil
}

// output points cmd's standard output and error where p's spec says, and
// returns what writes out a last partial line once the process is over.
func (p *Proc) output(cmd *exec.Cmd) (flush func(), err error) {
	switch {
	case p.spec.LogDir != "":
		p.LogPath = filepath.Join(p.spec.LogDir, fmt.Sprintf("node-%d.%d.log", p.ID, p.Run))
		f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		// The child gets its own descriptor at the start: ours closes
		// once the process is over or could not start.
		cmd.Stdout, cmd.Stderr = f, f
		return func() { f.Close() }, nil
	case p.spec.Log != nil && p.spec.Prefix != "":
		w := &prefixWriter{w: p.spec.Log, prefix: p.spec.Prefix}
		cmd.Stdout, cmd.Stderr = w, w
		return w.flush, nil
	case p.spec.Log != nil:
		cmd.Stdout, cmd.Stderr = p.spec.Log, p.spec.Log
	}
	return func() {}, nil
}

// reap waits for p's exit and records it.
func (s *Supervisor) reap(p *Proc, flush func()) {
	err := p.cmd.Wait() // returns once the output is copied too
	flush()
	e := exitOf(err)
	p.mu.Lock()
	p.exit = &e
	p.stopped = false
	p.mu.Unlock()
	if s.OnExit != nil {
		s.OnExit(p, e)
	}
	close(p.done)
}

// Restart starts node id again as its last run was started (a new log
// file with Spec.LogDir). The last run must be over.
func (s *Supervisor) Restart(id int64) (*Proc, error) {
	last := s.Proc(id)
	if last == nil {
		return nil, fmt.Errorf("restart node %d: it was never started", id)
	}
	return s.Start(id, last.spec)
}

// Proc returns node id's last run, live or not; nil if it was never
// started.
func (s *Supervisor) Proc(id int64) *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest[id]
}

// Live returns node id's process if it has not exited, else nil.
func (s *Supervisor) Live(id int64) *Proc {
	p := s.Proc(id)
	if p == nil {
		return nil
	}
	if _, done := p.Exited(); done {
		return nil
	}
	return p
}

// Procs returns every run started so far, in start order.
func (s *Supervisor) Procs() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}

// LiveProcs returns the processes that have not exited, by node id.
func (s *Supervisor) LiveProcs() []*Proc {
	s.mu.Lock()
	var out []*Proc
	for _, p := range s.latest {
		out = append(out, p)
	}
	s.mu.Unlock()
	out = slices.DeleteFunc(out, func(p *Proc) bool { _, done := p.Exited(); return done })
	slices.SortFunc(out, func(a, b *Proc) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (s *Supervisor) live(id int64) (*Proc, error) {
	p := s.Live(id)
	if p == nil {
		return nil, fmt.Errorf("node %d is not running", id)
	}
	return p, nil
}

// Signal sends sig to node id's live process.
func (s *Supervisor) Signal(id int64, sig syscall.Signal) error {
	p, err := s.live(id)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// Kill sends SIGKILL to node id's live process and waits up to within for
// it.
func (s *Supervisor) Kill(id int64, within time.Duration) (Exit, error) {
	p, err := s.live(id)
	if err != nil {
		return Exit{}, err
	}
	return p.Kill(within)
}

// Term sends SIGTERM to node id's live process and waits up to within for
// it.
func (s *Supervisor) Term(id int64, within time.Duration) (Exit, error) {
	p, err := s.live(id)
	if err != nil {
		return Exit{}, err
	}
	return p.Term(within)
}

// StopAll ends every live process and waits for them all. With grace
// over 0 it sends SIGTERM first and SIGKILL only to those still running
// after grace; with 0, SIGKILL at once. It returns when every process has
// exited and the supervisor's goroutines are over (output written, OnExit
// calls returned).
func (s *Supervisor) StopAll(grace time.Duration) {
	live := s.LiveProcs()
	if grace > 0 {
		for _, p := range live {
			_ = p.Signal(syscall.SIGTERM)
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		waitAll(live, t.C)
	}
	for _, p := range live {
		if _, done := p.Exited(); !done {
			p.sendKill()
		}
	}
	s.wg.Wait()
}

// waitAll waits until every process of ps is done or until stop fires.
func waitAll(ps []*Proc, stop <-chan time.Time) {
	for _, p := range ps {
		select {
		case <-p.done:
		case <-stop:
			return
		}
	}
}
