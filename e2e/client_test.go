package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/testutil"
)

// clientRing is three ringnode processes on MariaDB for the client tests.
type clientRing struct {
	r   *testutil.Ring
	bin string // the ringchat binary
	// cache is the ringchat processes' XDG_CACHE_HOME (where they keep
	// the ring's nodes), a directory of the test's own. With the
	// machine's own cache, a client given one node also knew the nodes
	// other tests' clients had listed there, and TestTLSClientPort's bob,
	// given node 2, came up once at node 1.
	cache string
}

func (c *clientRing) addr(id int64) string { return fmt.Sprintf("127.0.0.1:%d", c.r.Ports[id][1]) }

// startClientRing starts the ring and waits until every node stores and
// delivers a message.
func startClientRing(t *testing.T, bin string) *clientRing {
	t.Helper()
	dsn := testutil.MySQLDSN(t)
	r := testutil.NewRing(t, ringnodeBin, dsn, 1, 2, 3)
	r.Start(1)
	openWhenMigrated(t, dsn)
	r.Start(2)
	r.Start(3)
	c := &clientRing{r: r, bin: bin, cache: t.TempDir()}
	for _, id := range []int64{1, 2, 3} {
		s := c.session(t, id, fmt.Sprintf("probe%d", id))
		if _, err := s.Post(client.ToUser(s.User()), "ping"); err != nil {
			t.Fatal(err)
		}
		receive(t, s, "ping")
		s.Close()
	}
	return c
}

// session logs user in at node id (in this process).
func (c *clientRing) session(t *testing.T, id int64, user string) *client.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	s, err := client.StartSession(ctx, client.SessionConfig{Addrs: []string{c.addr(id)}, User: user,
		Options: client.Options{Timeout: within}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// receive waits for a chat message with this text on s.
func receive(t *testing.T, s *client.Session, text string) client.ChatMessage {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("%s: session ended", s.User())
			}
			if m, isChat := ev.(client.ChatMessage); isChat && m.Content == text {
				return m
			}
		case <-timeout:
			t.Fatalf("%s: no message %q within %v", s.User(), text, within)
		}
	}
}

// watched is an output that tests can wait on.
type watched struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newWatched() *watched { return &watched{changed: make(chan struct{})} }

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	return w.buf.Write(p)
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// chatProc is a ringchat process in line mode (its stdin is a pipe).
type chatProc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *watched
	done           chan struct{}
}

// env is the environment of ringchat processes: none of the user's
// RINGCHAT_ settings.
func chatEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RINGCHAT_") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *clientRing) start(t *testing.T, args ...string) *chatProc {
	t.Helper()
	p := &chatProc{t: t, cmd: exec.Command(c.bin, args...), stdout: newWatched(), stderr: newWatched(), done: make(chan struct{})}
	p.cmd.Env = append(chatEnv(), "XDG_CACHE_HOME="+c.cache)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("ringchat %q\nstdout:\n%s\nstderr:\n%s", args, p.stdout, p.stderr)
		}
	})
	return p
}

func (p *chatProc) send(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.stdin, l+"\n"); err != nil {
			p.t.Fatalf("writing to ringchat: %v", err)
		}
	}
}

// waitOut waits until standard output contains part.
func (p *chatProc) waitOut(part string) {
	p.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		p.stdout.mu.Lock()
		found, ch := strings.Contains(p.stdout.buf.String(), part), p.stdout.changed
		p.stdout.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-p.done:
			if !strings.Contains(p.stdout.String(), part) {
				p.t.Fatalf("ringchat exited without printing %q; stdout:\n%s\nstderr:\n%s", part, p.stdout, p.stderr)
			}
		case <-deadline.C:
			p.t.Fatalf("ringchat did not print %q within %v; stdout:\n%s\nstderr:\n%s", part, within, p.stdout, p.stderr)
		}
	}
}

