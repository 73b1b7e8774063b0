package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// TestMySQLDSNInterpolatesUnlessTold: a statement's arguments go in its text
// (one round trip, not a prepare and an execute), unless the DSN says
// otherwise, in either of its forms.
func TestMySQLDSNInterpolatesUnlessTold(t *testing.T) {
	for dsn, want := range map[string]bool{
		"mysql://root@127.0.0.1:3306/ringchat":                               true,
		"mysql://root@127.0.0.1:3306/ringchat?interpolateParams=false":       false,
		"root@tcp(127.0.0.1:3306)/ringchat":                                  true,
		"root@tcp(127.0.0.1:3306)/ringchat?interpolateParams=false":          false,
		"root@tcp(127.0.0.1:3306)/ringchat?interpolateParams=true&tls=false": true,
	} {
		d, err := ParseDSN(dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if d.MySQL.InterpolateParams != want {
			t.Errorf("%s: InterpolateParams %v, want %v", dsn, d.MySQL.InterpolateParams, want)
		}
	}
}

// TestMariaDBTransactionsReadCommittedWithoutASetEach: every transaction
// (fenced, Update, View) runs at read committed, the level the fence relies
// on, set once on the session instead of before each transaction.
func TestMariaDBTransactionsReadCommittedWithoutASetEach(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	if s.d.txOptions != nil {
		t.Errorf("transactions still set their isolation level each (%+v): a round trip before every one", *s.d.txOptions)
	}
	level := func(tx Tx) string {
		var l string
		if err := tx.(*sqlTx).tx.QueryRowContext(context.Background(), "SELECT @@tx_isolation").Scan(&l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()
	var got []string
	if err := s.Fenced(ctx, Fence{Generation: 1, Seq: 1, Holder: 1}, func(tx Tx) error { got = append(got, level(tx)); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx Tx) error { got = append(got, level(tx)); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx Tx) error { got = append(got, level(tx)); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, l := range got {
		if l != "READ-COMMITTED" {
			t.Errorf("transaction %d (fenced, update, view) runs at %s", i, l)
		}
	}
}

// TestNewMessagesStoredInTwoStatements: a batch of new direct messages is
// one INSERT that returns the sequences and one that makes sure their
// recipients have an inbox cursor (it writes nothing for one who has),
// on both stores; a batch holding a stored id still stores the rest once.
func TestNewMessagesStoredInTwoStatements(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		if !s.returning {
			t.Fatal("the store does not use INSERT ... RETURNING")
		}
		seedUsers(t, s, 3)
		var stmts []string
		s.inspect = func(_ *sqlTx, q string, _ []any) { stmts = append(stmts, q) }
		defer func() { s.inspect = nil }()
		batch := func(ids ...string) []NewMessage {
			var ms []NewMessage
			for _, id := range ids {
				ms = append(ms, NewMessage{ID: id, SenderID: 1, ToUserID: 2, Content: id, SentAt: time.Now(), NodeID: 1})
			}
			return ms
		}
		rcpts := func(n int) [][]int64 {
			out := make([][]int64, n)
			for i := range out {
				out[i] = []int64{2}
			}
			return out
		}
		var first []Inserted
		err := visit(t, s, 1, func(tx *sqlTx) error {
			stmts = nil
			var err error
			first, err = tx.InsertMessages(batch("m1", "m2", "m3"), rcpts(3))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(stmts) != 2 {
			t.Errorf("3 new messages took %d statements, want 2:\n%s", len(stmts), strings.Join(stmts, "\n"))
		}
		var again []Inserted
		err = visit(t, s, 2, func(tx *sqlTx) error {
			var err error
			again, err = tx.InsertMessages(batch("m4", "m2", "m5"), rcpts(3))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if again[0].Dup || !again[1].Dup || again[2].Dup || again[1].Seq != first[1].Seq ||
			!again[1].SentAt.Equal(first[1].SentAt) || again[2].Seq <= again[0].Seq || again[0].Seq <= first[2].Seq {
			t.Errorf("a batch with a stored id: %+v (first %+v)", again, first)
		}
		if n := count(t, s, "SELECT COUNT(*) FROM messages m JOIN inbox_cursors c ON c.user_id = m.to_user_id WHERE c.user_id = 2 AND m.msg_seq > c.sent_seq"); n != 5 {
			t.Errorf("%d messages wait in the inbox, want 5", n)
		}
		if n := count(t, s, "SELECT COUNT(*) FROM inbox_cursors"); n != 1 {
			t.Errorf("%d inbox cursors, want 1", n)
		}
		if n := count(t, s, "SELECT COUNT(*) FROM messages"); n != 5 {
			t.Errorf("%d messages, want 5", n)
		}
	})
}

// TestMariaDBBoundDirectMarkWithoutSavepoint: a bound mark of direct rows
// alone (one update of the users' inbox cursors) runs without a savepoint,
// and a stop of its update still leaves every row pending.
func TestMariaDBBoundDirectMarkWithoutSavepoint(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	if !s.statementTime {
		t.Skip("server without max_statement_time")
	}
	seedUsers(t, s, 2)
	now := time.Now().UnixMicro()
	seed(t, s,
		fmt.Sprintf("INSERT INTO messages (msg_seq, msg_id, sender_id, to_user_id, content, sent_us, stored_us, node_id) VALUES (1, 'd1', 2, 1, 'one', %d, %d, 1), (2, 'd2', 2, 1, 'two', %d, %d, 1)", now, now, now, now),
		"INSERT INTO inbox_cursors (user_id) VALUES (1)",
		"INSERT INTO presence (user_id, node_id, since_us) VALUES (1, 1, 0)")
	var stmts []string
	s.inspect = func(_ *sqlTx, q string, _ []any) { stmts = append(stmts, q) }
	rows := []RecipientSeq{{RecipientID: 1, Seq: 1}, {RecipientID: 1, Seq: 2}}
	ctx := context.Background()
	locker, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.ExecContext(ctx, "SELECT * FROM inbox_cursors WHERE user_id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	err = visit(t, s, 1, func(tx *sqlTx) error {
		defer tx.Bound(time.Now().Add(30 * time.Millisecond))()
		_, _, err := tx.MarkDeliveredRows(1, rows)
		if !errors.Is(err, ErrOverBudget) {
			t.Errorf("a mark waiting on a lock, bound to 30 ms: err = %v, want ErrOverBudget", err)
		}
		return nil
	})
	locker.Rollback()
	if err != nil {
		t.Fatalf("the visit after its stopped mark: %v", err)
	}
	if n := count(t, s, "SELECT sent_seq FROM inbox_cursors WHERE user_id = 1"); n != 0 {
		t.Errorf("inbox cursor after a stopped mark: sent %d, want 0 (both pending)", n)
	}
	stmts = nil
	err = visit(t, s, 2, func(tx *sqlTx) error {
		defer tx.Bound(time.Now().Add(time.Second))()
		marked, _, err := tx.MarkDeliveredRows(1, rows)
		if err == nil && len(marked) != 2 {
			t.Errorf("marked %v, want both rows", marked)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if strings.Contains(q, "SAVEPOINT") {
			t.Errorf("a mark of direct rows alone used a savepoint:\n%s", strings.Join(stmts, "\n"))
			break
		}
	}
	if n := count(t, s, "SELECT sent_seq FROM inbox_cursors WHERE user_id = 1"); n != 2 {
		t.Errorf("inbox cursor after the mark: sent %d, want 2 (none pending)", n)
	}
}

// TestQuietDirectMessageStatements: a direct message on a quiet ring, as
// its visits run it: the fetch and the mark in one visit need no count of
// the inbox (the mark takes what the fetch read: fetch, group cursors,
// presence, the cursor's UPDATE), and the acknowledgement of the next
// message in order is one UPDATE, on both stores.
func TestQuietDirectMessageStatements(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		seedUsers(t, s, 2)
		seed(t, s, "INSERT INTO presence (user_id, node_id, since_us) VALUES (2, 1, 0)")
		var stmts []string
		s.inspect = func(_ *sqlTx, q string, _ []any) { stmts = append(stmts, q) }
		defer func() { s.inspect = nil }()
		var marked []RecipientSeq
		for i := range 3 {
			id := fmt.Sprint("m", i)
			if err := visit(t, s, int64(3*i+1), func(tx *sqlTx) error {
				_, err := tx.InsertMessages([]NewMessage{{ID: id, SenderID: 1, ToUserID: 2, Content: id, SentAt: time.Now(), NodeID: 1}},
					[][]int64{{2}})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			stmts = nil
			if err := visit(t, s, int64(3*i+2), func(tx *sqlTx) error {
				ds, err := tx.PendingFor(1, []int64{2}, 64, 2000)
				if err != nil || len(ds) != 1 {
					return fmt.Errorf("pending %+v, %v; want %s", ds, err, id)
				}
				marked, _, err = tx.MarkDeliveredRows(1, []RecipientSeq{ds[0].Row()})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(marked) != 1 || len(stmts) != 4 || strings.Contains(strings.Join(stmts, "\n"), "COUNT(") {
				t.Errorf("message %d: fetch and mark marked %v in %d statements, want 1 in 4 (no count):\n%s", i, marked, len(stmts), strings.Join(stmts, "\n"))
			}
			stmts = nil
			if err := visit(t, s, int64(3*i+3), func(tx *sqlTx) error {
				n, err := tx.AckRows(marked)
				if err == nil && n != 1 {
					err = fmt.Errorf("acknowledged %d, want 1", n)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(stmts) != 1 {
				t.Errorf("message %d: the acknowledgement took %d statements, want 1:\n%s", i, len(stmts), strings.Join(stmts, "\n"))
			}
		}
		if n := count(t, s, "SELECT acked_seq FROM inbox_cursors WHERE user_id = 2"); n != 3 {
			t.Errorf("acked_seq %d, want 3", n)
		}
	})
}
