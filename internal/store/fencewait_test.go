package store

import (
	"context"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// A visit runs one fenced transaction per section, all with its token's
// stamp. When the last of them is left behind (its node gave up at its
// deadline and the close of its connection was lost on the way), the
// fence row read uncommitted and the row read committed carry the same
// stamp and, on one connection, the same holder_conn: only the time of
// the write tells them apart. The next holder must end it all the same.
// Before, it took the wait for a slow round trip and killed nothing, and
// every node's visit failed on the lock until the server's idle timeout
// (a chaos run at 20 % loss on one node: 1.96 s without a visit).
func TestMariaDBSecondSectionLeftBehindIsEnded(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.MySQLDSN(t)
	old, next := openScale(t, dsn), openScale(t, dsn)
	old.db.SetMaxOpenConns(1) // both sections on one connection, as often in a node
	f := Fence{Generation: 1, Seq: 1, Holder: 1}
	if err := old.Fenced(ctx, f, func(Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	left := make(chan error, 1)
	go func() {
		left <- old.Fenced(ctx, f, func(Tx) error {
			close(inside)
			<-release
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-left:
		t.Fatalf("the second section ended before it held the lock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := next.Fenced(wctx, Fence{Generation: 1, Seq: 2, Holder: 2}, func(Tx) error { return nil })
	cancel()
	close(release)
	if err != nil {
		t.Fatalf("the next holder could not write within 500 ms while the second section of the last visit held the fence row: %v", err)
	}
	if err := <-left; err == nil {
		t.Error("the section left behind committed after the next holder's")
	}
}
