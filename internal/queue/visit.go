package queue

// runs on: the visit goroutine (Visit, run by the node runtime at every
// token visit; visits of one node never overlap). A visit's work
// (visitWork) is its own; it reads and writes the queue's shared fields
// under q.mu (collect, committed, restore, poison), and q.v alone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
// out, the next visits do less (a quarter of each kind of work tried), the
// work it did alone is noted as the suspect if err is about its data
// (suspect.after), and the token is asked for again.
func (q *Queue) visitFailed(ctx context.Context, w *visitWork, err error, elapsed, budget time.Duration) {
	q.stats.failedVisits.Add(1)
	q.restore(w)
	if errors.Is(err, store.ErrFenced) {
		// A newer token exists: not this work's fault.
		return
	}
	q.v.fails++
	q.v.batch = max(1, min(q.v.batch, len(w.batch))/2)
	if w.fetch {
		// A quarter of what was tried: the users read, or the
		// deliveries taken if more.
		q.v.fetchMax = max(1, min(q.v.fetchMax, max(len(w.users), len(w.deliveries)))/4)
	}
	if w.prune {
		q.v.pruneSlice = max(pruneSliceMin, q.v.pruneSlice/4)
	}
	if len(w.acks) > 0 {
		q.v.ackMax = max(1, min(q.v.ackMax, len(w.acks))/4)
	}
	data := store.IsDataError(err)
	q.v.suspect = q.v.suspect.after(w, data, time.Now())
	over := errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) || elapsed >= budget
	q.log.Warn().Err(err).Bool("over_budget", over).Bool("data_error", data).Int("batch", q.v.batch).Int("failed_in_a_row", q.v.fails).
		Str("suspect", q.v.suspect.String()).Int("suspect_failed", q.v.suspect.times).Dur("took_ms", elapsed).Msg("queue: visit failed; the next one does less")
	q.want()
}

// visitSucceeded records a visit whose transaction committed: failures are
// over, and the server's state takes the visit's results (committed).
func (q *Queue) visitSucceeded(now time.Time, w *visitWork, seq int64, elapsed time.Duration) {
	if q.v.fails > 0 {
		q.log.Info().Int("failed_in_a_row", q.v.fails).Msg("queue: visits succeed again")
	}
	q.v.fails, q.v.suspect = 0, suspect{}
	q.committed(now, w)
	q.log.Debug().Int("stored", len(w.batch)).Int("delivered", len(w.deliveries)).Int("acks", len(w.acks)).
		Bool("fetched", w.fetch).Int("users", len(w.users)).Int("hinted", len(w.waiting)).Dur("took_ms", elapsed).Int64("seq", seq).Msg("queue: visit")
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
	switch {
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
			Msg("queue: fetch stopped at its share of the visit; the rest committed, the next fetch reads less")
	case w.fetch && elapsed > budget/2:
		q.v.fetchMax = max(1, q.v.fetchMax*3/4)
	case w.fetch && elapsed < budget/4 && max(len(w.users), len(w.deliveries)) >= q.v.fetchMax/2:
		q.v.fetchMax = min(q.cfg.FetchLimit, q.v.fetchMax*3/2+1)
	case elapsed < budget/4 && q.v.fetchMax < q.cfg.FetchLimit/4:
		q.v.fetchMax = min(q.cfg.FetchLimit, q.v.fetchMax*2) // back from a failure
	}
}

// collect takes what this visit has to do from the server's state. hinted:
// the token's hint asks for every user's fetch here; named: the users it
// names here instead.
func (q *Queue) collect(now time.Time, tok token.Token, hinted bool, named []int64) *visitWork {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.askLocked(named)
	w := &visitWork{fetchRq: q.fetchReq, unmark: q.v.unmark}
	q.v.unmark = nil
	q.collectReady(now, w)
	q.collectFetch(now, tok, hinted, w)
	n := min(len(q.outbox), q.v.batch)
	w.batch = slices.Clone(q.outbox[:n])
	q.collectAcks(w)
	w.prune = q.cfg.Retention > 0 && (q.v.pruneNext > 0 || now.Sub(q.v.lastPrune) >= q.cfg.PruneInterval) &&
		(len(w.batch) > 0 || w.fetch || len(w.acks) > 0 || len(w.ackIDs) > 0 || len(w.unmark) > 0 || q.v.pruneNext > 0)
	if q.v.fails > 0 {
		q.shrink(w)
	}
	return w
}

