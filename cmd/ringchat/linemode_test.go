package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/client/clienttest"
	"github.com/ringchat/ringchat/internal/testutil"
)

// peer logs user in on srv with a protocol-2 session that acknowledges
// what it receives.
func peer(t *testing.T, addr, user string, groups ...string) *client.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	s, err := client.StartSession(ctx, client.SessionConfig{Addrs: []string{addr}, User: user,
		Options: client.Options{Timeout: testutil.WaitLimit}, RetryMin: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, g := range groups {
		if err := s.Join(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func say(t *testing.T, s *client.Session, to client.Recipient, text string) {
	t.Helper()
	if _, err := s.Post(to, text); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// received waits for the next chat message on s.
func received(t *testing.T, s *client.Session) client.ChatMessage {
	t.Helper()
	timeout := time.After(testutil.WaitLimit)
	for {
		select {
		case ev := <-s.Events():
			if m, ok := ev.(client.ChatMessage); ok {
				return m
			}
		case <-timeout:
			t.Fatal("no message")
		}
	}
}

func TestLineMode(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv.Addr, "bob", "g1")
	r := start(t, nil, "--node", srv.Addr, "--user", "alice")
	r.stdout.waitFor(t, "connected to node 1 ("+srv.Addr+") as alice")
	r.send(t, "/join g1")
	r.stdout.waitFor(t, "joined #g1")
	r.send(t, "/msg bob hello  bob")
	if m := received(t, bob); m.From != "alice" || m.To != client.ToUser("bob") || m.Content != "hello  bob" {
		t.Errorf("bob got %#v", m)
	}
	r.stdout.waitFor(t, "[16:55:53] you -> bob: hello  bob (stored)")
	say(t, bob, client.ToUser("alice"), "hi")
	r.stdout.waitFor(t, "[16:55:53] bob -> you: hi")
	say(t, bob, client.ToGroup("g1"), "hi all\x1b[2J")
	r.stdout.waitFor(t, `[16:55:53] bob -> #g1: hi all\x1b[2J`)
	// ringchat acknowledges cumulatively where the node grants it.
	srv.WaitLineContaining(t, `{"messageType":"ACK_UPTO","seq":`)
	srv.WaitAcked(t, "alice")
	r.send(t, "plain")
	r.stdout.waitFor(t, "error: no conversation: use /to USER or /to #GROUP first, or /msg USER TEXT")
	r.send(t, "/to #g1", "to the group", "//slash")
	r.stdout.waitFor(t, "talking to #g1")
	if m := received(t, bob); m.To != client.ToGroup("g1") || m.Content != "to the group" {
		t.Errorf("bob got %#v", m)
	}
	if m := received(t, bob); m.Content != "/slash" {
		t.Errorf("bob got %#v", m)
	}
	r.send(t, "/g g1 via g")
	if m := received(t, bob); m.To != client.ToGroup("g1") || m.Content != "via g" {
		t.Errorf("bob got %#v", m)
	}
	r.send(t, "/bogus x")
	r.stdout.waitFor(t, `error: unknown command "/bogus" (try /help)`)
	r.send(t, "/leave g9")
	r.stdout.waitFor(t, "error: leave g9: not a member of g9")
	r.send(t, "/msg carol anyone?")
	r.stdout.waitFor(t, `error: not sent to carol: no user "carol" (a user exists once they have logged in)`)
	r.send(t, "/who")
	r.stdout.waitFor(t, "online: alice (node 1), bob (node 1)")
	r.send(t, "/groups")
	r.stdout.waitFor(t, "groups: #g1 (2, joined)")
	r.send(t, "/away back at five")
	r.stdout.waitFor(t, "you are marked away: back at five (/away alone: back)")
	r.send(t, "/whois alice")
	r.stdout.waitFor(t, "alice: online at node 1; away: back at five")
	r.send(t, "/names #g1")
	r.stdout.waitFor(t, "#g1, 2 members (2 online): alice (node 1, away: back at five), bob (node 1)")
	r.send(t, "/away")
	r.stdout.waitFor(t, "you are back: no longer marked away")
	r.send(t, "/whois nobody")
	r.stdout.waitFor(t, `error: whois nobody: no user "nobody" (a user exists once they have logged in)`)
	r.send(t, "/history bob 2")
	r.stdout.waitFor(t, "[16:55:53] you -> bob: hello  bob")
	r.stdout.waitFor(t, "[16:55:53] bob -> you: hi")
	r.send(t, "/leave #g1")
	r.stdout.waitFor(t, "left #g1")
	r.send(t, "/help")
	r.stdout.waitFor(t, "  /quit              leave (so does end of input)")
	r.send(t, "/quit")
	// Commands failed above (a line with no conversation, /bogus, /leave
	// g9, a message to nobody, /whois nobody): a script learns it from the
	// status.
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit %d after failed commands, want 1; stderr:\n%s", code, r.stderr)
	}
	if r.stderr.String() != "" {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	srv.WaitGone(t, "alice")
}

// A line-mode session whose commands all succeed exits 0; one unknown
// command makes it exit 1.
func TestLineModeStatus(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		code  int
	}{
		{[]string{"/join g1", "/who"}, 0},
		{[]string{"/join g1", "/bogus", "/who"}, 1},
	} {
		srv := clienttest.NewServer(t)
		r := start(t, nil, "--node", srv.Addr, "--user", "alice")
		r.stdout.waitFor(t, "connected to node 1 ("+srv.Addr+") as alice")
		r.send(t, tc.lines...)
		r.stdout.waitFor(t, "online: alice (node 1)")
		r.send(t, "/quit")
		if code := r.wait(t); code != tc.code {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", tc.lines, code, tc.code, r.stderr)
		}
		srv.WaitGone(t, "alice")
	}
}

func TestLineModeJSON(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv.Addr, "bob")
	r := start(t, nil, "--node", srv.Addr, "--user", "alice", "--json")
	r.stdout.waitFor(t, `{"messageType":"CONNECTED","username":"alice","node":1,"address":"`+srv.Addr+`"}`)
	r.send(t, "/join g1")
	r.stdout.waitFor(t, `{"messageType":"JOIN_GROUP","group":"g1"}`)
	say(t, bob, client.ToUser("alice"), "hi")
	r.stdout.waitForMatch(t, `"seq":1,"fromName":"bob","toUsername":"alice","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM","time":"`)
	r.send(t, "/msg bob yo")
	r.stdout.waitForMatch(t, `"seq":2,"time":"`+clienttest.SentAt.UTC().Format("2006-01-02T15:04:05.000Z")+`","toUsername":"bob","messageContent":"yo"}`)
	r.send(t, "/msg nobody x")
	r.stdout.waitForMatch(t, `{"messageType":"ERROR","code":"UNKNOWN_USER","errorMessage":"no user \"nobody\" (a user exists once they have logged in)","id":"`)
	r.send(t, "/nope", "/to bob", "/who")
	r.stdout.waitFor(t, `{"messageType":"ERROR","errorMessage":"unknown command \"/nope\" (try /help)"}`)
	r.stderr.waitFor(t, "talking to bob")
	r.stdout.waitFor(t, `{"messageType":"WHO","users":[{"username":"alice","node":1},{"username":"bob","node":1}]}`)
	r.stdin.Close()
	if code := r.wait(t); code != 1 { // a message refused, an unknown command
		t.Fatalf("exit %d, want 1", code)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		var v struct{ MessageType string }
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.MessageType == "" {
			t.Errorf("stdout line %s is not an event: %v", l, err)
		}
	}
}

func TestLineModePositionalPromptsForUser(t *testing.T) {
	srv := clienttest.NewServer(t)
	host, port, _ := net.SplitHostPort(srv.Addr)
	r := start(t, nil, host, port)
	r.send(t, "alice", "/join g1")
	r.stdout.waitFor(t, "joined #g1")
	r.stdin.Close()
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if r.stderr.String() != "username: " {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestEnvironment(t *testing.T) {
	srv := clienttest.NewServer(t)
	want := "connected to node 1 (" + srv.Addr + ") as carol\n"
	code, stdout, stderr := runOnce(t, map[string]string{"RINGCHAT_NODE": srv.Addr, "RINGCHAT_USER": "carol", "RINGCHAT_PASSWORD": "pw"})
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	srv.WaitGone(t, "carol")
	// The password claimed the name.
	code, _, stderr = runOnce(t, map[string]string{"RINGCHAT_NODE": srv.Addr, "RINGCHAT_USER": "carol", "RINGCHAT_PASSWORD": "wrong"})
	if code != 1 || stderr != "ringchat: login carol: wrong password for \"carol\"\n" {
		t.Fatalf("wrong password: exit %d, stderr %q", code, stderr)
	}
	// Flags win over the environment.
	code, stdout, _ = runOnce(t, map[string]string{"RINGCHAT_NODE": "127.0.0.1:1", "RINGCHAT_USER": "carol"},
		"--node", srv.Addr, "-u", "dave")
	if code != 0 || stdout != "connected to node 1 ("+srv.Addr+") as dave\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestLineModeLoginFails(t *testing.T) {
	srv := clienttest.NewServer(t)
	code, _, stderr := runOnce(t, nil, "--node", srv.Addr, "--user", clienttest.SilentName, "--timeout", "100ms")
	if code != 1 || !strings.Contains(stderr, "no answer from the server within 100ms") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// Logged in elsewhere: retried (the old connection may be closing), then
	// refused with the server's reason.
	code, _, stderr = runOnce(t, nil, "--node", srv.Addr, "--user", clienttest.TakenName, "--timeout", "200ms")
	if code != 1 || !strings.Contains(stderr, "login taken: username taken") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// nodesFile writes a node list with the fake nodes' client ports.
func nodesFile(t *testing.T, addrs ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,host,coordination_port,client_port\n")
	for i, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		fmt.Fprintf(&b, "%d,%s,%d,%s\n", i+1, host, 6000+i, port)
	}
	path := filepath.Join(t.TempDir(), "nodes.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLineModeFailsOver kills the client's node: it logs in at the next
// node of the list, and what had no receipt is sent again, and stored once.
// Then every node is down for a while: what is typed meanwhile goes out
// when one is back.
func TestLineModeFailsOver(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	bob := peer(t, second, "bob")
	r := start(t, nil, "--nodes", nodesFile(t, srv.Addr, second), "--node", "1", "--user", "alice")
	r.stdout.waitFor(t, "connected to node 1 ("+srv.Addr+") as alice")
	srv.Mute("alice", true)
	r.send(t, "/msg bob in flight")
	srv.WaitLineContaining(t, `"messageContent":"in flight"`)
	srv.Mute("alice", false)
	srv.Crash(srv.Addr)
	r.stdout.waitFor(t, "error: connection to node 1 lost (server closed the connection): reconnecting")
	r.stdout.waitFor(t, "reconnected at node 2 ("+second+"); 1 message sent again")
	r.stdout.waitFor(t, "[16:55:53] you -> bob: in flight (stored)")
	if m := received(t, bob); m.Content != "in flight" {
		t.Fatalf("bob got %+v", m)
	}

	srv.Crash(second)
	r.stdout.waitFor(t, "error: connection to node 2 lost (server closed the connection): reconnecting")
	r.send(t, "/msg bob while down")
	r.stdout.waitForMatch(t, "error: reconnecting: attempt 1 failed: dial tcp ")
	srv.Restart(t, second)
	r.stdout.waitFor(t, "[16:55:53] you -> bob: while down (stored)")
	if m := received(t, bob); m.Content != "while down" {
		t.Fatalf("bob got %+v", m)
	}
	r.send(t, "/quit")
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, r.stderr)
	}
	if got := strings.Join(srv.Messages(), "|"); got != "in flight|while down" {
		t.Errorf("stored %q: each once", got)
	}
}

// TestEndOfInputSends checks that lines piped in are all sent before the
// client exits, and that it fails when they cannot be.
func TestEndOfInputSends(t *testing.T) {
	srv := clienttest.NewServer(t)
	peer(t, srv.Addr, "bob")
	r := start(t, nil, "--node", srv.Addr, "--user", "alice")
	r.send(t, "/msg bob one", "/msg bob two", "/to bob", "three")
	r.stdin.Close()
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, r.stderr)
	}
	if got := strings.Join(srv.Messages(), "|"); got != "one|two|three" {
		t.Errorf("stored %q", got)
	}

	lone := clienttest.NewServer(t)
	peer(t, lone.Addr, "bob").Close()
	r = start(t, nil, "--node", lone.Addr, "--user", "alice", "--timeout", "300ms")
	r.stdout.waitFor(t, "connected to node 1 ("+lone.Addr+") as alice")
	lone.Crash(lone.Addr)
	r.stdout.waitFor(t, "error: connection to node 1 lost (server closed the connection): reconnecting")
	r.send(t, "/msg bob into the void")
	r.stdin.Close()
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit %d, want 1 for a message not sent", code)
	}
	r.stdout.waitFor(t, "error: 1 message without receipt: context deadline exceeded")
}
