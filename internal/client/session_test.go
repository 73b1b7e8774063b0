package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client/clienttest"
	"github.com/ringchat/ringchat/internal/testutil"
)

func startSession(t *testing.T, user string, addrs ...string) *Session {
	t.Helper()
	s, err := StartSession(testCtx(t), SessionConfig{Addrs: addrs, User: user,
		Options: Options{Timeout: testutil.WaitLimit}, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// nextOf waits for the next event of type E on s, skipping others.
func nextOf[E Event](t *testing.T, s *Session) E {
	t.Helper()
	timeout := time.After(testutil.WaitLimit)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed while waiting for %T", *new(E))
			}
			if e, match := ev.(E); match {
				return e
			}
		case <-timeout:
			t.Fatalf("no %T within %v", *new(E), testutil.WaitLimit)
		}
	}
}

func TestSessionFailsOverAndResends(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	bob := startSession(t, "bob", second)
	if addr, node, ok := bob.Where(); node != 2 || addr != second || !ok {
		t.Fatalf("bob at %s, node %d, %v", addr, node, ok)
	}
	alice := startSession(t, "alice", srv.Addr, second)
	if addr, node, ok := alice.Where(); node != 1 || addr != srv.Addr || !ok {
		t.Fatalf("alice at %s, node %d, %v", addr, node, ok)
	}

	// The node swallows a message, then dies: it is sent again at node 2.
	srv.Mute("alice", true)
	o, err := alice.Post(ToUser("bob"), "lost in a crash?")
	if err != nil {
		t.Fatal(err)
	}
	srv.WaitLine(t, `{"messageType":"CHAT_MESSAGE","id":"`+o.ID+`","toUsername":"bob","messageContent":"lost in a crash?"}`)
	srv.Mute("alice", false)
	srv.Crash(srv.Addr)
	if lost := nextOf[ConnectionLost](t, alice); lost.Addr != srv.Addr || lost.Err == nil {
		t.Fatalf("lost: %+v", lost)
	}
	if c := nextOf[Connected](t, alice); c.Node != 2 || !c.Reconnect || c.Resent != 1 {
		t.Fatalf("reconnected: %+v", c)
	}
	if st := nextOf[Stored](t, alice); st.ID != o.ID {
		t.Fatalf("stored %+v, want %s", st, o.ID)
	}
	if m := nextOf[ChatMessage](t, bob); m.ID != o.ID || m.Content != "lost in a crash?" || m.From != "alice" {
		t.Fatalf("bob got %+v", m)
	}

	// Every node down: what is typed meanwhile waits, and goes out when a
	// node is back; bob gets what was queued for him.
	srv.Crash(second)
	nextOf[ConnectionLost](t, alice)
	nextOf[Reconnecting](t, alice)
	if _, err := alice.Who(testCtx(t)); !errors.Is(err, ErrOffline) {
		t.Errorf("Who while offline: %v", err)
	}
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		o, err := alice.Post(ToUser("bob"), text)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	if n := len(alice.Pending()); n != 3 {
		t.Fatalf("%d pending, want 3", n)
	}
	srv.Restart(t, second)
	ctx := testCtx(t)
	if err := alice.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"one", "two", "three"} {
		if m := nextOf[ChatMessage](t, bob); m.Content != text || m.ID != ids[i] {
			t.Fatalf("bob got %+v, want %q", m, text)
		}
	}
	if got := srv.Messages(); strings.Join(got, "|") != "lost in a crash?|one|two|three" {
		t.Errorf("stored %q: each message once, in order", got)
	}

	// A message delivered again (by another node after a reconnect) is
	// shown once and acknowledged again. The first delivery's ACK goes out
	// first, so the duplicate's is a batch of its own.
	srv.WaitAcked(t, "bob")
	dup := `{"messageType":"CHAT_MESSAGE","id":"` + ids[0] + `","seq":2,"fromName":"alice","toUsername":"bob","messageContent":"one","sentAt":"x"}`
	if err := srv.SendRaw("bob", dup); err != nil {
		t.Fatal(err)
	}
	srv.WaitLine(t, `{"messageType":"ACK","ids":["`+ids[0]+`"]}`)
	if _, err := alice.Post(ToUser("bob"), "after"); err != nil {
		t.Fatal(err)
	}
	if m := nextOf[ChatMessage](t, bob); m.Content != "after" {
		t.Fatalf("bob got %+v after a duplicate, want only the new message", m)
	}
}

