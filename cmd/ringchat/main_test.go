package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ringchat/ringchat/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is an output that tests can wait on.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output holds want as a whole line.
func (b *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(testutil.WaitLimit)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		lines, ch := strings.Split(b.buf.String(), "\n"), b.changed
		b.mu.Unlock()
		for _, l := range lines {
			if l == want {
				return
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for line %q; output:\n%s", want, b.String())
		}
	}
}

// waitForMatch waits until the output holds part somewhere.
func (b *syncBuffer) waitForMatch(t *testing.T, part string) {
	t.Helper()
	deadline := time.NewTimer(testutil.WaitLimit)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		found, ch := strings.Contains(b.buf.String(), part), b.changed
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %q; output:\n%s", part, b.String())
		}
	}
}

// run is one in-process ringchat invocation.
type run struct {
	stdin          *io.PipeWriter
	stdout, stderr *syncBuffer
	done           chan error
	cancel         context.CancelFunc
	exited         chan struct{}
}

// start runs ringchat with args; its stdin is fed by r.stdin. The
// environment is not consulted unless env is given.
func start(t *testing.T, env map[string]string, args ...string) *run {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{stdin: pw, stdout: newSyncBuffer(), stderr: newSyncBuffer(), done: make(chan error, 1),
		cancel: cancel, exited: make(chan struct{})}
	getenv := func(k string) string { return env[k] }
	go func() {
		defer close(r.exited)
		r.done <- executeWith(ctx, getenv, args, pr, r.stdout, r.stderr)
	}()
	t.Cleanup(func() { // an interrupt, as Ctrl-C, if the test did not end it
		pw.Close()
		cancel()
		<-r.exited
	})
	return r
}

func (r *run) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(r.stdin, l+"\n"); err != nil {
			t.Fatalf("writing stdin: %v", err)
		}
	}
}

// wait returns the exit status.
func (r *run) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-r.done:
		return exitCode(err)
	case <-time.After(testutil.WaitLimit):
		t.Fatalf("ringchat did not exit; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	return -1
}

// runOnce runs ringchat with empty stdin and returns status and output.
func runOnce(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	r := start(t, env, args...)
	r.stdin.Close()
	code := r.wait(t)
	return code, r.stdout.String(), r.stderr.String()
}
