package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
)

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string {
		return "sqlite:" + filepath.Join(t.TempDir(), "ringchat.db")
	})
}

func TestMariaDBConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string {
		return testutil.MySQLDSN(t)
	})
}

// holdFence runs a fenced transaction of stamp f on st in the background,
// which writes user (if not empty) and then holds the fence row's lock
// until release is closed. It returns once the lock is held, with the
// channel of the transaction's result.
func holdFence(t *testing.T, st store.Store, f store.Fence, user string, release <-chan struct{}) <-chan error {
	t.Helper()
	inside := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- st.Fenced(context.Background(), f, func(tx store.Tx) error {
			if user != "" {
				if _, _, err := tx.EnsureUser(user); err != nil {
					return err
				}
			}
			close(inside)
			<-release
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-res:
		t.Fatalf("fenced transaction %v ended before it held the lock: %v", f, err)
	}
	return res
}

// TestMariaDBHolderLeftBehindDoesNotBlock: a transaction holding the fence
// row's lock that nobody will finish, and the next token holder, whose
// transaction (half a second to run) must commit:
//   - stalled: a process stopped inside a critical section (SIGSTOP), and
//     a new generation made meanwhile;
//   - abandoned: a visit its node gave up on at its deadline, the close of
//     its connection lost on the way (a node losing packets), and the next
//     hop of the same generation. Before, the next holder failed waiting
//     for the lock (a chaos run: every node's visit failed for up to a
//     second, until the server's idle timeout).
//
// The next holder ends the old transaction after 20 ms (fencewait.go); the
// old one's work is rolled back and never commits.
func TestMariaDBHolderLeftBehindDoesNotBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		next store.Fence
	}{
		{"stalled", store.Fence{Generation: 2, Seq: 0, Holder: 2}},
		{"abandoned", store.Fence{Generation: 1, Seq: 2, Holder: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := testutil.MySQLDSN(t)
			next := storetest.Open(t, dsn)
			release := make(chan struct{})
			leftErr := holdFence(t, storetest.Open(t, dsn), store.Fence{Generation: 1, Seq: 1, Holder: 1}, "written-by-the-old-holder", release)
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err := next.Fenced(wctx, tc.next, func(tx store.Tx) error {
				_, _, err := tx.EnsureUser("written-by-the-next-holder")
				return err
			})
			cancel()
			close(release)
			if err != nil {
				t.Fatalf("the next holder could not write within 500 ms while an older transaction held the fence row: %v", err)
			}
			if err := <-leftErr; err == nil {
				t.Error("the old holder's transaction committed after the next holder's")
			}
			err = next.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.UserByName("written-by-the-old-holder"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the old holder's write survived: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if f, err := next.Fence(ctx); err != nil || f.Generation != tc.next.Generation || f.Seq != tc.next.Seq {
				t.Errorf("fence %v (%v), want %v", f, err, tc.next)
			}
		})
	}
}