// collectReady puts the ready sessions in w.ready, but those of users
// whose fetch is set aside (until their pause is over). Caller holds q.mu.
func (q *Queue) collectReady(now time.Time, w *visitWork) {
	w.ready = q.sessions.Ready()
	for id, until := range q.v.setAside {
		if now.After(until) {
			delete(q.v.setAside, id)
			continue
		}
		delete(w.ready, id)
	}
}

// collectFetch picks the users whose pending messages the visit reads:
// every ready user (taking turns) or only those who asked. Caller holds
// q.mu.
func (q *Queue) collectFetch(now time.Time, tok token.Token, hinted bool, w *visitWork) {
	// Every user's messages are read after a hint (messages were stored for
	// users here), a new token generation, a fetch that left some behind,
	// or the safety interval; otherwise only those of users who asked.
	w.fetchAll = len(w.ready) > 0 && (hinted || tok.Gen != q.v.lastGen || q.fetchReq != q.v.fetchDone || q.more ||
		now.Sub(q.v.lastFetch) >= q.cfg.SafetyFetch)
	for id := range q.fetchFor {
		if sess, _ := q.sessions.Session(id); sess == nil {
			delete(q.fetchFor, id) // gone: its next login asks again
		}
	}
	if w.fetchAll {
		w.users = q.fetchUsers(w.ready)
	} else {
		w.users = q.askedUsers(w.ready)
	}
	w.fetch = len(w.users) > 0 // it may also turn on in the visit (messages stored for users here)
}

// collectAcks takes the visit's acknowledgements: up to ackMax rows and,
// fewer after failures, up to maxAckIDs ids to look up. Caller holds q.mu.
func (q *Queue) collectAcks(w *visitWork) {
	ackRows, ackIDs := q.v.ackMax, maxAckIDs
	if q.v.fails > 0 {
		ackIDs = max(1, maxAckIDs>>(2*q.v.fails))
	}
	k := min(len(q.acks), ackRows)
	w.acks = slices.Clone(q.acks[:k])
	q.acks = slices.Delete(q.acks, 0, k)
	w.ackIDs = q.takeAckIDs(ackIDs)
}

// takeAckIDs takes up to n acknowledged ids for this visit (caller holds
// q.mu).
func (q *Queue) takeAckIDs(n int) map[int64][]string {
	if q.ackCount == 0 {
		return nil
	}
	out := map[int64][]string{}
	for uid, ids := range q.ackIDs {
		k := min(len(ids), n)
		out[uid] = ids[:k:k]
		if k == len(ids) {
			delete(q.ackIDs, uid)
		} else {
			q.ackIDs[uid] = ids[k:]
		}
		q.ackCount -= k
		if n -= k; n == 0 {
			break
		}
	}
	return out
}

// fetchUsers picks the users whose pending messages this visit reads: all
// the ready ones, at most fetchUserLimit, taking turns beyond that.
func (q *Queue) fetchUsers(ready map[int64]Sink) []int64 {
	users := slices.Sorted(maps.Keys(ready))
	limit := q.fetchUserLimit(len(users))
	if len(users) <= limit {
		return users
	}
	start := q.v.fetchTurn % len(users)
	q.v.fetchTurn += limit
	out := append(slices.Clone(users[start:]), users[:start]...)
	return out[:limit]
}

// fetchUserLimit is how many of n users one fetch reads: at most
// store.MaxPendingUsers and the fetch's current size.
func (q *Queue) fetchUserLimit(n int) int {
	return min(n, store.MaxPendingUsers, q.v.fetchMax)
}

// askedReady reports whether a user in fetchFor can be fetched now (ready,
// not set aside; caller holds q.mu, on the visit goroutine).
func (q *Queue) askedReady() bool {
	for id := range q.fetchFor {
		if _, ready := q.sessions.Session(id); ready {
			if _, aside := q.v.setAside[id]; !aside {
				return true
			}
		}
	}
	return false
}

