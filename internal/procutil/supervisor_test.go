package procutil_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
	"github.com/ringchat/ringchat/internal/testutil"
)

func sh(script string, log *procutil.Buffer, prefix string) procutil.Spec {
	return procutil.Spec{Path: "/bin/sh", Args: []string{"-c", script}, Log: log, Prefix: prefix}
}

// A process's output reaches the log line by line with the prefix, and its
// exit is recorded, reported to OnExit once, before Done.
func TestSupervisorExitAndOutput(t *testing.T) {
	var calls atomic.Int32
	var sup procutil.Supervisor
	sup.OnExit = func(p *procutil.Proc, e procutil.Exit) {
		calls.Add(1)
		if _, ok := p.Exited(); !ok {
			t.Errorf("OnExit before Exited reports the exit")
		}
	}
	var log procutil.Buffer
	p, err := sup.Start(7, sh(`echo out; echo err >&2; printf 'a\r\nb'; printf 'c'; exit 3`, &log, "[7] "))
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(testutil.WaitLimit)
	if err != nil {
		t.Fatal(err)
	}
	if e.Code != 3 || e.Signal != 0 || e.String() != "exit status 3" || e.At.Before(p.Started) {
		t.Errorf("exit %+v (%s), want status 3", e, e)
	}
	if got, want := string(log.Bytes()), "[7] out\n[7] err\n[7] a\n[7] bc\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("OnExit called %d times, want 1", n)
	}
	if sup.Live(7) != nil || len(sup.LiveProcs()) != 0 || sup.Proc(7) != p {
		t.Errorf("an exited process is live, or not the node's last run")
	}
	ok, err := sup.Start(8, sh("exit 0", nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ok.Wait(testutil.WaitLimit); e.Code != 0 || e.Err != nil || e.String() != "status 0" {
		t.Errorf("exit %+v, want status 0", e)
	}
}

// Signals: SIGSTOP and SIGCONT are remembered, SIGKILL is told apart from
// an exit status, a live node cannot be started twice, and a restart is a
// new run with its own log file.
func TestSupervisorSignalsAndRestart(t *testing.T) {
	var sup procutil.Supervisor
	defer sup.StopAll(0)
	dir := t.TempDir()
	spec := procutil.Spec{Path: "/bin/sh", Args: []string{"-c", "echo started; exec sleep 60"}, LogDir: dir}
	p, err := sup.Start(3, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sup.Start(3, spec); err == nil {
		t.Fatal("a second process for a live node")
	}
	if err := sup.Signal(3, syscall.SIGSTOP); err != nil || !p.Stopped() {
		t.Fatalf("SIGSTOP: %v, stopped %v", err, p.Stopped())
	}
	if err := sup.Signal(3, syscall.SIGCONT); err != nil || p.Stopped() {
		t.Fatalf("SIGCONT: %v, stopped %v", err, p.Stopped())
	}
	testutil.Eventually(t, testutil.WaitLimit, "the first run logs", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "node-3.1.log"))
		return string(b) == "started\n"
	})
	e, err := sup.Kill(3, testutil.WaitLimit)
	if err != nil {
		t.Fatal(err)
	}
	if e.Code != -1 || e.Signal != syscall.SIGKILL || !strings.Contains(e.String(), "killed") {
		t.Errorf("exit %+v, want killed by SIGKILL", e)
	}
	if err := sup.Signal(3, syscall.SIGTERM); err == nil {
		t.Error("a signal to a node that is not running went through")
	}
	again, err := sup.Restart(3)
	if err != nil {
		t.Fatal(err)
	}
	if again.Run != 2 || again.LogPath != filepath.Join(dir, "node-3.2.log") || sup.Live(3) != again {
		t.Errorf("restart: run %d, log %s", again.Run, again.LogPath)
	}
	if e, err := sup.Term(3, testutil.WaitLimit); err != nil || e.Signal != syscall.SIGTERM {
		t.Errorf("SIGTERM: %+v, %v", e, err)
	}
	if got := sup.Procs(); len(got) != 2 || got[0] != p || got[1] != again {
		t.Errorf("runs %v, want both", got)
	}
	if _, err := sup.Restart(4); err == nil {
		t.Error("restart of a node never started")
	}
}

// StopAll asks with SIGTERM, kills what is still running after the grace,
// and returns with every process done.
func TestSupervisorStopAll(t *testing.T) {
	var sup procutil.Supervisor
	var stubborn procutil.Buffer
	polite, err := sup.Start(1, sh("exec sleep 60", nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	deaf, err := sup.Start(2, sh(`trap "" TERM; echo ready; exec sleep 60`, &stubborn, ""))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testutil.WaitLimit, "the trap is set", func() bool {
		return string(stubborn.Bytes()) == "ready\n"
	})
	if n := len(sup.LiveProcs()); n != 2 {
		t.Fatalf("%d live processes, want 2", n)
	}
	sup.StopAll(300 * time.Millisecond)
	for _, p := range []*procutil.Proc{polite, deaf} {
		select {
		case <-p.Done():
		default:
			t.Fatalf("node %d is not done after StopAll", p.ID)
		}
	}
	if e, _ := polite.Exited(); e.Signal != syscall.SIGTERM {
		t.Errorf("node 1 ended by %v, want SIGTERM", e.Signal)
	}
	if e, _ := deaf.Exited(); e.Signal != syscall.SIGKILL {
		t.Errorf("node 2 ended by %v, want SIGKILL", e.Signal)
	}
}

// A process that cannot start is no run of its node.
func TestSupervisorStartFails(t *testing.T) {
	var sup procutil.Supervisor
	_, err := sup.Start(1, procutil.Spec{Path: filepath.Join(t.TempDir(), "missing"), LogDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "start node 1") {
		t.Fatalf("start of a missing binary: %v", err)
	}
	if sup.Proc(1) != nil || len(sup.Procs()) != 0 {
		t.Error("a process that did not start is recorded")
	}
	sup.StopAll(time.Second)
}
