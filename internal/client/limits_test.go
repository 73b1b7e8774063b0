package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client/clienttest"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestSessionKnowsTheLargestMessage: a Session asks for "limits", keeps
// what the node says, and Post refuses a longer message before sending
// anything; a node that does not say leaves the protocol's 4 KiB.
func TestSessionKnowsTheLargestMessage(t *testing.T) {
	srv := clienttest.NewServer(t)
	old := startSession(t, "old", srv.Addr)
	if got := old.MaxMessageBytes(); got != DefaultMaxMessageBytes {
		t.Errorf("a node that does not say: %d, want %d", got, DefaultMaxMessageBytes)
	}
	srv.SetMaxMessage(100)
	s := startSession(t, "alice", srv.Addr)
	srv.WaitLineContaining(t, `"features":["failover","limits"]`)
	if got := s.MaxMessageBytes(); got != 100 {
		t.Fatalf("MaxMessageBytes %d, want 100", got)
	}
	_, err := s.Post(ToUser("old"), strings.Repeat("x", 101))
	if !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "101 bytes, over the limit of 100 bytes per message; nothing was sent") {
		t.Fatalf("Post of 101 bytes: %v", err)
	}
	if len(s.Pending()) != 0 {
		t.Fatalf("the refused message is queued: %v", s.Pending())
	}
	text := strings.Repeat("y", 49) + "\n" + strings.Repeat("z", 50) // 100 bytes, two lines
	if _, err := s.Post(ToUser("old"), text); err != nil {
		t.Fatal(err)
	}
	if m := nextOf[ChatMessage](t, old); m.Content != text {
		t.Fatalf("got %q, want the two lines as sent", m.Content)
	}
}

// TestSessionNameInUseEndsAtOnce: a first login refused because the user
// is logged in elsewhere ends within 2 s with the server's words, however
// long the caller would wait; a wrong password ends at once.
func TestSessionNameInUseEndsAtOnce(t *testing.T) {
	srv := clienttest.NewServer(t)
	startSession(t, "dora", srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	start := time.Now()
	_, err := StartSession(ctx, SessionConfig{Addrs: []string{srv.Addr}, User: "dora", Options: Options{Timeout: testutil.WaitLimit}})
	elapsed := time.Since(start)
	var se *ServerError
	if !errors.As(err, &se) || se.Code != protocol.CodeUserOnline || !strings.Contains(err.Error(), `user "dora" is already logged in at node 1`) {
		t.Fatalf("name in use: %v", err)
	}
	if elapsed > 2*time.Second || strings.Contains(err.Error(), "gave up") {
		t.Errorf("name in use said after %v (%v), want within 2 s", elapsed, err)
	}
}
