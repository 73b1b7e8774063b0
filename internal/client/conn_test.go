package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/client/clienttest"
	"github.com/ringchat/ringchat/internal/protocol"
)

// TestWireBytes checks the exact bytes a Conn sends for every v1 request.
func TestWireBytes(t *testing.T) {
	srv := clienttest.NewServer(t)
	loginFake(t, srv, "bob")
	c := dialFake(t, srv)
	c.now = func() time.Time { return time.Date(2019, 4, 25, 16, 55, 53, 0, time.Local) }
	ctx := testCtx(t)

	steps := []struct {
		do   func() error
		want string
	}{
		{func() error { return c.Login(ctx, "alice") }, `{"messageType":"LOGIN","username":"alice"}`},
		{func() error { return c.Join(ctx, "g1") }, `{"messageType":"JOIN_GROUP","group":"g1"}`},
		{func() error { return c.Send(ctx, ToUser("bob"), "hi") },
			`{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"bob","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`},
		{func() error { return c.Send(ctx, ToGroup("g1"), "hi") },
			`{"messageType":"CHAT_MESSAGE","fromName":"alice","toGroup":"g1","messageContent":"hi","sentAt":"Apr 25, 2019, 4:55:53 PM"}`},
		{func() error { return c.Leave(ctx, "g1") }, `{"messageType":"LEAVE_GROUP","group":"g1"}`},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		srv.WaitLine(t, s.want)
	}
	want := []string{`{"messageType":"LOGIN","username":"bob"}`}
	for _, s := range steps {
		want = append(want, s.want)
	}
	if diff := cmp.Diff(want, srv.Lines()); diff != "" {
		t.Errorf("lines received by the server (-want +got):\n%s", diff)
	}
	if got := c.User(); got != "alice" {
		t.Errorf("User() = %q", got)
	}
}

func TestLoginTaken(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := dialFake(t, srv)
	err := c.Login(testCtx(t), clienttest.TakenName)
	var se *ServerError
	if !errors.As(err, &se) || se.Message != "username taken" {
		t.Fatalf("Login(taken) = %v, want *ServerError{username taken}", err)
	}
	if c.User() != "" {
		t.Errorf("User() = %q after a refused login", c.User())
	}
	if err := c.Login(testCtx(t), "alice"); err != nil {
		t.Fatalf("second Login: %v", err)
	}
}

func TestLeaveNotMember(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := loginFake(t, srv, "alice")
	err := c.Leave(testCtx(t), "g9")
	var se *ServerError
	if !errors.As(err, &se) || se.Message != "not a member of g9" {
		t.Fatalf("Leave = %v", err)
	}
	if err.Error() != "leave g9: not a member of g9" {
		t.Errorf("error text %q", err)
	}
}

