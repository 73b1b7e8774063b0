package queue

// runs on: the visit goroutine: the suspect is q.v's; poison takes the
// set-aside message out of the outbox under q.mu.

import (
	"fmt"
	"slices"
	"time"
)

// suspect is the one piece of work a failed visit did alone with an error
// about its data (store.IsDataError), since when, and how many times it
// failed so again right after the store took a probe's empty fenced
// transaction: the store working for other work in between.
type suspect struct {
	kind  string // "", "store", "fetch", "ack", "unmark"
	msgID string
	user  int64
	times int
	since time.Time
}

// poisonAfter is how many times work must fail with a data error right
// after a probe the store took, for at least Config.PoisonStreak since its
// first data error, before a further probe the store takes sets it aside.
// An outage, a broken connection, a timeout, a deadlock or a Galera
// failover is never counted (the work waits for the store), nor is a data
// error with no probe just before it.
const poisonAfter = 3

// after returns the suspect after a visit with work w failed at now; data:
// its error was about the data. An error that is the store's leaves the
// suspect as it was: it tells nothing about the work.
func (p suspect) after(w *visitWork, data bool, now time.Time) suspect {
	if !data {
		return p
	}
	next := w.single()
	switch {
	case next.kind == "":
		return suspect{}
	case !p.same(next):
		next.since = now
		return next
	case w.probed:
		p.times++
	}
	return p
}

func (p suspect) same(q suspect) bool {
	return p.kind == q.kind && p.msgID == q.msgID && p.user == q.user
}

func (p suspect) String() string {
	switch p.kind {
	case "store":
		return "message " + p.msgID
	case "fetch":
		return fmt.Sprintf("fetch for user %d", p.user)
	}
	return p.kind
}

// single is the visit's work if it was one piece alone.
func (w *visitWork) single() suspect {
	n := len(w.batch) + len(w.acks) + len(w.users)
	for _, ids := range w.ackIDs {
		n += len(ids)
	}
	for _, m := range w.unmark {
		n += len(m.rows)
	}
	if n != 1 || w.prune {
		return suspect{}
	}
	switch {
	case len(w.batch) == 1:
		return suspect{kind: "store", msgID: w.batch[0].ID}
	case len(w.users) == 1:
		return suspect{kind: "fetch", user: w.users[0]}
	case len(w.unmark) == 1:
		return suspect{kind: "unmark"}
	}
	return suspect{kind: "ack"}
}

// matches reports whether the visit's work is the suspect again.
func (p suspect) matches(w *visitWork) bool {
	return p.same(w.single())
}

func (w *visitWork) empty() bool {
	return len(w.batch) == 0 && len(w.acks) == 0 && len(w.ackIDs) == 0 && len(w.unmark) == 0 && !w.fetch && !w.prune
}

// poison sets aside the suspect, which failed alone with a data error
// while the store takes other transactions: a message is refused to its
// sender (notStored), a user's fetch
// waits poisonPause, acknowledgements are dropped (their messages come
// again), deliveries to make pending again wait for their user's next
// login. Each is logged and counted.
func (q *Queue) poison(w *visitWork) {
	p := q.v.suspect
	q.v.suspect = suspect{}
	q.stats.poisoned.Add(1)
	q.log.Error().Str("work", p.String()).Msg("chat: work failed alone with a data error while the store works; set aside")
	switch p.kind {
	case "store":
		m := w.batch[0]
		w.batch = nil
		q.mu.Lock()
		if len(q.outbox) > 0 && q.outbox[0] == m {
			q.outbox = slices.Delete(q.outbox, 0, 1)
		}
		q.mu.Unlock()
		m.From.Receipt(Receipt{Msg: m, SetAside: true})
	case "fetch":
		if q.v.setAside == nil {
			q.v.setAside = map[int64]time.Time{}
		}
		q.v.setAside[p.user] = time.Now().Add(poisonPause)
		w.fetch, w.users = false, nil
	case "ack":
		w.acks, w.ackIDs = nil, nil
	case "unmark":
		w.unmark = nil
	}
	q.v.fails = 0
}
