package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// The store at scale: each test builds data of the size users meet (a big
// group, a long backlog, a week of history, many groups) with raw SQL, then
// runs a visit's work under a visit's budget. A visit whose work grows with
// the data overruns the budget, and the test fails.

// visitBudget is ten token visits' time budget (token.DefaultConfig's
// MaxHoldTicks at the default tick is 100 ms): the suite runs beside every
// other package on two cores. Work that grows with the data overruns it at
// these sizes; the row counts the tests check do not depend on the clock.
const visitBudget = time.Second

// scaleStores runs fn against a fresh SQLite store and a fresh MariaDB one.
func scaleStores(t *testing.T, fn func(t *testing.T, s *sqlStore)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openScale(t, "sqlite:"+filepath.Join(t.TempDir(), "scale.db"))) })
	t.Run("mariadb", func(t *testing.T) { fn(t, openScale(t, testutil.MySQLDSN(t))) })
}

func openScale(t *testing.T, dsn string) *sqlStore {
	t.Helper()
	ctx := context.Background()
	st, err := Open(ctx, dsn, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := Migrate(ctx, st); err != nil {
		t.Fatal(err)
	}
	return st.(*sqlStore)
}

// seed runs statements that build test data.
func seed(t *testing.T, s *sqlStore, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if s.d.name == "mysql" {
			q = "SET STATEMENT max_recursive_iterations=10000000 FOR " + q
		}
		if _, err := s.db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("seed %.80s: %v", q, err)
		}
	}
}

// series returns a statement prefix selecting n rows numbered 1..n as
// column i (a recursive CTE: both dialects have it).
func series(n int) string {
	return fmt.Sprintf("WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %d) ", n)
}

// series2 is series for n = k*k rows, numbered 1..n, with k recursion
// steps only (a cross join of two k-row series).
func series2(k int) string {
	return fmt.Sprintf("WITH RECURSIVE s(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM s WHERE j < %d), "+
		"seq(i) AS (SELECT a.j * %d + b.j + 1 FROM s a CROSS JOIN s b) ", k-1, k)
}

// seedUsers creates users u1..un (ids 1..n).
func seedUsers(t *testing.T, s *sqlStore, n int) {
	seed(t, s, "INSERT INTO users (user_id, name, created_us) "+series(n)+"SELECT i, CONCAT('u', i), 0 FROM seq")
}

// visit runs fn as a visit's critical section: fenced, under the budget.
func visit(t *testing.T, s *sqlStore, seq int64, fn func(tx *sqlTx) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), visitBudget)
	defer cancel()
	return s.Fenced(ctx, Fence{Generation: 1, Seq: seq, Holder: 1}, func(tx Tx) error { return fn(tx.(*sqlTx)) })
}

