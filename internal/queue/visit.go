package queue

// runs on: the visit goroutine (Visit, run by the node runtime at every
// token visit; visits of one node never overlap). A visit's work
// (visitWork) is its own; it reads and writes the queue's shared fields
// under q.mu (collect, committed, restore, poison), and q.v alone.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

// fetchShare is the percentage of a visit's budget its fetch's read of
// several users may take: the marks and the commit need the rest.
const fetchShare = 60

// aloneShare is the percentage of a visit's budget a fetch for a single
// user may take: most of it, the rest left for the commit.
const aloneShare = 80

// defaultBudget is a visit's time budget when its context has no deadline.
const defaultBudget = 100 * time.Millisecond

// shortFetch: a fetch cut at its share that had less time than this (half
// its share of a default budget) was cut for the time taken before it, not
// for its size (adaptFetch).
const shortFetch = defaultBudget * fetchShare / 100 / 2

// minBatch is the smallest adaptive batch of a visit that succeeds; after
// failures a visit shrinks below it, down to one message.
const minBatch = 8

// maxAckRows bounds the acknowledged rows removed in one visit, and
// maxAckIDs the acknowledged ids (not the session's own deliveries) looked
// up in one visit.
const (
	maxAckRows = 4000
	maxAckIDs  = 1000
)

// The messages one visit examines for pruning (a primary-key range,
// bounded whatever the history's size): the slice starts at
// pruneSliceStart and adapts as the batch does, between pruneSliceMin and
// pruneSliceMax. Deleting old history reads cold pages and updates every
// index of the messages, so its cost per message varies with the
// machine's load far more than the rest of a visit.
const (
	pruneSliceMin   = 10
	pruneSliceStart = 20
	pruneSliceMax   = 500
)

// pruneShare: a prune statement is held to budget/pruneShare (its slice
// shrinks past it, and grows only below half of it).
const pruneShare = 50

// firstPruneAfter delays a node's first prune after its start.
const firstPruneAfter = time.Minute

// poisonPause is how long work that failed alone (a user's fetch) is set
// aside before it is tried again.
const poisonPause = time.Minute

// maxUnmarkRows bounds the deliveries kept to be made pending again (see
// visitState.unmark); past it the oldest wait for their user's next login.
const maxUnmarkRows = 100_000

// storedMsg is the outcome of storing one queued message.
type storedMsg struct {
	m      *Message
	seq    int64
	sentAt time.Time // as stored: the receipt's time
	// unknown: the recipient does not exist; nothing was stored
	unknown bool
}

// visitWork is what one visit found to do, and did.
type visitWork struct {
	batch  []*Message
	acks   []store.RecipientSeq
	ackIDs map[int64][]string
	unmark []marked
	ready  map[int64]Sink
	users  []int64 // whose pending messages the fetch reads (ready ones)
	fetch  bool
	// fetchAll: the fetch reads every ready user (taking turns past
	// store.MaxPendingUsers), not only those in Queue.fetchFor.
	fetchAll bool
	prune    bool
	fetchRq  uint64
	// shrunk: a visit after failures, doing one kind of work, smaller;
	// probe: run an empty fenced transaction first, to tell a store that
	// fails from work that fails (the suspect); probed: it committed, so
	// the store works and a data error of this visit is the work's.
	shrunk bool
	probe  bool
	probed bool
	// fetchBy: the fetch of several users stops at the server then (a
	// share of the visit's budget); aloneBy: a single user's.
	fetchBy, aloneBy time.Time

	// results (reset at every attempt of the transaction)
	stored     []storedMsg
	deliveries []Delivery
	stamp      int64           // of the fetch's delivery marks
	waiting    []store.Waiting // where the stored messages wait: the token's hint
	more       bool            // the fetch of every user left some behind
	moreFor    []int64         // users the fetch gave a full share: read again next visit
	pruned     store.PruneSlice
	pruneTook  time.Duration // the prune statement's own time
	cut        bool          // the fetch stopped at its share of the budget: nothing was marked
	fetchHad   time.Duration // the time the fetch had until its share ran out (0: unbounded)
}