// TestMariaDBStaleWaiterEndsNobody: a transaction of an older stamp that
// waits for the fence row's lock held by a newer one does not end it: the
// newer commits when it is done, and the older is fenced out.
func TestMariaDBStaleWaiterEndsNobody(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.MySQLDSN(t)
	stale := storetest.Open(t, dsn)
	release := make(chan struct{})
	newerErr := holdFence(t, storetest.Open(t, dsn), store.Fence{Generation: 1, Seq: 5, Holder: 1}, "written-by-the-newer-holder", release)
	staleErr := make(chan error, 1)
	go func() {
		staleErr <- stale.Fenced(ctx, store.Fence{Generation: 1, Seq: 3, Holder: 2}, func(tx store.Tx) error { return nil })
	}()
	// The stale one waits for the lock well past fenceWaitKill; then the
	// newer one finishes.
	select {
	case err := <-staleErr:
		t.Fatalf("the stale transaction ended before the newer one released the lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-newerErr; err != nil {
		t.Fatalf("the newer holder's transaction was ended by a stale waiter: %v", err)
	}
	if err := <-staleErr; !errors.Is(err, store.ErrFenced) {
		t.Errorf("stale transaction: %v, want ErrFenced", err)
	}
}

// TestMariaDBLogoutWaitsForVisitMarks: once a visit has marked a user's rows
// delivered, the user's logout waits for the visit to commit, so that a
// login elsewhere (whose reset makes delivered rows pending again) comes
// after the marks and undoes them. Without the wait, the reset would skip
// the rows the visit had locked, and they would stay marked for a session
// that is gone.
func TestMariaDBLogoutWaitsForVisitMarks(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.MySQLDSN(t)
	st := storetest.Open(t, dsn)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var a, b store.User
	err = st.Update(ctx, func(tx store.Tx) error {
		a, _, _ = tx.EnsureUser("a")
		b, _, _ = tx.EnsureUser("b")
		if err := tx.SetPresence(b.ID, 1); err != nil {
			return err
		}
		_, _, err := tx.InsertMessage(store.NewMessage{ID: "m1", SenderID: a.ID, ToUserID: b.ID, Content: "hi", SentAt: time.Now()}, []int64{b.ID})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// logoutBlocked reports whether this database's logout has been
	// executing its one-row DELETE for 50 ms: waiting for a lock.
	logoutBlocked := func() bool {
		var n int
		_ = raw.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()" +
			" AND INFO LIKE 'DELETE FROM presence %' AND TIME_MS >= 50").Scan(&n)
		return n > 0
	}
	moved := make(chan error, 1)
	err = st.Update(ctx, func(tx store.Tx) error {
		ds, err := tx.PendingForNodeFair(1, 10, 10)
		if err != nil || len(ds) != 1 {
			return fmt.Errorf("pending = %+v, %v; want one row", ds, err)
		}
		rows := []store.RecipientSeq{{RecipientID: b.ID, Seq: ds[0].Seq}}
		if done, _, err := tx.MarkDeliveredRows(1, rows); err != nil || len(done) != 1 {
			return fmt.Errorf("MarkDeliveredRows = %+v, %v", done, err)
		}
		go func() {
			err := st.Update(ctx, func(tx store.Tx) error {
				_, err := tx.ClearPresence(b.ID, 1)
				return err
			})
			if err == nil {
				err = st.Update(ctx, func(tx store.Tx) error {
					if err := tx.SetPresence(b.ID, 2); err != nil {
						return err
					}
					_, err := tx.ResetDelivered(b.ID)
					return err
				})
			}
			moved <- err
		}()
		// This transaction is idle now, and the server aborts idle write
		// transactions after a second: poll briefly.
		deadline := time.Now().Add(700 * time.Millisecond)
		for !logoutBlocked() {
			select {
			case err := <-moved:
				moved <- err
				return fmt.Errorf("the user logged out and in elsewhere (%v) while a visit held its rows marked", err)
			default:
			}
			if time.Now().After(deadline) {
				return errors.New("the logout is not waiting for the visit")
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-moved:
		if err != nil {
			t.Fatalf("logout and login elsewhere: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logout and login elsewhere did not finish after the visit committed")
	}
	if n := storetest.PendingFor(t, st, "b"); n != 1 {
		t.Fatalf("b has %d rows", n)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		if ds, err := tx.PendingForNode(2, 10); err != nil || len(ds) != 1 {
			t.Errorf("pending at node 2 after the login there = %+v, %v; want the row the visit had marked", ds, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGaleraConformance runs the conformance tests on a 3-server Galera
// cluster, each handle of a test on another server: a compare-and-set or a fence that two servers' commits
// race for is won once (the loser's certification failure is a lost race,
// never a success), and migrations from several servers at once apply once.
func TestGaleraConformance(t *testing.T) {
	g := testutil.Galera(t, "../../scripts/galera.sh")
	server, err := sql.Open("mysql", "root@tcp("+g.Host(1)+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	n := 0
	newDSN := func(t *testing.T) string {
		n++
		name := fmt.Sprintf("galera_%d", n)
		if _, err := server.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		return g.DSN(name, 1)
	}
	t.Run("SyncWait", func(t *testing.T) {
		// Every connection of a pool on a member waits for the cluster's
		// earlier commits.
		pool, err := store.OpenPool(context.Background(), newDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var wait int
		if err := pool.QueryRow("SELECT @@session.wsrep_sync_wait").Scan(&wait); err != nil || wait != 1 {
			t.Errorf("wsrep_sync_wait = %d (%v), want 1", wait, err)
		}
	})
	t.Run("Schema", func(t *testing.T) { storetest.RunSchema(t, newDSN) })
	t.Run("Control", func(t *testing.T) { storetest.RunControl(t, newDSN) })
	t.Run("Queue", func(t *testing.T) { storetest.RunQueue(t, newDSN) })
}
