package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/testutil"
)

func TestErrorFailsOldestPending(t *testing.T) {
	c, srv := rawPair(t)
	ctx := testCtx(t)
	j1 := async(func() error { return c.Join(ctx, "g1") })
	srv.readLine(t)
	j2 := async(func() error { return c.Join(ctx, "g2") })
	srv.readLine(t)
	srv.write(t, `{"messageType":"ERROR","errorMessage":"no g1 for you"}`, `{"messageType":"JOIN_GROUP","group":"g2"}`)
	var se *ServerError
	if err := result(t, j1); !errors.As(err, &se) || se.Message != "no g1 for you" {
		t.Errorf("Join g1 = %v", err)
	}
	if err := result(t, j2); err != nil {
		t.Errorf("Join g2 = %v", err)
	}
}

func TestEchoMatchesByValue(t *testing.T) {
	c, srv := rawPair(t)
	ctx := testCtx(t)
	j1 := async(func() error { return c.Join(ctx, "g1") })
	srv.readLine(t)
	j2 := async(func() error { return c.Leave(ctx, "g1") })
	srv.readLine(t)
	// Answers out of order still go to the request they echo.
	srv.write(t, `{"messageType":"LEAVE_GROUP","group":"g1"}`)
	if err := result(t, j2); err != nil {
		t.Errorf("Leave = %v", err)
	}
	srv.write(t, `{"messageType":"JOIN_GROUP","group":"g1"}`)
	if err := result(t, j1); err != nil {
		t.Errorf("Join = %v", err)
	}
	// An echo nobody waits for is delivered.
	srv.write(t, `{"messageType":"JOIN_GROUP","group":"g7"}`, `{"messageType":"ALIVE"}`, `{"messageType":"LOGIN","username":"x"}`)
	if diff := cmp.Diff([]Event{JoinGroup{Group: "g7"}, Login{Username: "x"}}, []Event{nextEvent(t, c), nextEvent(t, c)}); diff != "" {
		t.Error(diff)
	}
}

func TestAbandonedRequestConsumesItsAnswer(t *testing.T) {
	c, srv := rawPair(t)
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Join(short, "g1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join = %v", err)
	}
	srv.readLine(t)
	ctx := testCtx(t)
	j2 := async(func() error { return c.Join(ctx, "g2") })
	srv.readLine(t)
	// The late ERROR belongs to the abandoned g1: g2 must not fail, and the
	// error is still reported as an event.
	srv.write(t, `{"messageType":"ERROR","errorMessage":"late"}`, `{"messageType":"JOIN_GROUP","group":"g2"}`)
	if err := result(t, j2); err != nil {
		t.Fatalf("Join g2 = %v", err)
	}
	if diff := cmp.Diff(Event(ErrorMessage{Message: "late"}), nextEvent(t, c)); diff != "" {
		t.Error(diff)
	}
}

func TestLoginSetsUserOnlyOnEcho(t *testing.T) {
	c, srv := rawPair(t)
	ctx := testCtx(t)
	l := async(func() error { return c.Login(ctx, "alice") })
	if got := srv.readLine(t); got != `{"messageType":"LOGIN","username":"alice"}` {
		t.Fatalf("server read %s", got)
	}
	if c.User() != "" {
		t.Error("User set before the echo")
	}
	srv.write(t, `{"username":"alice","messageType":"LOGIN"}`)
	if err := result(t, l); err != nil {
		t.Fatal(err)
	}
	if c.User() != "alice" {
		t.Errorf("User() = %q", c.User())
	}
}

func TestProtocolErrorKeepsConnection(t *testing.T) {
	c, srv := rawPair(t)
	srv.write(t, `this is not json`, ``, "  \r", `{"messageType":"NEWS"}`, `{"messageType":"ERROR","errorMessage":"x"}`)
	ev := nextEvent(t, c)
	if pe, ok := ev.(ProtocolError); !ok || pe.Line != "this is not json" || !errors.Is(pe.Err, ErrMalformed) {
		t.Errorf("first event %#v", ev)
	}
	ev = nextEvent(t, c)
	if pe, ok := ev.(ProtocolError); !ok || !errors.Is(pe.Err, ErrUnknownType) {
		t.Errorf("second event %#v", ev)
	}
	if diff := cmp.Diff(Event(ErrorMessage{Message: "x"}), nextEvent(t, c)); diff != "" {
		t.Error(diff)
	}
}

