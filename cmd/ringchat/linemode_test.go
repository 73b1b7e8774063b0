package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/client/clienttest"
)

// peer logs in user on srv with package client.
func peer(t *testing.T, srv *clienttest.Server, user string, groups ...string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(ctx, user); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if err := c.Join(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func say(t *testing.T, c *client.Conn, to client.Recipient, text string) {
	t.Helper()
	if err := c.Send(context.Background(), to, text); err != nil {
		t.Fatal(err)
	}
}

// received waits for the next chat message on c.
func received(t *testing.T, c *client.Conn) client.ChatMessage {
	t.Helper()
	select {
	case ev := <-c.Events():
		m, ok := ev.(client.ChatMessage)
		if !ok {
			t.Fatalf("got %#v, want a chat message", ev)
		}
		return m
	case <-time.After(waitLimit):
	}
	t.Fatal("no message")
	return client.ChatMessage{}
}

func TestLineMode(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv, "bob", "g1")
	r := start(t, nil, "--node", srv.Addr, "--user", "alice")
	r.stdout.waitFor(t, "logged in as alice")

	r.send(t, "/join g1")
	r.stdout.waitFor(t, "joined #g1")
	r.send(t, "/msg bob hello  bob")
	if m := received(t, bob); m.From != "alice" || m.To != client.ToUser("bob") || m.Content != "hello  bob" {
		t.Errorf("bob got %#v", m)
	}
	say(t, bob, client.ToUser("alice"), "hi")
	r.stdout.waitFor(t, "[16:55:53] bob -> you: hi")
	say(t, bob, client.ToGroup("g1"), "hi all\x1b[2J")
	r.stdout.waitFor(t, `[16:55:53] bob -> #g1: hi all\x1b[2J`)

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
	r.stdout.waitFor(t, "error: user carol is not online")
	r.send(t, "/leave #g1")
	r.stdout.waitFor(t, "left #g1")
	r.send(t, "/help")
	r.stdout.waitFor(t, "  /quit              leave (so does end of input)")
	r.send(t, "/quit")
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, r.stderr)
	}
	if r.stderr.String() != "" {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	srv.WaitLine(t, `{"messageType":"LEAVE_GROUP","group":"g1"}`)
}

func TestLineModeJSON(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := peer(t, srv, "bob")
	r := start(t, nil, "--node", srv.Addr, "--user", "alice", "--json")
	r.stdout.waitFor(t, `{"messageType":"LOGIN","username":"alice"}`)
	r.send(t, "/join g1")
	r.stdout.waitFor(t, `{"messageType":"JOIN_GROUP","group":"g1"}`)
	say(t, bob, client.ToUser("alice"), "hi")
	r.stdout.waitFor(t, `{"messageType":"CHAT_MESSAGE","fromName":"bob","toUsername":"alice","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`)
	r.send(t, "/nope", "/to bob")
	r.stdout.waitFor(t, `{"messageType":"ERROR","errorMessage":"unknown command \"/nope\" (try /help)"}`)
	r.stderr.waitFor(t, "talking to bob")
	r.stdin.Close()
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		if _, err := client.Decode([]byte(l)); err != nil {
			t.Errorf("stdout line %s is not a v1 message: %v", l, err)
		}
	}
}

func TestLineModePositionalPromptsForUser(t *testing.T) {
	srv := clienttest.NewServer(t)
	host, port, _ := net.SplitHostPort(srv.Addr)
	r := start(t, nil, host, port)
	r.send(t, "alice", "/join g1")
	r.stdout.waitFor(t, "joined #g1")
	r.stdin.Close() // end of input closes cleanly
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, r.stderr)
	}
	if diff := cmp.Diff("logged in as alice\njoined #g1\n", r.stdout.String()); diff != "" {
		t.Error(diff)
	}
	if r.stderr.String() != "username: " {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestLineModeEnv(t *testing.T) {
	srv := clienttest.NewServer(t)
	code, stdout, stderr := runOnce(t, map[string]string{"RINGCHAT_NODE": srv.Addr, "RINGCHAT_USER": "carol"})
	if code != 0 || stdout != "logged in as carol\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Flags win over the environment.
	code, stdout, _ = runOnce(t, map[string]string{"RINGCHAT_NODE": "127.0.0.1:1", "RINGCHAT_USER": "carol"},
		"--node", srv.Addr, "-u", "dave")
	if code != 0 || stdout != "logged in as dave\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestLineModeLoginRefused(t *testing.T) {
	srv := clienttest.NewServer(t)
	code, _, stderr := runOnce(t, nil, "--node", srv.Addr, "--user", clienttest.TakenName)
	if code != 1 || stderr != "ringchat: login taken: username taken\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runOnce(t, nil, "--node", srv.Addr, "--user", clienttest.SilentName, "--timeout", "50ms")
	if code != 1 || !strings.Contains(stderr, "no answer from the server within 50ms") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestLineModeServerGone(t *testing.T) {
	srv := clienttest.NewServer(t)
	r := start(t, nil, "--node", srv.Addr, "--user", "alice")
	r.stdout.waitFor(t, "logged in as alice")
	srv.Close()
	r.stdout.waitFor(t, "error: connection lost: server closed the connection")
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if r.stderr.String() != "" {
		t.Errorf("reported twice; stderr %q", r.stderr)
	}
}

// TestEndOfInputDrains checks that what the server sends between the
// client's end of input and its own close is still printed: v1 servers drop
// a message once they have written it.
func TestEndOfInputDrains(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(waitLimit))
		br := bufio.NewReader(nc)
		for {
			line, err := br.ReadBytes('\n')
			if err == io.EOF {
				break // the client half-closed
			} else if err != nil {
				served <- err
				return
			}
			nc.Write(line) // echo LOGIN and JOIN_GROUP
		}
		_, err = io.WriteString(nc, `{"messageType":"CHAT_MESSAGE","fromName":"bob","toGroup":"g1","messageContent":"late","sentAt":"Apr 25, 2019, 4:55:53 PM"}`+"\n")
		served <- err
	}()
	r := start(t, nil, "--node", ln.Addr().String(), "--user", "alice")
	r.send(t, "/join g1")
	r.stdin.Close()
	if code := r.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, r.stderr)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	want := "logged in as alice\njoined #g1\n[16:55:53] bob -> #g1: late\n"
	if diff := cmp.Diff(want, r.stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}
