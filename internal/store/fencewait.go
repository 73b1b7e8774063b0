package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// The fence row's lock held by a transaction its node gave up on.
//
// Fenced transactions take the fence row's lock first, and a node passes
// the token on only once its visit has ended. So when the holder of a
// newer stamp waits for that lock, the transaction holding it is an older
// one that nobody will finish: its node's deadline passed and it closed
// the connection, but the close has not reached the server (a node losing
// packets: its FIN is lost and sent again), or its node stalled and the
// coordinator made a new token. The server ends such a transaction only
// after a second without a statement (idle_write_transaction_timeout), and
// every visit of the ring fails on the lock meanwhile (a chaos run, 20 %
// loss on one node: the next node's visit failed at its 100-ms budget,
// waiting). So the newer holder ends it: after fenceWaitKill of waiting, it
// reads the stamp the blocking transaction wrote (a dirty read: it is not
// committed) and, if its own stamp is newer, kills the blocker's
// connection. A stale holder waiting behind a newer one kills nothing (it
// is fenced out once the lock is free). Killing never costs safety: the
// killed transaction rolls back, and its work is done again by a later
// visit. MariaDB only (SQLite's lock is the file's, and its holder is this
// process); where the store's user may not read the server's transactions
// or kill their connections, it waits as before.

// fenceWaitKill is how long a fenced transaction waits for the fence
// row's lock before it looks for a blocker to end: a live visit never
// holds the lock while the next holder's UPDATE arrives (it committed
// before it passed the token), so any wait is a transaction left behind.
const fenceWaitKill = 20 * time.Millisecond

// fenceBlockers lists the connections whose transactions hold a lock on
// this database's fence row that another transaction waits for, and do
// not wait themselves (a waiter queued ahead, which may hold a newer
// stamp, is never one).
const fenceBlockers = "SELECT DISTINCT b.trx_mysql_thread_id FROM information_schema.INNODB_LOCK_WAITS w " +
	"JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id " +
	"JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.blocking_lock_id " +
	"WHERE l.lock_table = CONCAT('`', DATABASE(), '`.`token_fence`') AND b.trx_state <> 'LOCK WAIT'"

// endFenceBlockersAfter starts a look, after d, for transactions left
// behind that hold the fence row's lock while f's transaction waits for
// it. The returned stop ends the look (the caller's UPDATE returned) and
// waits for it.
func (s *sqlStore) endFenceBlockersAfter(ctx context.Context, d time.Duration, f Fence) (stop func()) {
	if !s.statementTime { // not MariaDB
		return func() {}
	}
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	t := time.AfterFunc(d, func() {
		defer wg.Done()
		s.endFenceBlockers(lctx, f)
	})
	return func() {
		cancel()
		if t.Stop() {
			wg.Done() // it never ran
		}
		wg.Wait()
	}
}

// endFenceBlockers kills the connections holding the fence row's lock for
// a transaction that wrote an older stamp than f. It reports how many it
// killed; errors (no right to read the server's transactions, or to kill)
// end the look quietly: the wait goes on as without it.
func (s *sqlStore) endFenceBlockers(ctx context.Context, f Fence) int {
	var held Fence
	var ids []int64
	err := func() error {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // read only
		if err := tx.QueryRowContext(ctx, "SELECT generation, seq FROM token_fence WHERE id = 1").Scan(&held.Generation, &held.Seq); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, fenceBlockers)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	}()
	if err != nil || !held.Less(f) {
		return 0
	}
	killed := 0
	for _, id := range ids {
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			killed++
		}
	}
	return killed
}