// visitStore is one critical section, in one fenced transaction:
//
//  1. apply acknowledgements (protocol-2 ACKs, protocol-1 writes), and make
//     pending again what earlier visits marked delivered but never handed
//     to a connection;
//  2. store the messages queued here since the last visit, in order (a
//     group message once: its members' cursors say who waits for it);
//  3. fetch what is pending and mark it delivered: for every user logged
//     in here if the token's hint names this node, the token generation is
//     new, messages were just stored for local users, the last such fetch
//     left some behind, or the safety interval passed; otherwise only for
//     the users who asked (just logged in, room again in their queue, or a
//     full share in the last fetch, so a backlog drains without reading
//     everyone else's rows each visit);
//  4. now and then prune old delivered messages.
//
// If the transaction fails, the queued messages stay for the next visit
// and no receipt is sent; the commit may still have reached the store
// (the connection broke during COMMIT), so the next visit stores the
// messages again (deduplicated by id) and makes this visit's deliveries
// pending again (unmark, by the marks' stamp). Once it committed, receipts,
// errors and deliveries go to the connections' queues (never waiting on a
// socket) and the token moves on while the writers write.
//
// A visit with none of this to do does not touch the store.
//
// h and herr are the token's hint as visit decoded it.
func (q *Queue) visitStore(ctx context.Context, tok token.Token, h hint, herr error, fenced Fenced) (json.RawMessage, bool, error) {
	q.stats.visits.Add(1)
	self := q.cfg.NodeID
	now := time.Now()
	named, byName := h.users(self)
	w := q.collect(now, tok, herr != nil || (h.has(self) && !byName), named)
	q.v.lastGen = tok.Gen
	if w.empty() && !w.probe {
		q.visitedNotify()
		if h.has(self) || herr != nil {
			return h.update(self, nil).encode(), false, nil
		}
		return tok.App, false, nil
	}
	q.stats.storeVisits.Add(1)
	start := time.Now()
	budget := defaultBudget
	if d, ok := ctx.Deadline(); ok {
		budget = d.Sub(start)
	}
	if w.probe {
		if stop, err := q.probe(w, fenced); stop {
			q.visitedNotify()
			return tok.App, false, err
		}
	}
	if _, ok := ctx.Deadline(); ok {
		w.fetchBy = start.Add(budget * fetchShare / 100)
		w.aloneBy = start.Add(budget * aloneShare / 100)
	}
	err := fenced(func(tx store.Tx) error { return q.work(tx, now, w) })
	elapsed := time.Since(start)
	if err != nil {
		q.visitFailed(ctx, w, err, elapsed, budget)
		q.visitedNotify()
		return tok.App, false, err
	}
	q.visitSucceeded(now, w, tok.Seq, elapsed)
	q.adaptBatches(w, elapsed, budget)
	q.adaptFetch(w, elapsed, budget)
	q.dispatch(w)
	q.stats.stored.Add(uint64(len(w.batch)))
	q.stats.delivered.Add(uint64(len(w.deliveries)))
	q.mu.Lock()
	again := len(q.outbox) > 0 || q.more || q.askedReady()
	q.mu.Unlock()
	if again {
		q.want()
	}
	q.visitedNotify()
	worked := len(w.batch) > 0 || len(w.deliveries) > 0
	return h.update(self, w.waiting).encode(), worked, nil
}

// probe runs an empty fenced transaction before a visit whose work is the
// suspect: it failed alone with a data error. If the store fails the probe
// too, the store is to blame: the work is put back and waits (stop, with
// err). If the store takes it, the work runs right after (probed), and a
// data error then counts against it; once it has so failed poisonAfter
// times, for at least PoisonStreak, the store taking the probe once more
// sets it aside, and the rest goes on (stop if nothing is left to do).
func (q *Queue) probe(w *visitWork, fenced Fenced) (stop bool, err error) {
	if err := fenced(func(store.Tx) error { return nil }); err != nil {
		q.stats.failedVisits.Add(1)
		q.restore(w)
		return true, err
	}
	if p := q.v.suspect; p.times < poisonAfter || time.Since(p.since) < q.cfg.PoisonStreak {
		w.probed = true
		return false, nil
	}
	q.poison(w)
	if w.empty() {
		q.v.fails = 0
		return true, nil
	}
	return false, nil
}

