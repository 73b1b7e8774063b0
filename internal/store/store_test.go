package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

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

// TestMariaDBStalledHolderDoesNotBlock: a process stopped inside a critical
// section (SIGSTOP) holds the fence row's lock; the server aborts its idle
// transaction, so the next token holder can write, and the stalled one's
// work is rolled back.
func TestMariaDBStalledHolderDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.MySQLDSN(t)
	stalled := storetest.Open(t, dsn)
	next := storetest.Open(t, dsn)
	inside := make(chan struct{})
	release := make(chan struct{})
	stalledErr := make(chan error, 1)
	go func() {
		stalledErr <- stalled.Fenced(ctx, store.Fence{Generation: 1, Seq: 1, Holder: 1}, func(tx store.Tx) error {
			if _, _, err := tx.EnsureUser("written-by-the-stalled-holder"); err != nil {
				return err
			}
			close(inside)
			<-release // stopped, holding the fence row's lock
			return nil
		})
	}()
	<-inside
	err := next.Fenced(ctx, store.Fence{Generation: 2, Seq: 0, Holder: 2}, func(tx store.Tx) error {
		_, _, err := tx.EnsureUser("written-by-the-next-holder")
		return err
	})
	close(release)
	if err != nil {
		t.Fatalf("the next holder could not write while another was stopped in its critical section: %v", err)
	}
	if err := <-stalledErr; err == nil {
		t.Error("the stopped holder's transaction committed after it had been aborted")
	}
	err = next.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.UserByName("written-by-the-stalled-holder"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the stopped holder's write survived: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