// askedUsers picks the ready users in fetchFor, lowest ids first, as many
// as one fetch reads (the rest stay asked; caller holds q.mu).
func (q *Queue) askedUsers(ready map[int64]Sink) []int64 {
	var users []int64
	for id := range q.fetchFor {
		if ready[id] != nil {
			users = append(users, id)
		}
	}
	slices.Sort(users)
	return users[:q.fetchUserLimit(len(users))]
}

// shrink keeps one kind of work of a visit after failures (the first there
// is of: deliveries to make pending again, messages to store,
// acknowledgements, the fetch), already made smaller by collect, and
// gives the rest back. If the last visit failed with one piece of work
// alone, this one probes the store first.
func (q *Queue) shrink(w *visitWork) {
	w.shrunk, w.prune = true, false
	keep := func(kind string) {
		if kind != "unmark" && len(w.unmark) > 0 {
			q.v.unmark, w.unmark = append(w.unmark, q.v.unmark...), nil
		}
		if kind != "store" {
			w.batch = nil
		}
		if kind != "ack" && (len(w.acks) > 0 || len(w.ackIDs) > 0) {
			q.giveBackAcks(w)
		}
		if kind != "fetch" {
			if w.fetch && w.fetchAll {
				q.more = true // the fetch comes after this visit (caller holds q.mu); asked users stay asked
			}
			w.fetch, w.users = false, nil
		}
	}
	switch {
	case len(w.unmark) > 0:
		w.unmark = w.unmark[:1]
		if n := len(w.unmark[0].rows); n > 1 {
			half := n >> min(q.v.fails, 16)
			head := marked{stamp: w.unmark[0].stamp, rows: w.unmark[0].rows[:max(1, half)]}
			q.v.unmark = append([]marked{{stamp: head.stamp, rows: w.unmark[0].rows[len(head.rows):]}}, q.v.unmark...)
			w.unmark = []marked{head}
		}
		keep("unmark")
	case len(w.batch) > 0:
		keep("store")
	case len(w.acks) > 0 || len(w.ackIDs) > 0:
		keep("ack")
	default:
		keep("fetch")
	}
	w.probe = q.v.suspect.kind != "" && q.v.suspect.matches(w)
}

// giveBackAcks puts the visit's acknowledgements back (caller holds q.mu).
func (q *Queue) giveBackAcks(w *visitWork) {
	q.acks = append(w.acks, q.acks...)
	for uid, ids := range w.ackIDs {
		q.ackIDs[uid] = append(ids, q.ackIDs[uid]...)
		q.ackCount += len(ids)
	}
	w.acks, w.ackIDs = nil, nil
}

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
	q.log.Error().Str("work", p.String()).Msg("queue: work failed alone with a data error while the store works; set aside")
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

// work is the transaction's body. The store may run it again after a
// deadlock, so it starts from scratch each time.
func (q *Queue) work(tx store.Tx, now time.Time, w *visitWork) error {
	w.stored, w.deliveries, w.waiting, w.more, w.moreFor, w.stamp, w.cut, w.pruneTook = w.stored[:0], w.deliveries[:0], nil, false, nil, 0, false, 0
	if err := q.unmarkRows(tx, w); err != nil {
		return err
	}
	if err := applyAcks(tx, w); err != nil {
		return err
	}
	if err := q.storeAndHint(tx, w); err != nil {
		return err
	}
	if len(w.ready) > 0 && !w.shrunk {
		q.fetchOwn(w)
	}
	if w.fetch {
		if err := q.fetch(tx, w); errors.Is(err, store.ErrOverBudget) && (len(w.users) > 1 || q.v.fetchMax > 1) {
			// The fetch stopped at its share of the budget, having
			// changed nothing: what was stored and acknowledged commits,
			// and the same users are read again, fewer at once. A single
			// row of a single user that does not fit fails the visit (it
			// is tried again; a timeout never sets work aside).
			w.cut, w.deliveries, w.more, w.moreFor = true, w.deliveries[:0], false, nil
		} else if err != nil {
			return err
		}
	}
	if w.prune {
		began := time.Now()
		res, err := tx.PruneMessages(now.Add(-q.cfg.Retention), q.v.pruneNext, q.v.pruneSlice)
		w.pruneTook = time.Since(began)
		if err != nil {
			return err
		}
		w.pruned = res
	}
	return nil
}