func TestRelay(t *testing.T) {
	srv := clienttest.NewServer(t)
	alice, bob := loginFake(t, srv, "alice"), loginFake(t, srv, "bob")
	ctx := testCtx(t)
	for _, c := range []*Conn{alice, bob} {
		if err := c.Join(ctx, "g1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.Send(ctx, ToUser("bob"), "hi bob"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Send(ctx, ToGroup("g1"), "hi all"); err != nil {
		t.Fatal(err)
	}
	sent := clienttest.SentAt.Format(protocol.TimeLayout)
	want := []Event{
		ChatMessage{From: "alice", To: ToUser("bob"), Content: "hi bob", SentAt: sent},
		ChatMessage{From: "alice", To: ToGroup("g1"), Content: "hi all", SentAt: sent},
	}
	got := []Event{nextEvent(t, bob), nextEvent(t, bob)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bob's events (-want +got):\n%s", diff)
	}
}

func TestOldShapeDelivered(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := loginFake(t, srv, "bob")
	line := `{"sentAt":"Apr 25, 2019, 4:55:53 PM","fromName":"alice","toName":"g1","messageContent":"hey","forGroup":true,"messageType":"CHAT_MESSAGE"}`
	if err := srv.SendRaw("bob", line); err != nil {
		t.Fatal(err)
	}
	want := ChatMessage{From: "alice", To: ToGroup("g1"), Content: "hey", SentAt: "Apr 25, 2019, 4:55:53 PM"}
	if diff := cmp.Diff(Event(want), nextEvent(t, c)); diff != "" {
		t.Error(diff)
	}
}

func TestUnsolicitedErrorIsAnEvent(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := loginFake(t, srv, "alice")
	if err := c.Send(testCtx(t), ToUser("carol"), "hello?"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Event(ErrorMessage{Message: "user carol is not online"}), nextEvent(t, c)); diff != "" {
		t.Error(diff)
	}
}

func TestSendValidation(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := dialFake(t, srv)
	if err := c.Send(testCtx(t), ToUser("bob"), "hi"); !errors.Is(err, ErrNotLoggedIn) {
		t.Errorf("Send before login = %v", err)
	}
	if err := c.Login(testCtx(t), ""); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("Login(\"\") = %v", err)
	}
	if err := c.Login(testCtx(t), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(testCtx(t), ToUser("bob"), ""); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("Send empty = %v", err)
	}
	if err := c.Send(testCtx(t), ToUser(""), "x"); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("Send to nobody = %v", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := dialFake(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Login(ctx, clienttest.SilentName); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Login(silent) = %v, want deadline exceeded", err)
	}
	// The connection is still usable; the silent request stays queued.
	if err := c.Login(testCtx(t), "alice"); err != nil {
		t.Fatal(err)
	}
}

func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if c, err := Dial(testCtx(t), addr, Options{}); err == nil {
		c.Close()
		t.Fatal("Dial to a closed port succeeded")
	}
}

func TestServerClosesConnection(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := loginFake(t, srv, "alice")
	if err := c.Err(); err != nil {
		t.Fatalf("Err() = %v on an open connection", err)
	}
	srv.Close()
	evs := waitEventsClosed(t, c)
	if len(evs) != 1 {
		t.Fatalf("events %#v, want one Disconnected", evs)
	}
	if d, ok := evs[0].(Disconnected); !ok || !errors.Is(d.Err, ErrServerClosed) {
		t.Fatalf("event %#v, want Disconnected{ErrServerClosed}", evs[0])
	}
	if err := c.Err(); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Err() = %v", err)
	}
	if err := c.Join(testCtx(t), "g1"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Join after disconnect = %v", err)
	}
	if err := c.Send(testCtx(t), ToUser("bob"), "x"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Send after disconnect = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after disconnect = %v", err)
	}
}

func TestCloseWrite(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := loginFake(t, srv, "alice")
	if err := c.Send(testCtx(t), ToUser("nobody"), "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	evs := waitEventsClosed(t, c)
	want := []Event{ErrorMessage{Message: "user nobody is not online"}, Disconnected{Err: ErrServerClosed}}
	if diff := cmp.Diff(want, evs, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) })); diff != "" {
		t.Error(diff)
	}
}

func TestConcurrentRequests(t *testing.T) {
	srv := clienttest.NewServer(t)
	bob := loginFake(t, srv, "bob")
	c := loginFake(t, srv, "alice")
	ctx := testCtx(t)
	const n = 20
	errs := make(chan error, 2*n)
	for i := range n {
		go func() { errs <- c.Join(ctx, fmt.Sprintf("g%d", i)) }()
		go func() { errs <- c.Send(ctx, ToUser("bob"), fmt.Sprintf("m%d", i)) }()
	}
	for range 2 * n {
		if err := result(t, errs); err != nil {
			t.Error(err)
		}
	}
	for range n {
		if m, ok := nextEvent(t, bob).(ChatMessage); !ok || m.From != "alice" {
			t.Errorf("bob got %#v", m)
		}
	}
}