func count(t *testing.T, s *sqlStore, q string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A group of 5,000 members: a visit stores ten messages to it and delivers
// them to the members here, a direct message too, within the budget; the
// group's messages write one row each, not one per member.
func TestScaleLargeGroup(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		const members = 5000
		seedUsers(t, s, members+1)
		seed(t, s, "INSERT INTO chat_groups (group_id, name, created_us) VALUES (1, 'lab', 0)",
			"INSERT INTO group_members (group_id, user_id, joined_us) "+series(members)+"SELECT 1, i, 0 FROM seq",
			"INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq) "+series(members)+"SELECT 1, i, 0, 0 FROM seq",
			// 60 members online here, the rest elsewhere or offline.
			"INSERT INTO presence (user_id, node_id, since_us) "+series(60)+"SELECT i * 50, 1, 0 FROM seq",
			"INSERT INTO presence (user_id, node_id, since_us) VALUES (5001, 1, 0)")
		checkPlans(t, s)
		rowsBefore := count(t, s, "SELECT COUNT(*) FROM inbox_cursors") + count(t, s, "SELECT COUNT(*) FROM group_cursors")
		var ms []NewMessage
		var rcpts [][]int64
		for i := range 10 {
			ms = append(ms, NewMessage{ID: fmt.Sprintf("g%d", i), SenderID: 50, ToGroupID: 1, Content: "to all", SentAt: time.Now(), NodeID: 1})
			rcpts = append(rcpts, nil)
		}
		ms = append(ms, NewMessage{ID: "dm", SenderID: 2, ToUserID: members + 1, Content: "psst", SentAt: time.Now(), NodeID: 1})
		rcpts = append(rcpts, []int64{members + 1})
		var nodes []Waiting
		if err := visit(t, s, 1, func(tx *sqlTx) error {
			var err error
			nodes, err = storeAndHint(tx, ms, rcpts, 16)
			return err
		}); err != nil {
			t.Fatalf("storing to a group of %d in a visit: %v", members, err)
		}
		if after := count(t, s, "SELECT COUNT(*) FROM inbox_cursors") + count(t, s, "SELECT COUNT(*) FROM group_cursors"); after-rowsBefore != 1 {
			t.Errorf("rows written besides the messages: %d, want 1 (the inbox cursor of the direct message's recipient, new)", after-rowsBefore)
		}
		if len(nodes) != 1 || nodes[0].Node != 1 || !nodes[0].All {
			t.Errorf("nodes with pending = %+v, want every user at node 1", nodes)
		}
		users, err := s.queryPresent(1)
		if err != nil {
			t.Fatal(err)
		}
		var got []Delivery
		if err := visit(t, s, 2, func(tx *sqlTx) error {
			ds, err := tx.PendingFor(1, users, 256, 2000)
			if err != nil {
				return err
			}
			rows := make([]RecipientSeq, len(ds))
			for i, d := range ds {
				rows[i] = d.Row()
			}
			marked, _, err := tx.MarkDeliveredRows(1, rows)
			if err != nil {
				return err
			}
			if len(marked) != len(rows) {
				return fmt.Errorf("marked %d of %d", len(marked), len(rows))
			}
			got = ds
			return nil
		}); err != nil {
			t.Fatalf("delivering to the members here in a visit: %v", err)
		}
		shown, own, dm := 0, 0, 0
		for _, d := range got {
			switch {
			case d.Own:
				own++
			case d.ToUser != "":
				dm++
			default:
				shown++
			}
		}
		// 59 members here other than the sender get 10 each; the sender's
		// own 10 move its cursor; the direct message arrives.
		if shown != 59*10 || own != 10 || dm != 1 {
			t.Errorf("delivered %d group, %d own, %d direct; want 590, 10, 1", shown, own, dm)
		}
		if err := visit(t, s, 3, func(tx *sqlTx) error {
			ds, err := tx.PendingFor(1, users, 256, 2000)
			if err == nil && len(ds) != 0 {
				err = fmt.Errorf("%d delivered again", len(ds))
			}
			return err
		}); err != nil {
			t.Error(err)
		}
	})
}

// queryPresent lists the users present at a node.
func (s *sqlStore) queryPresent(node int64) ([]int64, error) {
	tx, err := s.db.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	t := &sqlTx{ctx: context.Background(), tx: tx, s: s}
	return t.queryIDs("SELECT user_id FROM presence WHERE node_id = ? ORDER BY user_id", node)
}

