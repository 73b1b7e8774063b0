package client

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client/clienttest"
	"github.com/ringchat/ringchat/internal/testutil"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// dialFake dials the fake server; the Conn is closed when the test ends.
func dialFake(t *testing.T, srv *clienttest.Server) *Conn {
	t.Helper()
	c, err := Dial(testCtx(t), srv.Addr, Options{Timeout: testutil.WaitLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func loginFake(t *testing.T, srv *clienttest.Server, user string) *Conn {
	t.Helper()
	c := dialFake(t, srv)
	if err := c.Login(testCtx(t), user); err != nil {
		t.Fatal(err)
	}
	return c
}

// nextEvent waits for the next event, failing the test at the deadline or
// if the channel closed.
func nextEvent(t *testing.T, c *Conn) Event {
	t.Helper()
	select {
	case ev, ok := <-c.Events():
		if !ok {
			t.Fatal("events channel closed")
		}
		return ev
	case <-time.After(testutil.WaitLimit):
		t.Fatal("timed out waiting for an event")
	}
	return nil
}

// waitEventsClosed drains Events until it closes and returns what came.
func waitEventsClosed(t *testing.T, c *Conn) []Event {
	t.Helper()
	var got []Event
	timeout := time.After(testutil.WaitLimit)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("events channel not closed; got %#v", got)
		}
	}
}

// rawServer is the far end of a Conn, driven line by line by the test.
type rawServer struct {
	nc net.Conn
	br *bufio.Reader
}

// rawPair connects a Conn to a rawServer over loopback TCP.
func rawPair(t *testing.T) (*Conn, *rawServer) {
	t.Helper()
	return rawPairWith(t, Options{Timeout: testutil.WaitLimit})
}

// rawPairWith is rawPair with the Conn's options given.
func rawPairWith(t *testing.T, opts Options) (*Conn, *rawServer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dial(testCtx(t), ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return c, &rawServer{nc: nc, br: bufio.NewReader(nc)}
}

func (s *rawServer) readLine(t *testing.T) string {
	t.Helper()
	s.nc.SetReadDeadline(time.Now().Add(testutil.WaitLimit))
	line, err := s.br.ReadString('\n')
	if err != nil {
		t.Fatalf("raw server read: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func (s *rawServer) write(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := s.nc.Write([]byte(l + "\n")); err != nil {
			t.Fatalf("raw server write: %v", err)
		}
	}
}

// async runs f in a goroutine and returns its result channel.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(testutil.WaitLimit):
		t.Fatal("timed out waiting for a request to finish")
	}
	return nil
}