// applyAcks removes the visit's acknowledged rows, then looks up and
// removes its acknowledged ids, user by user, in chunks of store.MaxAckIDs.
func applyAcks(tx store.Tx, w *visitWork) error {
	if len(w.acks) > 0 {
		if _, err := tx.AckRows(w.acks); err != nil {
			return err
		}
	}
	for uid, ids := range w.ackIDs {
		for chunk := range slices.Chunk(ids, store.MaxAckIDs) {
			if _, err := tx.Ack(uid, chunk); err != nil {
				return err
			}
		}
	}
	return nil
}

// storeAndHint stores the visit's batch (storeBatch) and adds to the
// visit's hint where the stored messages wait, and, for a protocol-1
// sender of a group message, its own node (it is shown the message too,
// in this visit).
func (q *Queue) storeAndHint(tx store.Tx, w *visitWork) error {
	seqs, err := q.storeBatch(tx, w)
	if err != nil {
		return err
	}
	if len(seqs) > 0 {
		waiting, err := tx.WaitingFor(seqs, hintUsersPerNode)
		if err != nil {
			return err
		}
		w.waiting = append(w.waiting, waiting...)
	}
	for _, r := range w.stored {
		if !r.unknown && r.m.To.Group && r.m.Version < protocol.V2 {
			// Its protocol-1 sender is shown it too, in this visit.
			w.waiting = append(w.waiting, store.Waiting{Node: q.cfg.NodeID, Users: []int64{r.m.SenderID}})
		}
	}
	return nil
}

// storeBatch stores the visit's batch in order (a group message once,
// whatever the group's size), and returns the sequence numbers whose
// recipients may have work: the new messages', and the resent ones'. An
// unknown recipient (checked when the message was accepted, so only if it
// vanished) is a refusal, and nothing of that message is stored. A resent
// id is stored once: its first sequence comes back. Its recipients may not
// have it yet: the visit that stored it may have failed after its commit
// reached the store, and its hint never went round.
func (q *Queue) storeBatch(tx store.Tx, w *visitWork) (seqs []int64, err error) {
	nms := make([]store.NewMessage, 0, len(w.batch))
	rcpts := make([][]int64, 0, len(w.batch))
	var at []int // index in w.stored of each of nms
	for _, m := range w.batch {
		id, found, err := q.cfg.Lookup(tx, m.To)
		if err != nil {
			return nil, err
		}
		w.stored = append(w.stored, storedMsg{m: m, unknown: !found})
		if !found {
			continue
		}
		nm := store.NewMessage{ID: m.ID, SenderID: m.SenderID, Content: m.Content, SentAt: m.SentAt, NodeID: q.cfg.NodeID}
		// A group message is stored once: its members' cursors on the
		// group say who still waits for it.
		var rs []int64
		if m.To.Group {
			nm.ToGroupID = id
		} else {
			nm.ToUserID = id
			rs = []int64{id}
		}
		nms, rcpts, at = append(nms, nm), append(rcpts, rs), append(at, len(w.stored)-1)
	}
	if len(nms) == 0 {
		return nil, nil
	}
	res, err := tx.InsertMessages(nms, rcpts)
	if err != nil {
		return nil, err
	}
	for k, r := range res {
		w.stored[at[k]].seq, w.stored[at[k]].sentAt = r.Seq, r.SentAt
		seqs = append(seqs, r.Seq)
	}
	return seqs, nil
}

// fetchOwn makes the visit fetch for the users here that its stored
// messages (or deliveries made pending again) wait for: every user, or
// those named.
func (q *Queue) fetchOwn(w *visitWork) {
	for _, wt := range w.waiting {
		if wt.Node != q.cfg.NodeID {
			continue
		}
		switch {
		case w.fetchAll:
		case wt.All:
			w.fetchAll, w.users = true, q.fetchUsers(w.ready)
		default:
			for _, id := range wt.Users {
				if w.ready[id] != nil && !slices.Contains(w.users, id) {
					w.users = append(w.users, id)
				}
			}
		}
		w.fetch = len(w.users) > 0
	}
}

