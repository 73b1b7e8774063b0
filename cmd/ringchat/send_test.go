package main

import (
	"net"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/client/clienttest"
)

func TestSend(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv, "bob", "g1")
	code, stdout, stderr := runOnce(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--to", "bob", "hello", "there")
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if m := received(t, bob); m.From != "alice" || m.To != client.ToUser("bob") || m.Content != "hello there" {
		t.Errorf("bob got %#v", m)
	}
	srv.WaitGone(t, "alice") // one login per name: the first send's session must be over
	code, _, stderr = runOnce(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--group", "#g1", "all")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if m := received(t, bob); m.To != client.ToGroup("g1") || m.Content != "all" {
		t.Errorf("bob got %#v", m)
	}
}

func TestSendFailures(t *testing.T) {
	srv := clienttest.NewServer(t)
	code, _, stderr := runOnce(t, nil, "send", "--node", srv.Addr, "--user", "alice", "--to", "carol", "hi")
	if code != 1 || stderr != "ringchat: send to carol: user carol is not online\n" {
		t.Errorf("offline recipient: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runOnce(t, nil, "send", "--node", srv.Addr, "--user", clienttest.TakenName, "--to", "bob", "hi")
	if code != 1 || stderr != "ringchat: login taken: username taken\n" {
		t.Errorf("taken: exit %d, stderr %q", code, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, stderr = runOnce(t, nil, "send", "--node", closed, "--user", "alice", "--to", "bob", "hi")
	if code != 1 || !strings.Contains(stderr, "ringchat: dial tcp "+closed) {
		t.Errorf("no server: exit %d, stderr %q", code, stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"send", "--user", "a", "hi"},
		{"send", "--user", "a", "--to", "b", "--group", "g", "hi"},
		{"send", "--user", "a", "--to", "b"},
		{"send", "--to", "b", "hi"},
		{"send", "--user", "a", "--to", "b c", "hi"},
		{"onlyhost"},
		{"host", "notaport"},
		{"a", "b", "c"},
		{"--node", "127.0.0.1:1", "host", "1"},
		{"--node", "nohostport"},
		{"--timeout", "0s"},
		{"--bogus"},
		{"version", "extra"},
	} {
		code, stdout, stderr := runOnce(t, nil, args...)
		if code != 2 || stdout != "" || !strings.HasSuffix(stderr, "Run 'ringchat --help' for usage.\n") {
			t.Errorf("ringchat %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	code, stdout, _ := runOnce(t, nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "ringchat ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runOnce(t, nil, "--help")
	if code != 0 || !strings.Contains(stdout, "/to USER|#GROUP") || !strings.Contains(stdout, "--timeout") {
		t.Errorf("help: exit %d, %q", code, stdout)
	}
}