// A user back from a month away with 150,000 messages waiting, in a store
// of 501,264 messages on MariaDB and 302,500 on SQLite (`ringbench scale`
// measures 1,000,000; seeding that here would double the suite's time): the visit's fetch reads one batch of the backlog within the
// budget, and another user's new message comes with it.
func TestScaleBacklogAndHistory(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		k, backlog := 708, 150_000 // k*k messages
		if s.d.name == "sqlite" {
			k = 550
		}
		total := k * k
		seedUsers(t, s, 10)
		seed(t, s,
			"INSERT INTO messages (msg_seq, msg_id, sender_id, to_user_id, content, sent_us, stored_us, node_id) "+series2(k)+
				fmt.Sprintf("SELECT i, CONCAT('m', i), 1 + i %% 9, 10, 'history', i, %d + i, 1 FROM seq", time.Now().UnixMicro()),
			fmt.Sprintf("INSERT INTO inbox_cursors (user_id, acked_seq, sent_seq, back_seq) VALUES (10, %d, %d, %d)", total-backlog, total-backlog, total-backlog),
			"INSERT INTO presence (user_id, node_id, since_us) VALUES (10, 1, 0), (2, 1, 0), (3, 1, 0)")
		checkPlans(t, s)
		var seq int64
		if err := visit(t, s, 1, func(tx *sqlTx) error {
			res, err := tx.InsertMessages([]NewMessage{{ID: "new", SenderID: 3, ToUserID: 2, Content: "hi", SentAt: time.Now(), NodeID: 1}},
				[][]int64{{2}})
			seq = res[0].Seq
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var marked []RecipientSeq
		var stamp int64
		var ids []string
		var next int64 // the backlog's first message
		for i := range 3 {
			var ds []Delivery
			if err := visit(t, s, int64(2+i), func(tx *sqlTx) error {
				var err error
				// Every user (which of them have direct messages
				// waiting is asked first, with the group cursors).
				ds, err = tx.PendingFor(1, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 256, 2000)
				if err != nil {
					return err
				}
				rows := make([]RecipientSeq, len(ds))
				for i, d := range ds {
					rows[i] = d.Row()
				}
				marked, stamp, err = tx.MarkDeliveredRows(1, rows)
				return err
			}); err != nil {
				t.Fatalf("fetch %d from a %d-message backlog in a %d-message store: %v", i, backlog, total, err)
			}
			back, other := 0, 0
			for _, d := range ds {
				if d.RecipientID == 10 {
					back++
				} else if d.Seq == seq {
					other++
				}
			}
			if back != 256 || (i == 0 && other != 1) {
				t.Errorf("fetch %d: %d of the backlog (want 256), the new message %d times", i, back, other)
			}
			if i == 0 {
				for _, d := range ds[:10] {
					ids = append(ids, d.ID)
				}
				next = ds[0].Seq
			}
		}
		// The rest of a visit's statements, on the same store: ACKs by id
		// and by row (one at a time: the next in order, then one further
		// on; then many), deliveries made pending again, the hint, a prune
		// slice.
		if err := visit(t, s, 5, func(tx *sqlTx) error {
			for _, seq := range []int64{next, next + 1000} {
				if n, err := tx.AckSeqs(10, []int64{seq}); err != nil || n != 1 {
					return fmt.Errorf("AckSeqs(%d) = %d, %v; want 1", seq, n, err)
				}
			}
			if _, err := tx.Ack(10, ids); err != nil {
				return err
			}
			if _, err := tx.AckRows(marked[:100]); err != nil {
				return err
			}
			if _, err := tx.UnmarkDelivered(stamp, marked[100:]); err != nil {
				return err
			}
			if _, err := tx.WaitingFor([]int64{seq}, 16); err != nil {
				return err
			}
			_, err := tx.PruneMessages(time.Now().Add(-7*24*time.Hour), 0, pruneTestSlice)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// pruneTestSlice is the chat service's largest prune slice.
const pruneTestSlice = 500

// A week of history expiring: pruning goes in slices that each fit in a
// visit, and a message still awaited (at the head of the history) does not
// stop the slices from going on past it.
func TestScalePruneWeek(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		const n = 50_000
		old := time.Now().Add(-8 * 24 * time.Hour).UnixMicro()
		seedUsers(t, s, 3)
		seed(t, s,
			"INSERT INTO messages (msg_seq, msg_id, sender_id, to_user_id, content, sent_us, stored_us, node_id) "+series(n)+
				fmt.Sprintf("SELECT i, CONCAT('w', i), 1, CASE WHEN i IN (1, 30000) THEN 3 ELSE 2 END, 'old', %d, %d + i, 1 FROM seq", old, old),
			// 3 has not acknowledged its two, 2 has all of its.
			fmt.Sprintf("INSERT INTO inbox_cursors (user_id, acked_seq, sent_seq) VALUES (2, %d, %d), (3, 0, 0)", n, n))
		checkPlans(t, s)
		cutoff := time.Now().Add(-7 * 24 * time.Hour)
		var next int64
		deleted, slices := 0, 0
		for done := false; !done; slices++ {
			if slices > n/pruneTestSlice*2+2 {
				t.Fatalf("pruning did not finish after %d slices (at %d)", slices, next)
			}
			if err := visit(t, s, int64(slices+1), func(tx *sqlTx) error {
				res, err := tx.PruneMessages(cutoff, next, pruneTestSlice)
				if err != nil {
					return err
				}
				if res.Next-next > pruneTestSlice {
					return fmt.Errorf("a slice examined %d messages", res.Next-next)
				}
				next, done, deleted = res.Next, res.Done, deleted+res.Deleted
				return nil
			}); err != nil {
				t.Fatalf("prune slice %d: %v", slices, err)
			}
		}
		if deleted != n-2 {
			t.Errorf("pruned %d, want %d (all but the two awaited)", deleted, n-2)
		}
		if left := count(t, s, "SELECT COUNT(*) FROM messages"); left != 2 {
			t.Errorf("%d messages left, want 2", left)
		}
	})
}

// 100,000 groups: a GROUPS page reads a page, in a read-only transaction,
// within a visit's budget.
func TestScaleGroupsPage(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		seed(t, s, "INSERT INTO chat_groups (group_id, name, created_us) "+series(100_000)+"SELECT i, CONCAT('g', i), 0 FROM seq")
		ctx, cancel := context.WithTimeout(context.Background(), visitBudget)
		defer cancel()
		var page []Group
		err := s.View(ctx, func(tx Tx) error {
			var err error
			page, err = tx.ListGroups("g5", 201)
			return err
		})
		if err != nil || len(page) != 201 || !strings.HasPrefix(page[0].Name, "g5") {
			t.Fatalf("page = %d groups, %v", len(page), err)
		}
		// A read-only transaction refuses writes (MariaDB; SQLite's is a
		// deferred one, which reads without the write lock).
		err = s.View(context.Background(), func(tx Tx) error { _, _, err := tx.EnsureGroup("new"); return err })
		if err == nil && s.d.name == "mysql" {
			t.Error("a write in View succeeded")
		}
	})
}

// A statement that outlives the visit's budget is stopped at the server,
// so the fence's row lock goes with it: the next holder's visit runs
// within its own budget. (MariaDB: the driver gives up at the deadline, but
// the server would run the statement on, holding the lock.)
func TestMariaDBStatementStopsAtBudget(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	if !s.statementTime {
		t.Skip("server without max_statement_time")
	}
	err := visit(t, s, 1, func(tx *sqlTx) error {
		var v int
		return tx.queryRow("SELECT SLEEP(3)").Scan(&v)
	})
	if err == nil {
		t.Fatal("a 3-second statement finished inside a 100 ms visit")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = s.Fenced(ctx, Fence{Generation: 1, Seq: 2, Holder: 2}, func(Tx) error { return nil })
	if err != nil {
		t.Fatalf("the next visit waited for the stopped statement's lock: %v (after %v)", err, time.Since(start))
	}
	if errors.Is(err, ErrFenced) {
		t.Fatal(err)
	}
}

// A read given a share of the visit's budget (Tx.Bound) and running over
// it is stopped at the server with ErrOverBudget; the visit's writes
// before and after it commit.
func TestMariaDBBoundReadLeavesTheVisit(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	if !s.statementTime {
		t.Skip("server without max_statement_time")
	}
	err := visit(t, s, 1, func(tx *sqlTx) error {
		if _, _, err := tx.EnsureUser("before"); err != nil {
			return err
		}
		unbound := tx.Bound(time.Now().Add(20 * time.Millisecond))
		var n int
		err := tx.each("SELECT COUNT(*) FROM seq_1_to_100000 a, seq_1_to_100000 b", nil, func(r *sql.Rows) error { return r.Scan(&n) })
		unbound()
		if !errors.Is(err, ErrOverBudget) {
			t.Errorf("a read of seconds bound to 20 ms: err = %v, want ErrOverBudget", err)
		}
		_, _, err = tx.EnsureUser("after")
		return err
	})
	if err != nil {
		t.Fatalf("the visit after its bound read: %v", err)
	}
	if n := count(t, s, "SELECT COUNT(*) FROM users WHERE name IN ('before', 'after')"); n != 2 {
		t.Errorf("users committed: %d, want 2", n)
	}
}

// One member of a group back from a month away (50,000 group messages
// behind) and two members up to date, all at this node: a fetch gives the
// up-to-date members the group's new message at once, and the one away
// its oldest messages, a batch at a time. One window per group, from its
// lowest cursor, would show the others nothing until the one away caught
// up.
func TestScaleGroupMemberBackFromAway(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		const history = 50_000
		seedUsers(t, s, 5000) // members 1-4, and a lab of others
		now := time.Now().UnixMicro()
		seed(t, s,
			fmt.Sprintf("INSERT INTO chat_groups (group_id, name, created_us, last_seq) VALUES (1, 'lab', 0, %d)", history+1),
			"INSERT INTO group_members (group_id, user_id, joined_us) VALUES (1, 1, 0), (1, 2, 0), (1, 3, 0), (1, 4, 0)",
			fmt.Sprintf("INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq) VALUES (1, 1, 0, 0), (1, 2, %d, %d), (1, 3, %d, %d), (1, 4, %d, %d)",
				history, history, history, history, history+1, history+1),
			"INSERT INTO messages (msg_seq, msg_id, sender_id, to_group_id, content, sent_us, stored_us, node_id) "+series(history+1)+
				fmt.Sprintf("SELECT i, CONCAT('g', i), 4, 1, 'to all', %d + i, %d + i, 2 FROM seq", now, now),
			"INSERT INTO presence (user_id, node_id, since_us) VALUES (1, 1, 0), (2, 1, 0), (3, 1, 0)")
		checkPlans(t, s)
		var ds []Delivery
		if err := visit(t, s, 1, func(tx *sqlTx) error {
			res, err := tx.InsertMessages([]NewMessage{{ID: "next", SenderID: 2, ToGroupID: 1, Content: "hi", SentAt: time.Now(), NodeID: 1}}, [][]int64{nil})
			if err != nil {
				return err
			}
			if _, err := tx.WaitingFor([]int64{res[0].Seq}, 16); err != nil {
				return err
			}
			ds, err = tx.PendingFor(1, []int64{1, 2, 3}, 256, 2000)
			if err != nil {
				return err
			}
			rows := make([]RecipientSeq, len(ds))
			for i, d := range ds {
				rows[i] = d.Row()
			}
			marked, stamp, err := tx.MarkDeliveredRows(1, rows)
			if err != nil {
				return err
			}
			if _, err := tx.AckRows(marked[:10]); err != nil {
				return err
			}
			_, err = tx.UnmarkDelivered(stamp, marked[10:])
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ds = slices.DeleteFunc(ds, func(d Delivery) bool { return d.Seq > history+1 })
		got := map[int64][]int64{}
		for _, d := range ds {
			got[d.RecipientID] = append(got[d.RecipientID], d.Seq)
		}
		for _, u := range []int64{2, 3} {
			if !slices.Equal(got[u], []int64{history + 1}) {
				t.Errorf("member %d up to date got %v, want [%d]", u, got[u], history+1)
			}
		}
		if len(got[1]) != 256 || got[1][0] != 1 || got[1][255] != 256 {
			t.Errorf("member back from away got %d messages (%v...), want 1..256", len(got[1]), got[1][:min(3, len(got[1]))])
		}
	})
}

// A bound mark that the server stops part-way (its direct rows wait for a
// lock another transaction holds) undoes the cursor it had moved: the
// visit commits, and the group message is still pending, not skipped.
func TestMariaDBBoundMarkIsAllOrNothing(t *testing.T) {
	s := openScale(t, testutil.MySQLDSN(t))
	if !s.statementTime {
		t.Skip("server without max_statement_time")
	}
	seedUsers(t, s, 2)
	now := time.Now().UnixMicro()
	seed(t, s, "INSERT INTO chat_groups (group_id, name, created_us, last_seq) VALUES (1, 'lab', 0, 1)",
		"INSERT INTO group_members (group_id, user_id, joined_us) VALUES (1, 1, 0), (1, 2, 0)",
		"INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq) VALUES (1, 1, 0, 0), (1, 2, 1, 1)",
		fmt.Sprintf("INSERT INTO messages (msg_seq, msg_id, sender_id, to_group_id, content, sent_us, stored_us, node_id) VALUES (1, 'g1', 2, 1, 'to all', %d, %d, 1)", now, now),
		fmt.Sprintf("INSERT INTO messages (msg_seq, msg_id, sender_id, to_user_id, content, sent_us, stored_us, node_id) VALUES (2, 'd2', 2, 1, 'to one', %d, %d, 1)", now, now),
		"INSERT INTO inbox_cursors (user_id) VALUES (1)",
		"INSERT INTO presence (user_id, node_id, since_us) VALUES (1, 1, 0)")
	ctx := context.Background()
	locker, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	if _, err := locker.ExecContext(ctx, "SELECT * FROM inbox_cursors WHERE user_id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	err = visit(t, s, 1, func(tx *sqlTx) error {
		defer tx.Bound(time.Now().Add(30 * time.Millisecond))()
		_, _, err := tx.MarkDeliveredRows(1, []RecipientSeq{{RecipientID: 1, Seq: 1, GroupID: 1}, {RecipientID: 1, Seq: 2}})
		if !errors.Is(err, ErrOverBudget) {
			t.Errorf("a mark waiting on a lock, bound to 30 ms: err = %v, want ErrOverBudget", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the visit after its stopped mark: %v", err)
	}
	if n := count(t, s, "SELECT sent_seq FROM group_cursors WHERE group_id = 1 AND user_id = 1"); n != 0 {
		t.Errorf("cursor of the member after a stopped mark: sent %d, want 0 (still pending)", n)
	}
	if n := count(t, s, "SELECT sent_seq FROM inbox_cursors WHERE user_id = 1"); n != 0 {
		t.Errorf("inbox cursor after a stopped mark: sent %d, want 0 (the direct message still pending)", n)
	}
}
