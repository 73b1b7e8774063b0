package store

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/migrations"
)

// TestMigrateInboxTimelines: a store of schema 10 (a recipients row per
// pending direct message) with messages waiting of both protocols (handed
// to a connection and not acknowledged, and never handed out), one
// acknowledged out of order, and rows of a group message from before group
// cursors, migrated to 11: every message still waits for its user, in
// order, and only those.
func TestMigrateInboxTimelines(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testMigrateInbox(t, "sqlite:"+filepath.Join(t.TempDir(), "old.db")) })
	t.Run("mariadb", func(t *testing.T) { testMigrateInbox(t, testutil.MySQLDSN(t)) })
}

func testMigrateInbox(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := migrate(ctx, st, 10); err != nil {
		t.Fatal(err)
	}
	s := st.(*sqlStore)
	now := time.Now().UnixMicro()
	msg := func(seq, to int64, group bool) string {
		col := "to_user_id"
		if group {
			col = "to_group_id"
		}
		return fmt.Sprintf("INSERT INTO messages (msg_seq, msg_id, sender_id, %s, content, sent_us, stored_us, node_id) "+
			"VALUES (%d, 'm%d', 1, %d, 'm%d', %d, %d, 1)", col, seq, seq, to, seq, now, now)
	}
	// Users: a (1) sends; b (2) speaks protocol 2, c (3) protocol 1, d (4)
	// has nothing waiting and e (5) left the group. The group g (1) has
	// a, b and c.
	seed(t, s, "INSERT INTO users (user_id, name, created_us) VALUES (1, 'a', 0), (2, 'b', 0), (3, 'c', 0), (4, 'd', 0), (5, 'e', 0)",
		"INSERT INTO chat_groups (group_id, name, created_us, last_seq) VALUES (1, 'g', 0, 11)",
		"INSERT INTO group_members (group_id, user_id, joined_us) VALUES (1, 1, 0), (1, 2, 0), (1, 3, 0)",
		"INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq) VALUES (1, 1, 11, 11), (1, 2, 11, 11), (1, 3, 11, 11)",
		msg(1, 2, false), msg(2, 2, false), msg(3, 2, false), msg(4, 2, false), msg(5, 2, false),
		msg(6, 3, false), msg(7, 3, false), msg(8, 4, false), msg(9, 1, true), msg(10, 3, false), msg(11, 1, true),
		// b: 1 acknowledged; 2 handed out, not acknowledged; 3 waiting;
		// 4 acknowledged out of order; 5 waiting. c: 6 handed out, 7
		// acknowledged, 10 waiting; 9, a group message of before the
		// cursors, waits for c and for e, who left since.
		fmt.Sprintf("INSERT INTO recipients (user_id, msg_seq, delivered_us) VALUES (2, 2, %d), (2, 3, NULL), (2, 5, NULL), "+
			"(3, 6, %d), (3, 10, NULL), (3, 9, NULL), (5, 9, NULL)", now, now),
		"INSERT INTO presence (user_id, node_id, since_us) VALUES (2, 1, 0), (3, 1, 0), (4, 1, 0), (5, 1, 0)")
	applied, err := migrate(ctx, st, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0].Version != 11 {
		t.Fatalf("applied %+v, want 11 alone", applied)
	}
	// c's group cursor moves back to before 9: 11 comes again (more,
	// never less).
	want := map[int64][]int64{2: {2, 3, 5}, 3: {6, 9, 10, 11}, 4: nil, 5: {9}}
	err = s.Update(ctx, func(tx Tx) error {
		ds, err := tx.PendingFor(1, []int64{2, 3, 4, 5}, 10, 100)
		if err != nil {
			return err
		}
		got := map[int64][]int64{}
		for _, d := range ds {
			got[d.RecipientID] = append(got[d.RecipientID], d.Seq)
		}
		for u, seqs := range want {
			if !slices.Equal(got[u], seqs) {
				t.Errorf("user %d: waiting %v, want %v", u, got[u], seqs)
			}
			if n, err := tx.PendingCount(u); err != nil || n != len(seqs) {
				t.Errorf("user %d: PendingCount = %d, %v; want %d", u, n, err, len(seqs))
			}
		}
		// b acknowledges 2, 3 and 5 (by id): nothing waits for b; 4
		// was acknowledged before and is not counted again.
		if n, err := tx.Ack(2, []string{"m2", "m3", "m4", "m5"}); err != nil || n != 3 {
			t.Errorf("b's acknowledgements = %d, %v; want 3", n, err)
		}
		if n, _ := tx.PendingCount(2); n != 0 {
			t.Errorf("b has %d waiting after acknowledging all", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM inbox_acks WHERE user_id = 2"); n != 0 {
		t.Errorf("%d of b's acknowledgements out of order remembered, want 0 (b's cursor passed 4)", n)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM inbox_acks WHERE user_id = 3 AND msg_seq = 7"); n != 1 {
		t.Errorf("c's acknowledgement of 7 (behind 6) remembered %d times, want 1", n)
	}
	// Back down to 10: what still waits has its rows again.
	if _, err := downTo(ctx, s, 10); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM recipients WHERE user_id = 3 AND msg_seq IN (6, 10)"); n != 2 {
		t.Errorf("after migrating down, c has %d of its 2 direct rows", n)
	}
}

// downTo migrates the store down to version.
func downTo(ctx context.Context, s *sqlStore, version int64) ([]*goose.MigrationResult, error) {
	sub, err := fs.Sub(migrations.FS, s.d.name)
	if err != nil {
		return nil, err
	}
	gd := goose.DialectSQLite3
	if s.d.name == "mysql" {
		gd = goose.DialectMySQL
	}
	p, err := goose.NewProvider(gd, s.db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, err
	}
	return p.DownTo(ctx, version)
}