// visitFailed handles a visit whose transaction failed with err after elapsed
// of its budget: its work is put back and, unless a newer token fenced it
// out, the next visits do less (half the batch, a quarter of the fetch,
// the acks and the prune slice tried; the batch and the fetch not below
// minBatch unless err is about the data; one kind of work at a time, see
// shrink, until one commits, and for shrinkKeep if it ran over its
// budget within shrinkKeep of another that did), the work it did alone is
// noted as the suspect if err is about its data (suspect.after), and the
// token is asked for again.
func (q *Queue) visitFailed(ctx context.Context, w *visitWork, err error, elapsed, budget time.Duration) {
	q.stats.failedVisits.Add(1)
	q.restore(w)
	if errors.Is(err, store.ErrFenced) {
		// A newer token exists: not this work's fault.
		return
	}
	q.v.fails++
	data := store.IsDataError(err)
	// Less work, down to one message, narrows down a message the store
	// refuses. A failure that is not about the data (a timeout, a lost
	// connection) is the network's or the server's: a smaller visit costs
	// as many round trips, and below minBatch it only lets a backlog grow.
	// Seen with 5 % of a node's packets lost: visits failed every second
	// or two, each cut the fetch to one user's one delivery, and its users
	// waited over 4 s for what the ring had stored.
	floor := 1
	if !data {
		floor = minBatch
	}
	q.v.batch = less(q.v.batch, len(w.batch), 2, floor)
	if w.fetch {
		// A quarter of what was tried: the users read, or the
		// deliveries taken if more.
		q.v.fetchMax = less(q.v.fetchMax, max(len(w.users), len(w.deliveries)), 4, floor)
	}
	if w.prune {
		q.v.pruneSlice = max(pruneSliceMin, q.v.pruneSlice/4)
	}
	if len(w.acks) > 0 {
		q.v.ackMax = less(q.v.ackMax, len(w.acks), 4, 1)
	}
	now := time.Now()
	q.v.suspect = q.v.suspect.after(w, data, now)
	q.v.dataFail = q.v.dataFail || data
	over := errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) || elapsed >= budget
	if over && !data {
		// A second visit over its budget within shrinkKeep: visits were
		// too much for the link or the server, and stay light for a
		// while, taking turns at the kinds of work (shrink). One alone is
		// a hiccup (a COMMIT answered late by a busy server): visits are
		// light only until one commits. Kept light for shrinkKeep after a
		// single one, a node that lost nothing, with its lap slowed by a
		// lossy node, took a kind of work a lap and fetched nothing for
		// 2.3 s (a chaos run at 20 % loss on another node).
		if !q.v.lastOver.IsZero() && now.Sub(q.v.lastOver) <= shrinkKeep {
			q.v.shrinkUntil = now.Add(shrinkKeep)
		}
		q.v.lastOver = now
	}
	q.log.Warn().Err(err).Bool("over_budget", over).Bool("data_error", data).Int("batch", q.v.batch).Int("failed_in_a_row", q.v.fails).
		Str("suspect", q.v.suspect.String()).Int("suspect_failed", q.v.suspect.times).Dur("took_ms", elapsed).Msg("chat: visit failed; the next one does less")
	q.want()
}

// less is the next size of a kind of work after a failed visit that
// tried `tried` of it with a size of cur: what was tried (at most cur)
// divided by div, never below floor (or cur, if smaller) nor one.
func less(cur, tried, div, floor int) int {
	return max(min(floor, cur), min(cur, tried)/div, 1)
}

// visitSucceeded records a visit whose transaction committed: failures are
// over (visits stay shrunk until shrinkUntil all the same), and the
// server's state takes the visit's results (committed).
func (q *Queue) visitSucceeded(now time.Time, w *visitWork, seq int64, elapsed time.Duration) {
	if q.v.fails > 0 {
		q.log.Info().Int("failed_in_a_row", q.v.fails).Bool("shrunk", w.shrunk).Msg("chat: visits succeed again")
	}
	q.v.fails, q.v.suspect, q.v.dataFail = 0, suspect{}, false
	q.committed(now, w)
	q.log.Debug().Int("stored", len(w.batch)).Int("delivered", len(w.deliveries)).Int("acks", len(w.acks)).
		Bool("fetched", w.fetch).Int("users", len(w.users)).Int("hinted", len(w.waiting)).Dur("took_ms", elapsed).Int64("seq", seq).Msg("chat: visit")
}

