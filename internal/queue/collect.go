package queue

// runs on: the visit goroutine. collect takes a visit's work from the
// queue's shared fields under q.mu (and asks the session table which
// sessions are ready, with q.mu held); shrink and giveBackAcks too.

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

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
	if q.shrinking(now) {
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

// askedUsers picks the ready users in fetchFor, as many as one fetch
// reads (the rest stay asked; caller holds q.mu): first those known to
// have deliveries waiting, then at most loginFetchUsers of those asked by
// their login alone, each kind in the order asked.
func (q *Queue) askedUsers(ready map[int64]Sink) []int64 {
	var users []int64
	for id := range q.fetchFor {
		if ready[id] != nil {
			users = append(users, id)
		}
	}
	slices.SortFunc(users, func(a, b int64) int {
		x, y := q.fetchFor[a], q.fetchFor[b]
		if x.login != y.login {
			if y.login {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.seq, y.seq)
	})
	users = users[:q.fetchUserLimit(len(users))]
	logins := 0
	for i, id := range users {
		if q.fetchFor[id].login {
			if logins++; logins > loginFetchUsers {
				return users[:i]
			}
		}
	}
	return users
}

// loginFetchUsers bounds the users one fetch reads only because they have
// just logged in here. Such a fetch usually finds nothing, but reading a
// user's timelines costs the same: when a thousand members log in within
// two seconds, visits that read every user who logged in since the last
// one took 13 ms at the median and 52 at most, and a direct message
// waited for laps of five such visits (p99 200 ms in ringbench scale).
// Users known to have deliveries waiting go first and are not bounded by
// it.
const loginFetchUsers = 4

// shrinkKeep is how long a node's visits stay shrunk after the last one
// that failed over its budget for a reason not about its data, once two
// did so within shrinkKeep: as long as the node keeps the visit's budget
// stretched after such a failure (stretchKeep in internal/node), and for
// the same reason. On a link that loses packets a light visit commits now
// and then between loaded ones that lose a packet; back to full visits
// after each light one that commits, the node failed every other visit
// (each taking its whole budget), and the kinds of work the light ones
// never reached waited for as long as the loss lasted (seen at 5 % loss:
// a user at the lossy node got nothing for 3.8 s while the node's senders
// were served). The cost: for shrinkKeep after such failures, a busy node
// needs a visit for each kind of work it has, so a single failure (a
// hiccup) does not start it.
const shrinkKeep = 2 * time.Second

// shrinkKinds are the kinds of work shrunk visits take turns at, in this
// order.
var shrinkKinds = [...]string{"store", "ack", "fetch"}

// shrinking reports whether the visit at now does one kind of work: after
// a failure until a visit commits, and until shrinkKeep after the last
// failure over budget (see visitFailed).
func (q *Queue) shrinking(now time.Time) bool {
	if !q.v.shrinkUntil.IsZero() && !now.Before(q.v.shrinkUntil) {
		q.v.shrinkUntil = time.Time{}
		if q.v.fails == 0 {
			q.log.Info().Dur("after_ms", shrinkKeep).Msg("chat: no visit failed over its budget for a while; visits do all their work again")
		}
	}
	return q.v.fails > 0 || !q.v.shrinkUntil.IsZero()
}

// shrink keeps one kind of work of a visit after failures, already made
// smaller by collect, and gives the rest back. The kind kept:
//
//   - deliveries to make pending again, whenever there are some: a fetch
//     before them would hand their users later messages first (the users'
//     cursors are past the marked rows until they are undone);
//   - after a failure about the data, until a visit commits: the first
//     there is of messages to store, acknowledgements, the fetch, so that
//     the same kind is tried again, smaller each time, down to the one
//     piece the store refuses (suspect, probe, poison);
//   - otherwise the kinds take turns: the first there is after the kind
//     the last such visit kept. With the first there is always kept, a
//     busy node, which always has messages to store, did nothing else
//     while its visits failed.
//
// If the last visit failed with one piece of work alone, this one probes
// the store first.
func (q *Queue) shrink(w *visitWork) {
	w.shrunk, w.prune = true, false
	kind := q.shrinkKind(w)
	if kind == "unmark" {
		// The first set of rows, halved after each failure in a row; the
		// rest, and the other sets, go back first in line.
		first, rest := w.unmark[0], slices.Clone(w.unmark[1:])
		if k := max(1, len(first.rows)>>min(q.v.fails, 16)); k < len(first.rows) {
			rest = append([]marked{{stamp: first.stamp, rows: first.rows[k:]}}, rest...)
			first.rows = first.rows[:k:k]
		}
		q.v.unmark, w.unmark = append(rest, q.v.unmark...), []marked{first}
	}
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
	w.probe = q.v.suspect.kind != "" && q.v.suspect.matches(w)
}

// shrinkKind picks the kind of work a shrunk visit keeps (see shrink):
// "unmark", or one of shrinkKinds ("fetch" when there is none).
func (q *Queue) shrinkKind(w *visitWork) string {
	has := map[string]bool{
		"store": len(w.batch) > 0,
		"ack":   len(w.acks) > 0 || len(w.ackIDs) > 0,
		"fetch": w.fetch,
	}
	switch {
	case len(w.unmark) > 0:
		return "unmark"
	case q.v.dataFail:
		for _, kind := range shrinkKinds {
			if has[kind] {
				return kind
			}
		}
		return "fetch"
	}
	next := 0
	for i, kind := range shrinkKinds {
		if kind == q.v.kept {
			next = i + 1
		}
	}
	for i := range shrinkKinds {
		if kind := shrinkKinds[(next+i)%len(shrinkKinds)]; has[kind] {
			q.v.kept = kind
			return kind
		}
	}
	return "fetch"
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
