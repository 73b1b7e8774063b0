package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A direct message to a user whose inbox cursor a committed transaction of
// this process made sure of writes no cursor statement; one whose
// transaction rolled back teaches the process nothing, so the next one
// makes sure again (and the message is fetched: its cursor exists).
func TestInboxCursorKnownAfterCommitOnly(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "c.db"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := Migrate(ctx, st); err != nil {
		t.Fatal(err)
	}
	s := st.(*sqlStore)
	ensures := 0
	s.inspect = func(_ *sqlTx, q string, _ []any) {
		if strings.Contains(q, "inbox_cursors (user_id)") {
			ensures++
		}
	}
	var from, to User
	if err := s.Update(ctx, func(tx Tx) error {
		if from, _, err = tx.EnsureUser("alice"); err != nil {
			return err
		}
		to, _, err = tx.EnsureUser("bob")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	n := 0
	send := func(fail bool) error {
		n++
		return s.Update(ctx, func(tx Tx) error {
			m := NewMessage{ID: "m" + string(rune('a'+n)), SenderID: from.ID, ToUserID: to.ID, Content: "hi", SentAt: time.Now(), NodeID: 1}
			if _, _, err := tx.InsertMessage(m, nil); err != nil {
				return err
			}
			if fail {
				return errors.New("rolled back")
			}
			return nil
		})
	}
	for i, c := range []struct {
		fail bool
		want int // cursor statements so far
	}{
		{true, 1},  // rolled back: nothing learnt
		{false, 2}, // made sure again, committed
		{false, 2}, // known: no statement
		{false, 2},
	} {
		if err := send(c.fail); (err != nil) != c.fail {
			t.Fatalf("send %d: %v", i, err)
		}
		if ensures != c.want {
			t.Fatalf("after send %d: %d cursor statements, want %d", i, ensures, c.want)
		}
	}
	if err := s.Update(ctx, func(tx Tx) error {
		ds, err := tx.PendingFor(1, []int64{to.ID}, 10, 10)
		if err == nil && len(ds) != 3 {
			t.Errorf("%d messages wait for bob, want the 3 committed", len(ds))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