// adaptBatches sizes the next visit's batch of messages, acknowledged rows
// and prune slice after one that committed in elapsed of its budget: larger
// after a quick visit, smaller after a slow one.
func (q *Queue) adaptBatches(w *visitWork, elapsed, budget time.Duration) {
	switch {
	case q.v.batch < minBatch && elapsed < budget/2:
		q.v.batch = min(minBatch, q.v.batch*2) // back from a failure
	case len(w.batch) >= q.v.batch && elapsed < budget/4:
		q.v.batch = min(q.cfg.BatchMax, q.v.batch*3/2)
	case elapsed > budget/2:
		q.v.batch = max(min(minBatch, q.v.batch), q.v.batch*3/4)
	}
	switch {
	case len(w.acks) > 0 && elapsed > budget/2:
		q.v.ackMax = max(1, q.v.ackMax*3/4)
	case elapsed < budget/4 && (len(w.acks) >= q.v.ackMax/2 || q.v.ackMax < maxAckRows/4):
		q.v.ackMax = min(maxAckRows, q.v.ackMax*3/2+1)
	}
	switch {
	// Pruning rides on visits, and every visit's time is the token's lap
	// for everyone, at every node pruning at once: its statement is held
	// to a fiftieth of the budget (2 ms of 100), so that a week of history
	// expiring adds a few milliseconds to a lap, never a visit's worth.
	case w.prune && (w.pruneTook > budget/pruneShare || elapsed > budget/5):
		q.v.pruneSlice = max(pruneSliceMin, q.v.pruneSlice*3/4)
	case w.prune && w.pruneTook < budget/(2*pruneShare) && elapsed < budget/10:
		q.v.pruneSlice = min(pruneSliceMax, q.v.pruneSlice*5/4+1)
	}
}

// adaptFetch sizes the next visit's fetch after one that committed in
// elapsed of its budget: a quarter after a fetch cut at its share of the
// budget, smaller after a slow visit, larger after a quick one.
func (q *Queue) adaptFetch(w *visitWork, elapsed, budget time.Duration) {
	defer func() {
		if !w.cut {
			q.v.cutShort = false
		}
	}()
	switch {
	case w.cut && w.fetchHad < shortFetch && !q.v.cutShort:
		// The fetch was given little time: what ran before it in the
		// visit (a wait for the fence's lock, held by the transaction of
		// a node whose visit failed on a lossy link) took the budget, not
		// the fetch's size. The size stays once; a second such cut in a
		// row shrinks it as below, so a fetch too big for a small budget
		// still shrinks. Seen at 20 % loss on one node: its successor's
		// fetch cut to one delivery by one such wait, and its users went
		// 2 s without a message while it grew back.
		q.v.cutShort = true
		q.stats.fetchesCut.Add(1)
		q.log.Debug().Int("users", len(w.users)).Int("fetch_max", q.v.fetchMax).Dur("had_ms", w.fetchHad).Dur("took_ms", elapsed).
			Msg("chat: fetch stopped at its share of a visit that left it little time; the rest committed, the size kept")
		return
	case w.cut:
		// The fetch ran over its share: a quarter of it next time (of
		// the users, or of a single user's rows).
		if len(w.users) > 1 {
			q.v.fetchMax = max(1, min(q.v.fetchMax, len(w.users))/4)
		} else {
			q.v.fetchMax = max(1, q.v.fetchMax/4)
		}
		q.stats.fetchesCut.Add(1)
		q.log.Debug().Int("users", len(w.users)).Int("fetch_max", q.v.fetchMax).Dur("took_ms", elapsed).
			Msg("chat: fetch stopped at its share of the visit; the rest committed, the next fetch reads less")
	case w.fetch && elapsed > budget/2:
		q.v.fetchMax = max(1, q.v.fetchMax*3/4)
	case w.fetch && elapsed < budget/4 && max(len(w.users), len(w.deliveries)) >= q.v.fetchMax/2:
		q.v.fetchMax = min(q.cfg.FetchLimit, q.v.fetchMax*3/2+1)
	case elapsed < budget/4 && q.v.fetchMax < q.cfg.FetchLimit/4:
		q.v.fetchMax = min(q.cfg.FetchLimit, q.v.fetchMax*2) // back from a failure
	}
}

// dispatch hands the visit's results to the sessions: receipts to the
// senders, then the deliveries.
func (q *Queue) dispatch(w *visitWork) {
	for _, r := range w.stored {
		r.m.From.Receipt(Receipt{Msg: r.m, Seq: r.seq, SentAt: r.sentAt, Unknown: r.unknown})
	}
	// A protocol-1 sender is shown its own group message, as the original
	// server did: its client has no receipt, and shows the echo as the
	// sign that the message went out. A protocol-2 sender has STORED, and
	// its cursor simply passes its own messages.
	w.deliveries = slices.DeleteFunc(w.deliveries, func(d Delivery) bool { return d.D.Own && d.To.Version() >= protocol.V2 })
	if len(w.deliveries) == 0 {
		return
	}
	lost := q.sessions.Deliver(w.deliveries)
	q.keepUnmark(w.stamp, lost) // the session is gone: pending again for its user's next session
}
