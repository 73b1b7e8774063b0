package chaos

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// stallWatch commits a write of the harness's own, on its own connection,
// every poll: a commit that takes stallMin or longer is a time in which
// the store committed nothing for anyone (the row is the harness's alone,
// so no lock waits for it; what holds it is the server's log write). A
// ring-wide pause is the ring's only for the part of it outside such
// stalls: the store stopped answering every node's COMMIT for about a
// second in a run with no fault active (RELIABILITY.md, run AG), which
// the ring cannot shorten. Everything here runs on the watch's goroutine
// except result, which the check calls after run has returned.
type stallWatch struct {
	db    *sql.DB
	every time.Duration

	mu      sync.Mutex
	stalls  []span
	slow    []span // commits of slowMin or more, stalls included (for the report)
	commits int
	failed  int
	ready   bool // the probe's table exists
}

// stallMin is the shortest commit counted as a stall: a visit's budget
// (its COMMIT is given up after about 100 ms), so a store that takes
// longer to commit one row commits no visit meanwhile. A commit on an idle
// server takes a few milliseconds.
const stallMin = 100 * time.Millisecond

// slowMin is the shortest commit the report names (slowest).
const slowMin = 20 * time.Millisecond

func newStallWatch(db *sql.DB, every time.Duration) *stallWatch {
	return &stallWatch{db: db, every: every}
}

func (w *stallWatch) run(ctx context.Context) {
	pollEvery(ctx, w.every, func() {
		start := time.Now()
		err := w.commit(ctx)
		w.observe(start, time.Now(), err == nil)
	})
}

// commit makes the probe's table once, then commits one row change (in
// autocommit: the statement is its own transaction).
func (w *stallWatch) commit(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if !w.ready {
		if _, err := w.db.ExecContext(cctx, `CREATE TABLE IF NOT EXISTS chaos_commit_probe (
			id INT PRIMARY KEY, n BIGINT NOT NULL)`); err != nil {
			return err
		}
		w.ready = true
	}
	_, err := w.db.ExecContext(cctx, `INSERT INTO chaos_commit_probe (id, n) VALUES (1, 1)
		ON DUPLICATE KEY UPDATE n = n + 1`)
	return err
}

// observe records one commit that started at start and ended at end; a
// failed one (the database down) proves nothing, as for the fence's
// polls: the faults that take the store away are excused as repairs.
func (w *stallWatch) observe(start, end time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.commits++
	if !ok {
		w.failed++
		return
	}
	s := span{start, end}
	if s.dur() >= slowMin {
		w.slow = append(w.slow, s)
	}
	if s.dur() >= stallMin {
		w.stalls = append(w.stalls, s)
	}
}

// slowest returns the longest of the harness's commits that overlap p (0
// if none took slowMin): what the store took to commit one row then.
func (w *stallWatch) slowest(p span) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, s := range w.slow {
		if s.overlaps(p) {
			d = max(d, s.dur())
		}
	}
	return d
}

// result returns the stalls and the commit counts.
func (w *stallWatch) result() (stalls []span, commits, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]span(nil), w.stalls...), w.commits, w.failed
}

// stalled is how much of p the stalls cover.
func stalled(p span, stalls []span) time.Duration {
	var d time.Duration
	for _, s := range stalls {
		from, to := max(p.from.UnixNano(), s.from.UnixNano()), min(p.to.UnixNano(), s.to.UnixNano())
		if to > from {
			d += time.Duration(to - from)
		}
	}
	return d
}
