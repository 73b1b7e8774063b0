package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// BenchmarkDirectMessages runs the store's side of direct messages as a
// ring does: a visit stores a batch (perUser messages to each of 50 users,
// 20 batches a round), a visit of the users' node fetches and marks them,
// and a visit acknowledges them by row (AckRows: a protocol-1 write, or a
// protocol-2 ACK of a delivery the session has open, as the chat service
// does). It reports the time, the statements and, on MariaDB, the rows
// written (the session's Handler_write, Handler_update and Handler_delete;
// MariaDB counts internal temporary tables apart, in Handler_tmp_*; an
// INSERT IGNORE of a row present counts as a write) and the redo log
// written (the server's
// Innodb_os_log_written, which other clients of the server add to) per
// message.
func BenchmarkDirectMessages(b *testing.B) {
	for _, per := range []int{1, 5} {
		b.Run(fmt.Sprintf("mariadb/per-user=%d", per), func(b *testing.B) { benchDirect(b, testutil.MySQLDSN(b), per) })
		b.Run(fmt.Sprintf("sqlite/per-user=%d", per), func(b *testing.B) {
			benchDirect(b, "sqlite:"+filepath.Join(b.TempDir(), "bench.db"), per)
		})
	}
}

const benchUsers, benchBatches = 50, 20

func benchDirect(b *testing.B, dsn string, perUser int) {
	ctx := context.Background()
	st, err := Open(ctx, dsn, Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := Migrate(ctx, st); err != nil {
		b.Fatal(err)
	}
	s := st.(*sqlStore)
	s.db.SetMaxOpenConns(1) // one session: its status counts this benchmark's rows
	var sender int64
	users := make([]int64, benchUsers)
	err = s.Update(ctx, func(tx Tx) error {
		u, _, err := tx.EnsureUser("sender")
		sender = u.ID
		for i := range users {
			if err != nil {
				return err
			}
			if u, _, err = tx.EnsureUser(fmt.Sprintf("u%d", i)); err != nil {
				return err
			}
			users[i] = u.ID
			err = tx.SetPresence(u.ID, 1)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	var stmts int
	times := newStmtTimes()
	s.inspect = func(_ *sqlTx, q string, _ []any) { stmts++; times.start(q) }
	rows0, log0 := benchStatus(b, s)
	fence := Fence{Generation: 1, Holder: 1}
	visit := func(fn func(tx Tx) error) {
		fence.Seq++
		if err := s.Fenced(ctx, fence, func(tx Tx) error { defer times.stop(); return fn(tx) }); err != nil {
			b.Fatal(err)
		}
	}
	msgs := 0
	b.ResetTimer()
	for round := range b.N {
		for batch := range benchBatches {
			var ms []NewMessage
			var rcpts [][]int64
			for k := range perUser {
				for i, u := range users {
					ms = append(ms, NewMessage{ID: fmt.Sprintf("b%d-%d-%d-%d", round, batch, k, i), SenderID: sender, ToUserID: u,
						Content: strings.Repeat("x", 40), SentAt: time.Now(), NodeID: 1})
					rcpts = append(rcpts, []int64{u})
				}
			}
			msgs += len(ms)
			visit(func(tx Tx) error {
				_, err := storeAndHint(tx, ms, rcpts, 64)
				return err
			})
			var marked []RecipientSeq
			var ds []Delivery
			visit(func(tx Tx) error {
				var err error
				if ds, err = tx.PendingFor(1, users, 64, 2000); err != nil {
					return err
				}
				rows := make([]RecipientSeq, len(ds))
				for i, d := range ds {
					rows[i] = d.Row()
				}
				marked, _, err = tx.MarkDeliveredRows(1, rows)
				return err
			})
			if len(marked) != len(ms) {
				b.Fatalf("marked %d of %d", len(marked), len(ms))
			}
			visit(func(tx Tx) error {
				_, err := tx.AckRows(marked)
				return err
			})
		}
	}
	b.StopTimer()
	s.inspect = nil
	rows1, log1 := benchStatus(b, s)
	b.ReportMetric(float64(stmts)/float64(msgs), "stmts/msg")
	times.log(b, msgs)
	if s.d.name == "mysql" {
		b.ReportMetric(float64(rows1-rows0)/float64(msgs), "rows-written/msg")
		b.ReportMetric(float64(log1-log0)/float64(msgs), "redo-B/msg")
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(msgs), "µs/msg")
}

// benchStatus returns the session's rows written and the server's redo log
// written so far (MariaDB; zero on SQLite).
func benchStatus(b *testing.B, s *sqlStore) (rows, redo int64) {
	if s.d.name != "mysql" {
		return 0, 0
	}
	q := "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME IN " +
		"('HANDLER_WRITE', 'HANDLER_UPDATE', 'HANDLER_DELETE', 'INNODB_OS_LOG_WRITTEN')"
	r, err := s.db.QueryContext(context.Background(), q)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var name string
		var v int64
		if err := r.Scan(&name, &v); err != nil {
			b.Fatal(err)
		}
		if name == "INNODB_OS_LOG_WRITTEN" {
			redo = v
		} else {
			rows += v
		}
	}
	return rows, redo
}

// stmtTimes adds up the time of each statement a benchmark runs, as its
// client sees it: from the statement's start to the next one's, or to the
// end of the critical section (its rows read included, the commit not).
type stmtTimes struct {
	by   map[string]time.Duration
	last string
	at   time.Time
}

func newStmtTimes() *stmtTimes { return &stmtTimes{by: map[string]time.Duration{}} }

func (s *stmtTimes) start(q string) {
	s.stop()
	s.last, s.at = q[:min(len(q), 70)], time.Now()
}

func (s *stmtTimes) stop() {
	if s.last != "" {
		s.by[s.last] += time.Since(s.at)
		s.last = ""
	}
}

// log prints the statements' time per message, then each one's, the
// longest first (go test -v shows them all).
func (s *stmtTimes) log(b *testing.B, msgs int) {
	keys := slices.SortedFunc(maps.Keys(s.by), func(x, y string) int { return cmp.Compare(s.by[y], s.by[x]) })
	var total time.Duration
	for _, k := range keys {
		total += s.by[k]
	}
	b.Logf("%7.1f µs/msg  every statement (as the client sees it; commits apart)", float64(total.Nanoseconds())/1000/float64(msgs))
	for _, k := range keys {
		b.Logf("%7.1f µs/msg  %s", float64(s.by[k].Nanoseconds())/1000/float64(msgs), k)
	}
}