// chatLine is a CHAT_MESSAGE line of exactly n bytes.
func chatLine(t *testing.T, n int) string {
	t.Helper()
	prefix := `{"messageType":"CHAT_MESSAGE","fromName":"a","toUsername":"b","sentAt":"x","messageContent":"`
	suffix := `"}`
	line := prefix + strings.Repeat("z", n-len(prefix)-len(suffix)) + suffix
	if len(line) != n {
		t.Fatalf("chatLine length %d", len(line))
	}
	return line
}

func TestLineOfMaxLengthAccepted(t *testing.T) {
	c, srv := rawPair(t)
	line := chatLine(t, MaxLineBytes)
	srv.write(t, line+"\r")
	want, err := Decode([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, c); !cmp.Equal(want, ev) {
		t.Fatalf("got %T, not the %d-byte message", ev, MaxLineBytes)
	}
}

func TestOversizedLineCloses(t *testing.T) {
	c, srv := rawPair(t)
	ctx := testCtx(t)
	pending := async(func() error { return c.Join(ctx, "g1") })
	srv.readLine(t)
	// The server keeps writing past the limit; the client must not buffer it all.
	long := []byte(chatLine(t, MaxLineBytes+1) + "\n")
	go func() {
		srv.nc.Write(long)
		srv.nc.Write(make([]byte, 4*MaxLineBytes)) // fails once the client hangs up
	}()
	evs := waitEventsClosed(t, c)
	if len(evs) != 1 {
		t.Fatalf("events %#v", evs)
	}
	if d, ok := evs[0].(Disconnected); !ok || !errors.Is(d.Err, ErrLineTooLong) {
		t.Fatalf("event %#v, want Disconnected{ErrLineTooLong}", evs[0])
	}
	if err := result(t, pending); !errors.Is(err, ErrLineTooLong) {
		t.Errorf("pending Join = %v", err)
	}
	if want := fmt.Sprintf("line from server longer than %d bytes", MaxLineBytes); ErrLineTooLong.Error() != want {
		t.Errorf("ErrLineTooLong = %q", ErrLineTooLong)
	}
}

func TestCloseJoinsReader(t *testing.T) {
	c, srv := rawPair(t)
	ctx := testCtx(t)
	// Overfill the events buffer so that the reader blocks delivering.
	for i := 0; i <= eventBuffer; i++ {
		srv.write(t, `{"messageType":"CHAT_MESSAGE","fromName":"a","toUsername":"b","messageContent":"spam","sentAt":"x"}`)
	}
	pending := async(func() error { return c.Join(ctx, "g1") })
	srv.readLine(t)
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	select {
	case <-c.readerDone:
	default:
		t.Fatal("Close returned before the reader exited")
	}
	if err := result(t, pending); !errors.Is(err, ErrClosed) {
		t.Errorf("pending Join after Close = %v", err)
	}
	for range c.Events() { // closed: the loop ends
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := c.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("Err() after Close = %v", err)
	}
	if err := c.Join(ctx, "g2"); !errors.Is(err, ErrClosed) {
		t.Errorf("Join after Close = %v", err)
	}
}

// A message that reaches the socket while the application closes the
// connection, and so never comes out of Events, is not acknowledged: the
// server sends it again, and the next connection sharing the Seen must take
// it for new, not for a duplicate to acknowledge and drop.
func TestCloseRacingDeliveryLeavesNoIDSeenButUndelivered(t *testing.T) {
	const n = 2 * eventBuffer * 2
	for round := range 10 {
		seen := NewSeen(0)
		c, srv := rawPairWith(t, Options{Timeout: testutil.WaitLimit, Seen: seen, AutoAck: true})
		id := func(i int) string { return fmt.Sprintf("m-%d-%d", round, i) }
		wrote := async(func() error {
			for i := range n {
				line := fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","id":%q,"seq":%d,"fromName":"a","toUsername":"b","sentAt":"x","messageContent":"m"}`+"\n", id(i), i+1)
				if _, err := srv.nc.Write([]byte(line)); err != nil {
					return err // the client hung up
				}
			}
			return nil
		})
		got := map[string]bool{}
		for len(got) < n/4 { // read some, then stop reading: the reader blocks delivering
			if m, ok := nextEvent(t, c).(ChatMessage); ok {
				got[m.ID] = true
			}
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		for ev := range c.Events() { // what was delivered before Close ended
			if m, ok := ev.(ChatMessage); ok {
				got[m.ID] = true
			}
		}
		result(t, wrote)
		srv.nc.Close()
		for i := range n {
			if seen.Has(id(i)) && !got[id(i)] {
				t.Fatalf("round %d: %s is in Seen but never came out of Events (%d delivered)", round, id(i), len(got))
			}
		}
		if len(got) == n {
			t.Fatalf("round %d: all %d delivered: the close raced nothing", round, n)
		}
	}
}
