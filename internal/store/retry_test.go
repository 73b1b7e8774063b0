package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/ringchat/ringchat/internal/testutil"
)

// killOwnConnection makes the server drop tx's connection, as a server
// that dies or leaves its cluster does, from another connection of the
// pool.
func killOwnConnection(t *testing.T, s *sqlStore, tx *sqlTx) {
	t.Helper()
	var id int64
	if err := tx.tx.QueryRowContext(tx.ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatal(err)
	}
}

// A transaction whose connection breaks before its COMMIT is run again
// on a new connection: nothing of the first attempt committed, and the
// second commits once.
func TestMariaDBTransactionRetriedAfterLostConnection(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	ctx := context.Background()
	attempts := 0
	err := s.Update(ctx, func(tx Tx) error {
		attempts++
		if _, _, err := tx.EnsureUser("before"); err != nil {
			return err
		}
		if attempts == 1 {
			killOwnConnection(t, s, tx.(*sqlTx))
		}
		_, _, err := tx.EnsureUser("after")
		return err
	})
	if err != nil {
		t.Fatalf("a transaction whose connection broke before its commit: %v, want it run again and committed", err)
	}
	if attempts != 2 {
		t.Errorf("%d attempts, want 2", attempts)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM users WHERE name IN ('before', 'after')").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d users (%v), want 2", n, err)
	}
}

// A connection that breaks during the COMMIT is not retried: the commit
// may have reached the store, and the caller is told.
func TestMariaDBCommitOnLostConnectionNotRetried(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	attempts := 0
	err := s.Update(context.Background(), func(tx Tx) error {
		attempts++
		if _, _, err := tx.EnsureUser("maybe"); err != nil {
			return err
		}
		killOwnConnection(t, s, tx.(*sqlTx))
		return nil
	})
	if err == nil {
		t.Fatal("a commit on a killed connection succeeded")
	}
	if attempts != 1 {
		t.Errorf("%d attempts, want 1 (a commit that may have happened is never run again)", attempts)
	}
	t.Logf("the caller is told: %v", err)
}
