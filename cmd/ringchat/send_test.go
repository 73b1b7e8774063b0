package main

import (
	"net"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/client/clienttest"
)

func TestSend(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv.Addr, "bob", "g1")
	code, stdout, stderr := runOnce(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--to", "bob", "hello", "there")
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if m := received(t, bob); m.From != "alice" || m.To != client.ToUser("bob") || m.Content != "hello there" {
		t.Errorf("bob got %#v", m)
	}
	srv.WaitGone(t, "alice") // one login per name: the first send's session must be over
	r := start(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--group", "#g1", "--json")
	r.send(t, "from standard input")
	r.stdin.Close()
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, r.stderr)
	}
	r.stdout.waitForMatch(t, `{"messageType":"STORED","id":"`)
	r.stdout.waitForMatch(t, `"toGroup":"g1","messageContent":"from standard input"}`)
	if m := received(t, bob); m.To != client.ToGroup("g1") || m.Content != "from standard input" {
		t.Errorf("bob got %#v", m)
	}
}

// TestSendLeavesTheQueueAlone checks that a one-shot command does not
// consume the messages waiting for its user: tail gets them afterwards.
func TestSendLeavesTheQueueAlone(t *testing.T) {
	srv := clienttest.NewServer(t)
	peer(t, srv.Addr, "alice").Close()
	srv.WaitGone(t, "alice")
	bob := peer(t, srv.Addr, "bob")
	say(t, bob, client.ToUser("alice"), "waiting for you")
	say(t, bob, client.ToUser("alice"), "me too")
	if code, _, stderr := runOnce(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--to", "bob", "ok"); code != 0 {
		t.Fatalf("send: exit %d, %s", code, stderr)
	}
	srv.WaitGone(t, "alice")
	code, stdout, stderr := runOnce(t, nil, "tail", "--node", srv.Addr, "--user", "alice", "--count", "2")
	if code != 0 || stdout != "[16:55:53] bob -> you: waiting for you\n[16:55:53] bob -> you: me too\n" {
		t.Fatalf("tail: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	srv.WaitAcked(t, "alice")
}

func TestSendFailures(t *testing.T) {
	srv := clienttest.NewServer(t)
	code, _, stderr := runOnce(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--to", "carol", "hi")
	if code != 1 || stderr != "ringchat: send to carol: no user \"carol\" (a user exists once they have logged in)\n" {
		t.Errorf("unknown recipient: exit %d, stderr %q", code, stderr)
	}
	srv.WaitGone(t, "alice")
	code, stdout, stderr := runOnce(t, nil, "send", "--json", "--node", srv.Addr, "--user", "alice", "--group", "nope", "hi")
	if code != 1 || stderr != "" || !strings.HasPrefix(stdout, `{"messageType":"ERROR","code":"UNKNOWN_GROUP","errorMessage":"no group \"nope\"`) {
		t.Errorf("unknown group, JSON: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// Nothing listening, or the user logged in elsewhere: said at once,
	// not after the timeout (which would add "no answer ... within 1m0s").
	code, _, stderr = runOnce(t, nil, "send", "--node", closed, "--user", "alice", "--to", "bob", "hi", "--timeout", "1m")
	if code != 1 || !strings.Contains(stderr, "nothing listens at "+closed) || !strings.Contains(stderr, "make run") || strings.Contains(stderr, "within") {
		t.Errorf("no server: exit %d, stderr %q", code, stderr)
	}
	peer(t, srv.Addr, "dora")
	code, _, stderr = runOnce(t, nil, "send", "--node", srv.Addr, "--user", "dora", "--to", "bob", "hi", "--timeout", "1m")
	if code != 1 || !strings.Contains(stderr, "already logged in") || strings.Contains(stderr, "within") {
		t.Errorf("user logged in elsewhere: exit %d, stderr %q", code, stderr)
	}
}

// TestSendSurvivesItsNode kills the node before the receipt: send logs in
// at the next node and sends the message again; it is stored once.
func TestSendSurvivesItsNode(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	bob := peer(t, second, "bob")
	srv.Mute("alice", true)
	r := start(t, nil, "send", "--nodes", nodesFile(t, srv.Addr, second), "--user", "alice", "--to", "bob", "persistent")
	srv.WaitLineContaining(t, `"messageContent":"persistent"`)
	srv.Mute("alice", false)
	srv.Crash(srv.Addr)
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, r.stderr)
	}
	if m := received(t, bob); m.Content != "persistent" {
		t.Fatalf("bob got %+v", m)
	}
	if got := srv.Messages(); len(got) != 1 {
		t.Errorf("stored %q", got)
	}
}

func TestQueries(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv.Addr, "bob", "g1", "g2")
	say(t, bob, client.ToGroup("g1"), "in the group")
	code, stdout, _ := runOnce(t, nil, "who", "--node", srv.Addr, "--user", "alice")
	if code != 0 || stdout != "alice\t1\nbob\t1\n" {
		t.Errorf("who: exit %d, %q", code, stdout)
	}
	srv.WaitGone(t, "alice")
	code, stdout, _ = runOnce(t, nil, "groups", "--node", srv.Addr, "--user", "bob2", "--json")
	if code != 0 || stdout != `{"messageType":"GROUPS","groups":[{"group":"g1","members":1,"member":false},{"group":"g2","members":1,"member":false}]}`+"\n" {
		t.Errorf("groups: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runOnce(t, nil, "groups", "--node", srv.Addr, "--user", "alice")
	if code != 0 || stdout != "g1\t1\t-\ng2\t1\t-\n" {
		t.Errorf("groups: exit %d, %q", code, stdout)
	}
	srv.WaitGone(t, "alice")
	code, _, stderr := runOnce(t, nil, "history", "--node", srv.Addr, "--user", "alice", "--group", "g1")
	if code != 1 || stderr != "ringchat: history of #g1: not a member of g1: join it to read its history\n" {
		t.Errorf("history: exit %d, %q", code, stderr)
	}
	srv.WaitGone(t, "alice")
	code, stdout, _ = runOnce(t, nil, "history", "--node", srv.Addr, "--user", "bob2", "--to", "bob")
	if code != 0 || stdout != "no earlier messages with bob\n" {
		t.Errorf("history: exit %d, %q", code, stdout)
	}
}

func TestTailFollowsFailover(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	bob := peer(t, second, "bob")
	r := start(t, nil, "tail", "--nodes", nodesFile(t, srv.Addr, second), "--user", "alice", "--json", "--count", "2")
	srv.WaitUser(t, "alice")
	say(t, bob, client.ToUser("alice"), "before")
	r.stdout.waitForMatch(t, `"messageContent":"before"`)
	srv.Crash(srv.Addr)
	r.stderr.waitForMatch(t, "reconnected at node 2")
	say(t, bob, client.ToUser("alice"), "after")
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, r.stderr)
	}
	if n := strings.Count(r.stdout.String(), "\n"); n != 2 {
		t.Errorf("%d lines:\n%s", n, r.stdout)
	}
}

func TestTailInterrupted(t *testing.T) {
	srv := clienttest.NewServer(t)
	r := start(t, nil, "tail", "--node", srv.Addr, "--user", "alice")
	r.stderr.waitFor(t, "connected to node 1 ("+srv.Addr+") as alice")
	r.cancel() // as Ctrl-C
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	srv.WaitGone(t, "alice")
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"send", "--user", "a", "hi"},
		{"send", "--user", "a", "--to", "b", "--group", "g", "hi"},
		{"send", "--user", "a", "--to", "b"},
		{"send", "--to", "b", "hi"},
		{"send", "--user", "a", "--to", "b c", "hi"},
		{"tail"},
		{"tail", "--user", "a", "extra"},
		{"who"},
		{"history", "--user", "a"},
		{"history", "--user", "a", "--to", "b", "--limit", "0"},
		{"onlyhost"},
		{"host", "notaport"},
		{"a", "b", "c"},
		{"--node", "127.0.0.1:1", "host", "1"},
		{"--node", "nohostport"},
		{"--node", "3"},
		{"--nodes", "/nonexistent/nodes.csv"},
		{"--timeout", "0s"},
		{"--bogus"},
		{"version", "extra"},
	} {
		code, stdout, stderr := runOnce(t, nil, args...)
		if code != 2 || stdout != "" || !strings.HasSuffix(stderr, "Run 'ringchat --help' for usage.\n") {
			t.Errorf("ringchat %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	code, _, stderr := runOnce(t, map[string]string{"RINGCHAT_BELL": "loud"}, "--user", "a", "--node", "127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "RINGCHAT_BELL") {
		t.Errorf("RINGCHAT_BELL=loud: exit %d, stderr %q", code, stderr)
	}
}

func TestNodeResolution(t *testing.T) {
	list := nodesFile(t, "127.0.0.1:8101", "127.0.0.1:8102", "127.0.0.1:8103")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "127.0.0.1:8001"},
		{[]string{"--nodes", list}, nil, "127.0.0.1:8101 127.0.0.1:8102 127.0.0.1:8103"},
		{[]string{"--nodes", list, "--node", "2"}, nil, "127.0.0.1:8102 127.0.0.1:8101 127.0.0.1:8103"},
		{[]string{"--node", "3"}, map[string]string{"RINGCHAT_NODES": list}, "127.0.0.1:8103 127.0.0.1:8101 127.0.0.1:8102"},
		{[]string{"--nodes", list, "10.0.0.1", "9"}, nil, "10.0.0.1:9 127.0.0.1:8101 127.0.0.1:8102 127.0.0.1:8103"},
		{nil, map[string]string{"RINGCHAT_NODE": "h:1"}, "h:1"},
	} {
		g := &globals{getenv: func(k string) string { return tc.env[k] }}
		root := newRootCmdWith(g)
		var cfg config
		var err error
		root.RunE = func(cmd *cobra.Command, args []string) error {
			cfg, err = g.resolve(cmd, args)
			return nil
		}
		root.SetArgs(tc.args)
		if xerr := root.Execute(); xerr != nil {
			t.Fatal(xerr)
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if got := strings.Join(cfg.addrs, " "); got != tc.want {
			t.Errorf("%q: addrs %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	code, stdout, _ := runOnce(t, nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "ringchat ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runOnce(t, nil, "--help")
	if code != 0 || !strings.Contains(stdout, "/to USER|#GROUP") || !strings.Contains(stdout, "--timeout") || !strings.Contains(stdout, "--plain") {
		t.Errorf("help: exit %d, %q", code, stdout)
	}
}
