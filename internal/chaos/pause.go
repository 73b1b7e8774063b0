package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// MaxPause is the target for the longest ring-wide pause outside the
// faults' repairs: no node committing a visit for longer means something
// held the token (a visit's work not bounded).
const MaxPause = 500 * time.Millisecond

// span is a time interval.
type span struct{ from, to time.Time }

func (s span) dur() time.Duration { return s.to.Sub(s.from) }

func (s span) overlaps(o span) bool { return s.from.Before(o.to) && o.from.Before(s.to) }

// pauseWatch polls the store's fence row: every committed critical
// section advances it to the token's stamp in its own transaction, and
// with the mutex probe on every visit that succeeds commits one (even a
// visit with no chat work). A fence that stays the same is a time in which
// no node committed a visit. The pause it proves is measured
// conservatively: from the end of the first poll that read a fence value
// to the start of the last poll that still read it (the value was
// committed before the one and the next was not yet committed at the
// other), so a slow poll never makes a pause look longer than it was.
type pauseWatch struct {
	st    store.Store
	every time.Duration

	mu     sync.Mutex
	cur    store.Fence
	first  time.Time // end of the first poll that read cur
	last   time.Time // start of the last poll that read cur
	have   bool
	pauses []span // pauses of at least keep
	polls  int
	failed int
}

// keep is the shortest pause remembered: shorter ones are normal hops.
const keep = 100 * time.Millisecond

func newPauseWatch(st store.Store, every time.Duration) *pauseWatch {
	return &pauseWatch{st: st, every: every}
}

func (p *pauseWatch) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		f, err := p.st.Fence(rctx)
		cancel()
		p.observe(start, time.Now(), f, err == nil)
		select {
		case <-ctx.Done():
			p.close()
			return
		case <-t.C:
		}
	}
}

// observe records one poll that started at start and ended at end; a
// failed poll (ok false) proves nothing and changes nothing.
func (p *pauseWatch) observe(start, end time.Time, f store.Fence, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	if !ok {
		p.failed++
		return
	}
	if p.have && f == p.cur {
		p.last = start
		return
	}
	p.closeLocked()
	p.cur, p.first, p.last, p.have = f, end, start, true
}

func (p *pauseWatch) closeLocked() {
	if p.have {
		if s := (span{p.first, p.last}); s.dur() >= keep {
			p.pauses = append(p.pauses, s)
		}
	}
}

// close ends the current stretch (the end of the run).
func (p *pauseWatch) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	p.have = false
}

// result returns the pauses remembered and the poll counts.
func (p *pauseWatch) result() (pauses []span, polls, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]span(nil), p.pauses...), p.polls, p.failed
}

// longestPause returns the longest of pauses that lies within window
// (clipped to it) and overlaps none of excused, and the longest overall
// within window; ok is false when there is none.
func longestPause(pauses, excused []span, window span) (unexcused, longest span, ok bool) {
	for _, p := range pauses {
		if p.from.Before(window.from) {
			p.from = window.from
		}
		if p.to.After(window.to) {
			p.to = window.to
		}
		if p.dur() <= 0 {
			continue
		}
		if p.dur() > longest.dur() {
			longest = p
		}
		free := true
		for _, e := range excused {
			if p.overlaps(e) {
				free = false
				break
			}
		}
		if free && p.dur() > unexcused.dur() {
			unexcused, ok = p, true
		}
	}
	return unexcused, longest, ok
}

// storeAftermath is how long after a database server's restart has
// settled the store may still stall: the server answers again, but its
// crash recovery's work (flushing the pages it recovered, rolling back)
// goes on, and every node's commits wait on it together. Two runs of
// TestChaos's seed on a loaded machine paused 511 and 560 ms, 0.2-0.4 s
// after the ring's repair from the second MariaDB kill -9: no node logged
// anything for the time, and the visit and the logins waiting on the
// store on every node went on within the same 20 ms.
const storeAftermath = 3 * time.Second

// repairWindows are the times the faults' repairs excuse: from each
// injection (or restore) until the ring had settled again, or until
// end when it never did; for a database server's restart, until
// storeAftermath after that.
func repairWindows(records []faultRecord, end time.Time) []span {
	var out []span
	for _, f := range records {
		if f.Kind == ClientMove { // a client's move pauses nothing ring-wide
			continue
		}
		to := f.At.Add(f.Settle)
		if f.Kind == DBRestart || f.Kind == GaleraKill {
			to = to.Add(storeAftermath)
		}
		if f.Err != "" || f.Settle <= 0 {
			to = end
		}
		out = append(out, span{f.At, to})
	}
	return out
}

// describe says where a pause lies, relative to the run's start.
func (r *runner) describe(s span) string {
	return fmt.Sprintf("%s from +%s to +%s", ms(s.dur()), r.since(s.from), r.since(s.to))
}