// exit ends the input and returns the exit status.
func (p *chatProc) exit() int {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatalf("ringchat did not exit; stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// run runs a one-shot ringchat command and returns its status and output.
func (c *clientRing) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	p := c.start(t, args...)
	code := p.exit()
	return code, p.stdout.String(), p.stderr.String()
}

// TestClient runs the ringchat binary against three ringnode processes on
// MariaDB: two line-mode clients talking directly and in a group, offline
// delivery through the one-shot commands and their exit codes, the
// terminal UI under tmux, and a client whose node is killed.
func TestClient(t *testing.T) {
	bin, err := testutil.Build("./cmd/ringchat", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startClientRing(t, bin)

	t.Run("LineModeConversation", func(t *testing.T) {
		alice := c.start(t, "--nodes", c.r.Nodes, "--node", "1", "--user", "alice")
		bob := c.start(t, "--node", c.addr(2), "--user", "bob", "--json")
		alice.waitOut("connected to node 1 (" + c.addr(1) + ") as alice")
		bob.waitOut(`{"messageType":"CONNECTED","username":"bob","node":2,"address":"` + c.addr(2) + `"}`)
		alice.send("/join team")
		bob.send("/join team")
		alice.waitOut("joined #team")
		bob.waitOut(`{"messageType":"JOIN_GROUP","group":"team"}`)

		alice.send("/msg bob hi bob")
		bob.waitOut(`"fromName":"alice","toUsername":"bob","messageContent":"hi bob"`)
		alice.waitOut("you -> bob: hi bob (stored)")
		bob.send("/g team hello team", "/to alice", "a plain reply")
		alice.waitOut("bob -> #team: hello team")
		alice.waitOut("bob -> you: a plain reply")
		bob.waitOut(`"toUsername":"alice","messageContent":"a plain reply"}`) // its STORED receipt

		alice.send("/who", "/history bob")
		alice.waitOut("alice (node 1)")
		alice.waitOut("bob (node 2)")
		alice.waitOut("you -> bob: hi bob\n")
		alice.send("/msg nobody hello?")
		alice.waitOut(`error: not sent to nobody: no user "nobody"`)
		if code := alice.exit(); code != 1 { // a message was refused: a script learns it
			t.Errorf("alice: exit %d, want 1", code)
		}
		if code := bob.exit(); code != 0 {
			t.Errorf("bob: exit %d", code)
		}
	})

	t.Run("OfflineDeliveryAndExitCodes", func(t *testing.T) {
		// carol exists once she has logged in; then she is away.
		code, out, _ := c.run(t, "who", "--node", c.addr(1), "--user", "carol")
		if code != 0 || !strings.Contains(out, "carol\t1\n") {
			t.Fatalf("who: exit %d, %q", code, out)
		}
		for _, text := range []string{"while you were out", "and another"} {
			if code, _, errOut := c.run(t, "send", "--node", c.addr(2), "--user", "dave", "--to", "carol", text); code != 0 {
				t.Fatalf("send: exit %d, %s", code, errOut)
			}
		}
		code, _, errOut := c.run(t, "send", "--node", c.addr(2), "--user", "dave", "--to", "nobody", "x")
		if code != 1 || !strings.Contains(errOut, `no user "nobody"`) {
			t.Errorf("send to nobody: exit %d, %q", code, errOut)
		}
		code, _, errOut = c.run(t, "send", "--node", c.addr(2), "--user", "dave", "--group", "no-such-group", "x")
		if code != 1 || !strings.Contains(errOut, `no group "no-such-group"`) {
			t.Errorf("send to a missing group: exit %d, %q", code, errOut)
		}
		// She comes back at another node.
		code, out, errOut = c.run(t, "tail", "--node", c.addr(3), "--user", "carol", "--count", "2")
		if code != 0 || !strings.Contains(out, "dave -> you: while you were out\n") || !strings.Contains(out, "dave -> you: and another\n") {
			t.Fatalf("tail: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		code, out, _ = c.run(t, "groups", "--node", c.addr(3), "--user", "carol", "--json")
		if code != 0 || !strings.Contains(out, `{"group":"team","members":2,"member":false}`) {
			t.Errorf("groups: exit %d, %q", code, out)
		}
	})

	t.Run("TerminalUIUnderTmux", func(t *testing.T) { tmuxSmoke(t, c) })

	t.Run("NodeDies", func(t *testing.T) {
		frank := c.session(t, 1, "frank")
		erin := c.start(t, "--nodes", c.r.Nodes, "--node", "3", "--user", "erin")
		erin.waitOut("connected to node 3 (" + c.addr(3) + ") as erin")
		c.r.Kill(3)
		erin.waitOut("error: connection to node 3 lost")
		erin.send("/msg frank after the crash")
		if m := receive(t, frank, "after the crash"); m.From != "erin" {
			t.Fatalf("frank got %+v", m)
		}
		erin.waitOut("reconnected at node ")
		erin.waitOut("you -> frank: after the crash (stored)")
		if code := erin.exit(); code != 0 {
			t.Errorf("erin: exit %d", code)
		}
	})
}

// alreadyIn is the server's refusal of a second login of uma, at another
// node than hers or at hers.
var alreadyIn = regexp.MustCompile(`user "uma" is already logged in (at node 1|\(at node 2\))`)

// tmuxSmoke runs the real terminal UI in tmux: a conversation with a user
// of another node, receipts, a refusal shown at once, Tab completion,
// Ctrl-N, the bell of a mention, the conversation log, /quit, and the
// conversations restored by the next start.
func tmuxSmoke(t *testing.T, c *clientRing) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed: CI needs it (.ci/run installs it)")
		}
		t.Skip("!!! SKIPPING the terminal UI smoke test: tmux is not installed (apt-get install tmux)")
	}
	sock := fmt.Sprintf("ringchat-e2e-%d", os.Getpid())
	home, logs := t.TempDir(), t.TempDir()
	tmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-L", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = chatEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() })
	bob := c.session(t, 2, "bob-tmux")
	// The shell records the exit status: tmux does not always reap a pane's
	// process that closed its terminal first. The client's config and state
	// directories are the test's own.
	status := filepath.Join(t.TempDir(), "status")
	start := func(session string) {
		tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "24", "env", "TERM=xterm-256color",
			"XDG_CONFIG_HOME="+home, "XDG_STATE_HOME="+home,
			"sh", "-c", `"$0" "$@"; echo $? >"`+status+`"; sleep 60`, c.bin, "--node", c.addr(1), "--user", "uma", "--log-dir", logs)
		// A second window in front: tmux flags a bell only in a window not shown.
		tmux("new-window", "-t", session)
	}
	target := "ui:0"
	start("ui")
	screen := func() string { return tmux("capture-pane", "-p", "-t", target) }
	waitScreen := func(part string) {
		t.Helper()
		// Every 50 ms: each look is a tmux command.
		if !testutil.WaitFor(within, 50*time.Millisecond, func() bool { return strings.Contains(screen(), part) }) {
			t.Fatalf("the screen never showed %q:\n%s", part, screen())
		}
	}
	keys := func(text string, special ...string) {
		t.Helper()
		if text != "" {
			tmux("send-keys", "-t", target, "-l", text)
		}
		for _, k := range special {
			tmux("send-keys", "-t", target, k)
		}
	}
	waitScreen("● node 1 " + c.addr(1) + " │ uma")
	keys("/to bob-tmux", "Enter")
	waitScreen("bob-tmux ›")
	keys("hello from tmux", "Enter")
	hello := receive(t, bob, "hello from tmux")
	if hello.From != "uma" {
		t.Fatalf("bob got %+v", hello)
	}
	waitScreen("uma hello from tmux ✓")
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	// bob is typing, then has read it: uma sees both.
	if err := bob.Typing(ctx, "uma"); err != nil {
		t.Fatal(err)
	}
	waitScreen("bob-tmux is typing…")
	if err := bob.Read(ctx, "uma", hello.Seq); err != nil {
		t.Fatal(err)
	}
	waitScreen("uma hello from tmux ✓✓")
	if _, err := bob.Post(client.ToUser("uma"), "hi uma, got it"); err != nil {
		t.Fatal(err)
	}
	waitScreen("bob-tmux hi uma, got it")
	// uma's tab shows bob's message: bob learns she has read it.
	testutil.Eventually(t, within, "uma's read mark of bob's message", func() bool {
		h, err := bob.HistoryBefore(ctx, client.ToUser("uma"), 1, 0)
		return err == nil && len(h.Messages) == 1 && h.ReadSeq == h.Messages[0].Seq
	})
	// Away, seen by others; /whois.
	keys("/away back soon", "Enter")
	waitScreen("│ uma (away)")
	if w, err := bob.Whois(ctx, "uma"); err != nil || w.Away != "back soon" {
		t.Errorf("bob's whois of uma: %+v, %v", w, err)
	}
	keys("/away", "Enter")
	waitScreen("you are back")
	keys("/whois bob-tmux", "Enter")
	waitScreen("bob-tmux: online at node 2 since ")

	// A bracketed paste of 20 lines (tmux sends its line breaks as CRs,
	// as terminals do) is one message of 20 lines, shown as lines.
	var pasted []string
	for i := range 20 {
		pasted = append(pasted, fmt.Sprintf("pasted line %d", i+1))
	}
	tmux("set-buffer", "-b", "p20", strings.Join(pasted, "\n"))
	tmux("paste-buffer", "-p", "-b", "p20", "-t", target)
	waitScreen("␤pasted line 20")
	keys("", "Enter")
	receive(t, bob, strings.Join(pasted, "\n"))
	waitScreen("uma pasted line 1\n")
	waitScreen("\n          pasted line 2\n")
	waitScreen("\n          pasted line 20 ✓")

	// The same user again, in a second terminal: refused within 2 s with
	// the server's words, status 1.
	dupStatus := filepath.Join(t.TempDir(), "status")
	tmux("new-session", "-d", "-s", "dup", "-x", "100", "-y", "24", "env", "TERM=xterm-256color",
		"XDG_CONFIG_HOME="+home, "XDG_STATE_HOME="+home,
		"sh", "-c", `"$0" "$@"; echo $? >"`+dupStatus+`"; sleep 60`, c.bin, "--node", c.addr(2), "--user", "uma")
	dupScreen := func() string { return tmux("capture-pane", "-p", "-t", "dup:0") }
	if !testutil.WaitFor(within, 20*time.Millisecond, func() bool { return strings.Contains(dupScreen(), "connecting to") }) {
		t.Fatalf("the second client never said it was connecting:\n%s", dupScreen())
	}
	connecting := time.Now()
	var dup []byte
	testutil.WaitFor(within, 20*time.Millisecond, func() bool {
		dup, _ = os.ReadFile(dupStatus)
		return len(dup) > 0
	})
	// At node 1, unless a slow store there made it tell its clients to
	// move (then the first client is at node 2, where this one asks).
	if took := time.Since(connecting); strings.TrimSpace(string(dup)) != "1" || took > 2*time.Second ||
		!alreadyIn.MatchString(dupScreen()) {
		t.Errorf("the same user again: status %q after %v, want 1 within 2 s:\n%s", dup, took, dupScreen())
	}

	// A message to nobody: its ✗ shows at once, without a redraw.
	keys("/msg ghost-tmux ping", "Enter")
	waitScreen(`→ ghost-tmux ping ✗ no user "ghost-tmux"`)
	waitScreen("3:ghost-tmux (1)")

	// Tab completes the name; Ctrl-N goes to the next tab.
	keys("/msg bob-t", "Tab")
	keys("done", "Enter")
	receive(t, bob, "done")
	keys("", "C-n")
	waitScreen("ghost-tmux ›")
	keys("", "M-2")
	waitScreen("bob-tmux ›")

	// A mention rings the bell.
	if _, err := bob.Post(client.ToUser("uma"), "uma: are you there?"); err != nil {
		t.Fatal(err)
	}
	waitScreen("bob-tmux uma: are you there?")
	testutil.Eventually(t, within, "the bell of a mention", func() bool {
		return strings.TrimSpace(tmux("display-message", "-p", "-t", target, "#{window_bell_flag}")) == "1"
	})
	t.Logf("the screen:\n%s", screen())

	keys("/quit", "Enter")
	waitStatus(t, status, screen)

	// The conversation log, one line per message.
	logged, err := os.ReadFile(filepath.Join(logs, "bob-tmux.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"<uma> hello from tmux\n", "<bob-tmux> hi uma, got it\n", "<uma> done\n", "<bob-tmux> uma: are you there?\n"} {
		if !strings.Contains(string(logged), line) {
			t.Errorf("bob-tmux.log lacks %q:\n%s", line, logged)
		}
	}

	// The next start opens the conversations again, with their messages.
	os.Remove(status)
	target = "again:0"
	start("again")
	waitScreen(" 2:bob-tmux  3:ghost-tmux")
	waitScreen("bob-tmux uma: are you there?")
	keys("/quit", "Enter")
	waitStatus(t, status, screen)
}

// waitStatus waits for the exit status the shell around ringchat writes,
// and wants 0.
func waitStatus(t *testing.T, status string, screen func() string) {
	t.Helper()
	var b []byte
	exited := testutil.WaitFor(within, 50*time.Millisecond, func() bool {
		var err error
		b, err = os.ReadFile(status)
		return err == nil && len(b) > 0
	})
	if !exited {
		t.Fatalf("ringchat did not exit after /quit; screen:\n%s", screen())
	}
	if code := strings.TrimSpace(string(b)); code != "0" {
		t.Fatalf("after /quit: exit status %s; screen:\n%s", code, screen())
	}
}