func TestSessionStalledNode(t *testing.T) {
	srv := clienttest.NewServer(t)
	s, err := StartSession(testCtx(t), SessionConfig{Addrs: []string{srv.Addr}, User: "alice",
		Options: Options{Timeout: testutil.WaitLimit}, RetryMin: 10 * time.Millisecond, StallTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Mute("alice", true)
	o, err := s.Post(ToUser("alice"), "anyone?")
	if err != nil {
		t.Fatal(err)
	}
	lost := nextOf[ConnectionLost](t, s)
	if lost.Err == nil || !strings.Contains(lost.Err.Error(), "stalled") {
		t.Fatalf("lost: %v", lost.Err)
	}
	srv.Mute("alice", false)
	if c := nextOf[Connected](t, s); c.Resent != 1 {
		t.Fatalf("%+v", c)
	}
	if st := nextOf[Stored](t, s); st.ID != o.ID {
		t.Fatalf("%+v", st)
	}
}

func TestSessionRefusals(t *testing.T) {
	srv := clienttest.NewServer(t)
	s := startSession(t, "alice", srv.Addr)
	o, err := s.Post(ToUser("nobody"), "hello?")
	if err != nil {
		t.Fatal(err)
	}
	e := nextOf[ErrorMessage](t, s)
	if e.ID != o.ID || e.Code != "UNKNOWN_USER" {
		t.Fatalf("%+v", e)
	}
	if err := s.Flush(testCtx(t)); err != nil {
		t.Fatalf("Flush after a refusal: %v", err)
	}
	if _, err := s.Post(ToUser("bob"), ""); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("empty message: %v", err)
	}
	if err := s.Leave(testCtx(t), "g9"); err == nil {
		t.Error("leaving a group one is not in succeeded")
	}
	if err := s.Join(testCtx(t), "g1"); err != nil {
		t.Fatal(err)
	}
	groups, err := s.Groups(testCtx(t))
	if err != nil || len(groups) != 1 || !groups[0].Member {
		t.Fatalf("groups %+v, %v", groups, err)
	}
	s.Close()
	if _, err := s.Post(ToUser("alice"), "late"); !errors.Is(err, ErrClosed) {
		t.Errorf("Post after Close: %v", err)
	}
	if _, ok := <-s.Events(); ok {
		// drain: the channel must close
		for range s.Events() {
		}
	}
}

func TestSessionLoginRefused(t *testing.T) {
	srv := clienttest.NewServer(t)
	first := startSession(t, "carol", srv.Addr)
	first.Close()
	srv.WaitGone(t, "carol")
	claim, err := StartSession(testCtx(t), SessionConfig{Addrs: []string{srv.Addr}, User: "dave", Password: "secret"})
	if err != nil {
		t.Fatal(err) // claims the name
	}
	claim.Close()
	srv.WaitGone(t, "dave")
	start := time.Now()
	_, err = StartSession(testCtx(t), SessionConfig{Addrs: []string{srv.Addr}, User: "dave", Password: "wrong"})
	var se *ServerError
	if !errors.As(err, &se) || se.Code != "BAD_PASSWORD" {
		t.Fatalf("wrong password: %v", err)
	}
	if time.Since(start) > testutil.WaitLimit/2 {
		t.Errorf("a wrong password was retried")
	}
	// A taken name is retried until the context ends (the session says it
	// gave up) or, failing fast, until loginGrace (1 s) has passed. The
	// context is shorter than that, but long enough for a loaded machine
	// to answer the first try.
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err = StartSession(ctx, SessionConfig{Addrs: []string{srv.Addr}, User: clienttest.TakenName})
	if err == nil || !strings.Contains(err.Error(), "username taken") ||
		strings.Contains(err.Error(), "gave up retrying") != (ctx.Err() != nil) {
		t.Fatalf("taken: %v (context: %v)", err, ctx.Err())
	}
}

// TestSessionAcksWhatWasTaken checks that a message is acknowledged once
// taken from Events, and one not taken before Close comes again.
func TestSessionAcksWhatWasTaken(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := startSession(t, "bob", srv.Addr)
	carol := startSession(t, "carol", srv.Addr)
	for _, text := range []string{"one", "two", "three"} {
		if _, err := bob.Post(ToUser("carol"), text); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if m := nextOf[ChatMessage](t, carol); m.Content != "one" {
		t.Fatalf("%+v", m)
	}
	srv.WaitLineContaining(t, `"ACK"`)
	carol.Close()
	srv.WaitGone(t, "carol")
	again := startSession(t, "carol", srv.Addr)
	for _, want := range []string{"two", "three"} {
		if m := nextOf[ChatMessage](t, again); m.Content != want {
			t.Fatalf("got %q, want %q", m.Content, want)
		}
	}
	srv.WaitAcked(t, "carol")
}
