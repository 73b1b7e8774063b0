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
// waiting). So the newer holder ends it: after fenceWaitKill of waiting,
// and every fenceWaitKill after, it reads the fence row uncommitted (a
// dirty read, on another connection): the stamp the blocking transaction
// wrote and its connection's id, which every writer of the row records
// (holder_conn). If that stamp is older than its own, and the row read
// committed differs (someone holds an uncommitted write of it: the wait
// is not just a slow round trip), it kills that connection. A
// stale holder waiting behind a newer one kills nothing (it is fenced out
// once the lock is free). Killing never costs safety: the killed
// transaction rolls back, and its work is done again by a later visit.
// MariaDB only (SQLite's lock is the file's, and its holder is this
// process); where the store's user may not kill the holder's connection
// (another user without CONNECTION ADMIN), it waits as before.
//
// information_schema's lock tables would name the blocker too, but InnoDB
// refreshes them only once nobody has read them for 100 ms: a waiter
// looking every 20 ms (or two waiters of other rings on the server) would
// read the same stale snapshot until its wait timed out.

// fenceWaitKill is how long a fenced transaction waits for the fence
// row's lock before it looks for a blocker to end: a live visit never
// holds the lock while the next holder's UPDATE arrives (it committed
// before it passed the token), so any wait is a transaction left behind.
const fenceWaitKill = 20 * time.Millisecond

// endFenceBlockersAfter looks, every d from d on, for transactions left
// behind that hold the fence row's lock while f's transaction waits for
// it (the wait may reach the server after the first look). The returned
// stop ends the looks (the caller's UPDATE returned) and waits for them.
func (s *sqlStore) endFenceBlockersAfter(ctx context.Context, d time.Duration, f Fence) (stop func()) {
	if !s.statementTime { // not MariaDB
		return func() {}
	}
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var t *time.Timer
	var look func()
	look = func() {
		defer wg.Done()
		s.endFenceBlockers(lctx, f)
		mu.Lock()
		defer mu.Unlock()
		if lctx.Err() == nil {
			wg.Add(1)
			t = time.AfterFunc(d, look)
		}
	}
	wg.Add(1)
	t = time.AfterFunc(d, look)
	return func() {
		cancel()
		mu.Lock()
		if t.Stop() {
			wg.Done() // that look never ran
		}
		mu.Unlock()
		wg.Wait()
	}
}

// endFenceBlockers kills the connection of the transaction holding the
// fence row's lock, read uncommitted from the row with the stamp it wrote
// (holder_conn, migration 13), if that stamp is older than f. The row is
// read again committed: the same row (stamp, connection and the write's
// time, changed_us) means nobody holds an uncommitted write of it (the
// wait is only slow: a distant server, or a holder that has just
// committed), and nobody is killed. It reports whether it killed
// one; errors (no right to kill that connection: another database user)
// end the look quietly, and the wait goes on as without it.
func (s *sqlStore) endFenceBlockers(ctx context.Context, f Fence) bool {
	dirty, err := s.fenceRow(ctx, sql.LevelReadUncommitted)
	if err != nil || dirty.conn == 0 || !dirty.Less(f) {
		return false
	}
	committed, err := s.fenceRow(ctx, sql.LevelReadCommitted)
	if err != nil || committed == dirty {
		return false
	}
	_, err = s.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", dirty.conn))
	return err == nil
}

// fenceWriter is the fence row as a look reads it: the stamp, the
// connection of its last writer, and when it wrote. The time tells two
// writes of one stamp on one connection apart: a visit runs a fenced
// transaction per section, and the last one left behind wrote the stamp
// its first one committed, on the same connection as often as not.
type fenceWriter struct {
	Fence
	conn      int64
	changedUS int64
}

// fenceRow reads the fence row at isolation level lvl, in a transaction
// of its own on another connection than the waiting one.
func (s *sqlStore) fenceRow(ctx context.Context, lvl sql.IsolationLevel) (fenceWriter, error) {
	var w fenceWriter
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: lvl, ReadOnly: true})
	if err != nil {
		return w, err
	}
	defer s.rollback(ctx, tx) // read only; on a lossy link its answer is not waited for
	err = tx.QueryRowContext(ctx, "SELECT generation, seq, holder, holder_conn, changed_us FROM token_fence WHERE id = 1").
		Scan(&w.Generation, &w.Seq, &w.Holder, &w.conn, &w.changedUS)
	return w, err
}