// fetch takes the pending deliveries for local users, as many as their
// queues take, and marks them delivered.
func (q *Queue) fetch(tx store.Tx, w *visitWork) error {
	// What the statements read is bounded by the fetch's size: each
	// user's share is the size over the users, at most FetchPerClient.
	limit := q.v.fetchMax
	perUser := min(q.cfg.FetchPerClient, max(1, limit/max(1, len(w.users))))
	if !w.fetchBy.IsZero() {
		// The fetch (its read and its marks) may run over its share and be
		// dropped (ErrOverBudget); a single user's share is most of the
		// visit (see work for when its cut fails the visit).
		by := w.fetchBy
		if len(w.users) == 1 {
			by = w.aloneBy
		}
		defer tx.Bound(by)()
	}
	ds, err := tx.PendingFor(q.cfg.NodeID, w.users, perUser, limit)
	if err != nil {
		return err
	}
	// Past the limit some users may have had nothing read: after a fetch
	// of every user, every user is read again; after one of the users who
	// asked, those users.
	cut := len(ds) >= limit
	w.more = w.fetchAll && (cut || len(w.users) < len(w.ready))
	w.take(ds, perUser)
	if len(w.deliveries) == 0 {
		// Only full queues held them back (their writers ask again), unless
		// this was one slice of every user's fetch: the next slice follows.
		w.more = w.fetchAll && len(w.users) < len(w.ready)
		return nil
	}
	if cut && !w.fetchAll {
		w.moreFor = append(w.moreFor, w.users...)
	}
	return q.markDelivered(tx, w)
}

// take adds to the visit's deliveries those of ds (read for the visit's
// users, at most perUser each) their sessions' queues have room for: for
// each user, a prefix of its rows. A user given a full share goes to
// moreFor; one whose queue is full is starved (its writer asks for a fetch
// when it has room).
func (w *visitWork) take(ds []store.Delivery, perUser int) {
	taken := map[int64]int{}  // shown, against the queue's room
	shares := map[int64]int{} // handed, own group messages too
	full := map[int64]bool{}
	for _, d := range ds {
		to := w.ready[d.RecipientID]
		if to == nil || full[d.RecipientID] {
			continue // logging in or out: it stays pending
		}
		shown := !d.Own || to.Version() < protocol.V2 // a protocol-1 sender is shown its own group message
		n := taken[d.RecipientID]
		if shown && n >= to.Room() {
			to.Starve()                // its writer asks for a fetch when it has room
			full[d.RecipientID] = true // what is taken is a prefix: a cursor cannot skip
			continue
		}
		if shown {
			taken[d.RecipientID] = n + 1
		}
		w.deliveries = append(w.deliveries, Delivery{To: to, D: d})
		if shares[d.RecipientID]++; shares[d.RecipientID] == perUser {
			w.moreFor = append(w.moreFor, d.RecipientID) // it may have more
		}
	}
}

// markDelivered marks the visit's deliveries delivered, and keeps only
// those the store marked: rows whose user is still present here (a session
// that ended after the fetch's read is not handed any).
func (q *Queue) markDelivered(tx store.Tx, w *visitWork) error {
	done, stamp, err := tx.MarkDeliveredRows(q.cfg.NodeID, deliveryRows(w.deliveries))
	if err != nil {
		return err
	}
	w.stamp = stamp
	if len(done) < len(w.deliveries) {
		ok := make(map[store.RecipientSeq]bool, len(done))
		for _, r := range done {
			ok[r] = true
		}
		w.deliveries = slices.DeleteFunc(w.deliveries, func(d Delivery) bool { return !ok[d.D.Row()] })
	}
	return nil
}

