package queue

// runs on: the visit goroutine. work is the fenced transaction's body
// (the store may run it again: it starts from scratch each time);
// committed, restore and askLocked write the queue's shared fields under
// q.mu.

import (
	"errors"
	"slices"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// work is the transaction's body. The store may run it again after a
// deadlock, so it starts from scratch each time.
func (q *Queue) work(tx store.Tx, now time.Time, w *visitWork) error {
	w.stored, w.deliveries, w.waiting, w.more, w.moreFor, w.stamp, w.cut, w.pruneTook, w.fetchHad = w.stored[:0], w.deliveries[:0], nil, false, nil, 0, false, 0, 0
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
		w.fetchHad = time.Until(by)
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
		q.log.Warn().Int("rows", len(q.v.unmark[0].rows)).Msg("chat: too many deliveries to make pending again; these wait for their users' next login")
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
			q.askFetch(id, false)
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
		// Nothing was read: the same users again, as they were asked.
		if w.fetchAll {
			q.more = true
		} else {
			for _, id := range w.users {
				if _, ok := q.fetchFor[id]; !ok {
					q.askFetch(id, false) // named by the visit's own hint
				}
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
			q.askFetch(id, false)
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