// unmarkRows makes pending again what earlier visits marked delivered and
// never handed to a connection, and adds the nodes where those users are
// now to the visit's hint.
func (q *Queue) unmarkRows(tx store.Tx, w *visitWork) error {
	var n int
	var seqs []int64
	for _, m := range w.unmark {
		k, err := tx.UnmarkDelivered(m.stamp, m.rows)
		if err != nil {
			return err
		}
		n += k
		for _, r := range m.rows {
			seqs = append(seqs, r.Seq)
		}
	}
	if n == 0 {
		return nil
	}
	waiting, err := tx.WaitingFor(seqs, hintUsersPerNode)
	if err != nil {
		return err
	}
	w.waiting = append(w.waiting, waiting...)
	return nil
}

// keepUnmark records rows marked delivered at stamp that no connection got,
// for the next visit to make pending again.
func (q *Queue) keepUnmark(stamp int64, rows []store.RecipientSeq) {
	if len(rows) == 0 || stamp == 0 { // stamp 0: nothing was marked
		return
	}
	q.v.unmark = append(q.v.unmark, marked{stamp: stamp, rows: rows})
	total := 0
	for _, m := range q.v.unmark {
		total += len(m.rows)
	}
	for ; total > maxUnmarkRows && len(q.v.unmark) > 1; q.v.unmark = q.v.unmark[1:] {
		total -= len(q.v.unmark[0].rows)
		q.log.Warn().Int("rows", len(q.v.unmark[0].rows)).Msg("queue: too many deliveries to make pending again; these wait for their users' next login")
	}
	q.want()
}

// deliveryRows returns the store rows of ds.
func deliveryRows(ds []Delivery) []store.RecipientSeq {
	rows := make([]store.RecipientSeq, len(ds))
	for i, d := range ds {
		rows[i] = d.D.Row()
	}
	return rows
}

// restore puts back what a failed visit took. Its commit may have reached
// the store all the same: acknowledgements and stores are safe to do again,
// and its deliveries' marks are undone by the next visit.
func (q *Queue) restore(w *visitWork) {
	for _, m := range w.unmark {
		q.keepUnmark(m.stamp, m.rows)
	}
	q.keepUnmark(w.stamp, deliveryRows(w.deliveries))
	q.mu.Lock()
	defer q.mu.Unlock()
	q.giveBackAcks(w)
	// The batch was never removed from the outbox.
}

// askForWaiting has the next fetch read what a visit without a fetch
// made wait for users here (stored, or made pending again): the users the
// hint names, asked as if by themselves (read once their queues take
// more), or every user here if it could not name them. Caller holds q.mu.
func (q *Queue) askForWaiting(waiting []store.Waiting) {
	for _, wt := range waiting {
		switch {
		case wt.Node != q.cfg.NodeID:
		case wt.All:
			q.more = true
		default:
			q.askLocked(wt.Users)
		}
	}
}

// askLocked asks the next fetch for those of users logged in here, as if
// they had asked themselves: they are served with the others who asked.
// Caller holds q.mu.
func (q *Queue) askLocked(users []int64) {
	for _, id := range users {
		if sess, _ := q.sessions.Session(id); sess != nil {
			q.fetchFor[id] = true
		}
	}
}

// committed updates the server's state after the visit's commit.
func (q *Queue) committed(now time.Time, w *visitWork) {
	q.mu.Lock()
	defer q.mu.Unlock()
	clear(q.outbox[:len(w.batch)])
	q.outbox = q.outbox[len(w.batch):]
	if len(q.outbox) == 0 {
		q.outbox = nil // let the backing array go
	}
	switch {
	case w.cut:
		// Nothing was read: the same users again.
		if w.fetchAll {
			q.more = true
		} else {
			for _, id := range w.users {
				q.fetchFor[id] = true
			}
		}
	case w.fetch:
		if w.fetchAll {
			q.v.lastFetch, q.v.fetchDone = now, w.fetchRq
		}
		q.more = w.more
		for _, id := range w.users {
			delete(q.fetchFor, id)
		}
		for _, id := range w.moreFor {
			q.fetchFor[id] = true
		}
	default:
		q.askForWaiting(w.waiting)
	}
	if w.prune {
		q.v.pruneNext = w.pruned.Next
		if w.pruned.Done {
			q.v.lastPrune, q.v.pruneNext = now, 0
		}
		q.stats.pruned.Add(uint64(w.pruned.Deleted))
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
