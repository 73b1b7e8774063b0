package store

import (
	"cmp"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Direct messages are on timelines. A user's inbox is the direct messages
// to them (messages.to_user_id, index ix_messages_to_user) in msg_seq order,
// and what the user has is one cursor row (inbox_cursors), as a group
// member's is (cursor.go):
//
//   - acked_seq: every direct message to the user up to it is acknowledged;
//   - sent_seq (>= acked_seq): handed to a connection up to it; what waits
//     to be handed is the inbox after sent_seq;
//   - sent_us: the stamp of the newest mark; back_us and back_seq: the
//     newest stamp used before the cursor last moved back (a login's reset
//     or an undone mark), and where it moved back to.
//
// Storing a direct message writes its messages row alone (and a cursor for
// a recipient who never had one); a visit's marks are one UPDATE for all its
// users and its acknowledgements one more, a row per user, not per message.
//
// An acknowledgement by id (protocol 2) is exact, not cumulative: a client
// may acknowledge out of order, and acknowledging a message says nothing of
// those before it. acked_seq moves over the longest run of acknowledged
// messages after it; a message acknowledged behind one that is not is
// remembered in inbox_acks (user, message), which the fetch skips and
// which goes when acked_seq passes it. Such rows are rare (a client that
// acknowledges in order, as ours do, never writes one) and bounded by the
// user's unacknowledged messages: an id that is not a direct message to the
// user, or is acknowledged already, changes nothing.
//
// A mark moves sent_seq to the last of the user's rows only if those rows
// are exactly what waits between the cursor and it (no message skipped),
// and stamps the cursor with a stamp newer than any it carries (so marks
// on one cursor are ordered whatever the nodes' clocks). Undoing a mark
// moves sent_seq back to just before its first row unless the cursor moved
// back below that row since the mark (its messages were made pending again,
// and may have been handed over since): a mark undone after a newer mark
// also makes the newer mark's messages come again (more, never less).

// inboxWalk bounds the inbox messages one acknowledgement reads per user
// (the run after acked_seq): acknowledged ids further on are dropped, and
// their messages come again.
const inboxWalk = 4 * MaxAckIDs

// ensureInboxes makes a cursor for each user who has none (a new user: the
// migration gave every existing one theirs). It reads the users' cursors
// and writes only the missing ones (an INSERT IGNORE of every user would
// try to write a row for each). A user whose cursor a committed
// transaction of this process already made sure of is skipped: cursors are
// never deleted, and storing a direct message saves a statement.
func (t *sqlTx) ensureInboxes(users []int64) error {
	users = slices.DeleteFunc(slices.Clone(users), func(u int64) bool {
		_, known := t.s.inboxes.Load(u)
		return known
	})
	slices.Sort(users)
	users = slices.Compact(users)
	t.inboxes = append(t.inboxes, users...)
	for chunk := range slices.Chunk(users, inChunk) {
		q := t.s.d.insertIgnore + " inbox_cursors (user_id) SELECT u.user_id FROM users u WHERE u.user_id IN (" +
			placeholders(len(chunk)) + ") AND NOT EXISTS (SELECT 1 FROM inbox_cursors c WHERE c.user_id = u.user_id)" +
			t.s.d.onConflictIgnore
		if _, err := t.exec(q, anySlice(chunk)...); err != nil {
			return fmt.Errorf("store: inbox cursors: %w", err)
		}
	}
	return nil
}

// inboxSpan is a range of one user's inbox, (lo, hi] or [lo, hi] as each
// use says.
type inboxSpan struct{ user, lo, hi int64 }

// inboxSpans groups direct rows by user, in order of first appearance:
// each user's lowest and highest sequence.
func inboxSpans(rows []RecipientSeq) []inboxSpan {
	at := map[int64]int{}
	var out []inboxSpan
	for _, r := range rows {
		i, ok := at[r.RecipientID]
		if !ok {
			at[r.RecipientID] = len(out)
			out = append(out, inboxSpan{user: r.RecipientID, lo: r.Seq, hi: r.Seq})
			continue
		}
		out[i].lo, out[i].hi = min(out[i].lo, r.Seq), max(out[i].hi, r.Seq)
	}
	return out
}

// caseOf returns "CASE col WHEN ? THEN ? ... END" with its arguments: the
// value pick(span) for each span's user.
func caseOf(col string, spans []inboxSpan, pick func(inboxSpan) int64) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 2*len(spans))
	b.WriteString("CASE " + col)
	for _, s := range spans {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, s.user, pick(s))
	}
	b.WriteString(" END")
	return b.String(), args
}

// markInbox marks direct rows (of users present, a prefix of what waits for
// each, as PendingFor returns; none the cursor has passed) delivered at
// stamp, the users' cursors standing at sent: each user's rows must be
// exactly what waits between the cursor and the last of them (no message
// is marked that was not handed over), which this transaction's fetch
// showed (fetchedSpans) or one read checks (wholeSpans), and one UPDATE
// per chunk of users moves those cursors (compare-and-set: a cursor moved
// since is left alone). It returns the rows whose cursor moved.
func (t *sqlTx) markInbox(stamp int64, rows []RecipientSeq, sent map[int64]int64) ([]RecipientSeq, error) {
	moved := map[int64]bool{}
	for chunk := range slices.Chunk(inboxSpans(rows), rowChunk) {
		for i := range chunk {
			chunk[i].lo = sent[chunk[i].user] // the update's expected sent_seq
		}
		whole, rest := t.fetchedSpans(chunk, rows)
		if len(rest) > 0 {
			counted, err := t.wholeSpans(rest, rows)
			if err != nil {
				return nil, fmt.Errorf("store: mark delivered: %w", err)
			}
			whole = append(whole, counted...)
		}
		if len(whole) == 0 {
			continue
		}
		hi, hiArgs := caseOf("user_id", whole, func(s inboxSpan) int64 { return s.hi })
		at, atArgs := caseOf("user_id", whole, func(s inboxSpan) int64 { return s.lo })
		ids := make([]any, len(whole))
		for i, s := range whole {
			ids[i] = s.user
		}
		q := "UPDATE inbox_cursors SET sent_seq = " + hi + ", sent_us = ? WHERE user_id IN (" + placeholders(len(ids)) + ")" +
			" AND sent_seq = " + at
		k, err := t.exec(q, slices.Concat(hiArgs, []any{stamp}, ids, atArgs)...)
		if err != nil {
			return nil, fmt.Errorf("store: mark delivered: %w", err)
		}
		if int(k) == len(whole) {
			for _, s := range whole {
				moved[s.user] = true
			}
			continue
		}
		// Some did not move: those whose cursor now carries the stamp did.
		err = t.each("SELECT user_id, sent_us FROM inbox_cursors WHERE user_id IN ("+placeholders(len(ids))+")", ids,
			func(rs *sql.Rows) error {
				var u, us int64
				err := rs.Scan(&u, &us)
				moved[u] = us == stamp
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("store: mark delivered: %w", err)
		}
	}
	return slices.DeleteFunc(slices.Clone(rows), func(r RecipientSeq) bool { return !moved[r.RecipientID] }), nil
}

// fetchedSpans splits spans (user, cursor lo, last row hi) into those
// whose rows this transaction's fetch showed to be every message waiting
// in (lo, hi], and the rest (for wholeSpans to count). A user's rows are
// shown so when the fetch read the user's inbox from the same cursor (lo,
// as the mark read it) and the rows are the first of what it read, with no
// gap: the fetch read the messages after the cursor in order, skipping
// only those acknowledged out of order, so its first k are all that waited
// in (lo, k-th] when it read them.
//
// Nothing can join (lo, hi] after that read, so no count is needed:
//   - msg_seq is the messages' auto-increment key (AUTO_INCREMENT;
//     SQLite's AUTOINCREMENT), given when a row is inserted: a message
//     inserted after the read, by this transaction or another, gets a
//     sequence above every one given before, hi among them;
//   - messages are stored only by a node's visit, holding the token, in a
//     fenced transaction (work.go's storeBatch), and this mark runs in such
//     a transaction too (work.go: fetch, then markDelivered): the fence's
//     UPDATE holds the fence row's lock until the commit, so fenced
//     transactions run one after another. On MariaDB (read committed) the
//     fetch saw every message committed before this transaction took the
//     fence, and no other transaction can store one and commit before this
//     one ends; on SQLite every transaction holds the write lock from its
//     start (BEGIN IMMEDIATE). A message below hi committed after the read
//     could only come from an insert outside the fence, and would be
//     skipped just the same if it committed after the mark's UPDATE, which
//     no count sees: the fence, not the count, keeps the inbox in order;
//   - acknowledgements in between only make fewer messages wait (marking
//     one of them hands over one acknowledged: more, never less), and a
//     prune deletes only messages at or below acked_seq, never above lo.
//
// The cursor itself may move between the fetch and the mark (a login's
// reset runs outside the fence): a cursor read by the mark (lo) that is not
// the one the fetch read goes to the count, and the UPDATE's
// compare-and-set on sent_seq = lo leaves a cursor moved after that read
// alone.
func (t *sqlTx) fetchedSpans(spans []inboxSpan, rows []RecipientSeq) (shown, rest []inboxSpan) {
	byUser := directByUser(rows)
	for _, s := range spans {
		f, ok := t.fetched[s.user]
		seqs := slices.Compact(byUser[s.user])
		if ok && f.sent == s.lo && len(seqs) <= len(f.seqs) && slices.Equal(seqs, f.seqs[:len(seqs)]) {
			shown = append(shown, s)
		} else {
			rest = append(rest, s)
		}
	}
	return shown, rest
}

// wholeSpans returns those of spans (user, cursor lo, last row hi) whose
// rows are every message waiting in (lo, hi]: one statement counts the
// messages of those ranges (index ranges of ix_messages_to_user, as many
// rows as the fetch read) that are not acknowledged out of order.
func (t *sqlTx) wholeSpans(spans []inboxSpan, rows []RecipientSeq) ([]inboxSpan, error) {
	want := map[int64]int{}
	seen := map[RecipientSeq]bool{}
	for _, r := range rows {
		if !seen[r] {
			seen[r] = true
			want[r.RecipientID]++
		}
	}
	var b strings.Builder
	args := make([]any, 0, 3*len(spans))
	for i, s := range spans {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(m.to_user_id = ? AND m.msg_seq > ? AND m.msg_seq <= ?)")
		args = append(args, s.user, s.lo, s.hi)
	}
	have := map[int64]int{}
	err := t.each("SELECT m.to_user_id, COUNT(*) FROM messages m"+t.s.d.byInbox+" WHERE ("+b.String()+")"+
		" AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = m.to_user_id AND a.msg_seq = m.msg_seq)"+
		" GROUP BY m.to_user_id", args, func(rs *sql.Rows) error {
		var u int64
		var n int
		err := rs.Scan(&u, &n)
		have[u] = n
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(spans), func(s inboxSpan) bool { return have[s.user] != want[s.user] }), nil
}

// unmarkInbox makes the messages of direct rows marked at stamp pending
// again: each user's cursor moves back to just before the user's first row
// (never behind what is acknowledged), unless it moved back below that row
// since the mark, or carries no mark as new as stamp. It returns how many
// cursors moved.
func (t *sqlTx) unmarkInbox(stamp int64, rows []RecipientSeq) (int, error) {
	n := 0
	for _, s := range inboxSpans(rows) {
		back := t.s.d.greatest + "(acked_seq, ?)"
		k, err := t.exec("UPDATE inbox_cursors SET back_us = "+t.s.d.greatest+"(sent_us, back_us), back_seq = "+back+", sent_seq = "+back+
			" WHERE user_id = ? AND sent_seq >= ? AND sent_seq > acked_seq AND sent_us >= ? AND (back_us < ? OR back_seq >= ?)",
			s.lo-1, s.lo-1, s.user, s.lo, stamp, stamp, s.lo)
		if err != nil {
			return n, fmt.Errorf("store: unmark delivered: %w", err)
		}
		n += int(k)
	}
	return n, nil
}

// resetInbox makes every direct message the user has not acknowledged
// pending again and returns how many were handed to a connection.
func (t *sqlTx) resetInbox(userID int64) (int, error) {
	var n int
	if err := t.queryRow("SELECT COUNT(*) FROM inbox_cursors c "+t.s.d.straightJoin+" messages m"+t.s.d.byInbox+
		" ON m.to_user_id = c.user_id AND m.msg_seq > c.acked_seq AND m.msg_seq <= c.sent_seq WHERE c.user_id = ?"+
		" AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = c.user_id AND a.msg_seq = m.msg_seq)", userID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: reset delivered: %w", err)
	}
	if _, err := t.exec("UPDATE inbox_cursors SET back_us = "+t.s.d.greatest+"(sent_us, back_us), back_seq = acked_seq, sent_seq = acked_seq"+
		" WHERE user_id = ? AND sent_seq > acked_seq", userID); err != nil {
		return 0, fmt.Errorf("store: reset delivered: %w", err)
	}
	return n, nil
}

// inboxCount returns how many direct messages the user has not
// acknowledged.
func (t *sqlTx) inboxCount(userID int64) (int, error) {
	var n int
	err := t.queryRow("SELECT COUNT(*) FROM inbox_cursors c "+t.s.d.straightJoin+" messages m"+t.s.d.byInbox+
		" ON m.to_user_id = c.user_id AND m.msg_seq > c.acked_seq WHERE c.user_id = ?"+
		" AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = c.user_id AND a.msg_seq = m.msg_seq)", userID).Scan(&n)
	return n, err
}

// inboxRun is one user's inbox after acked_seq as an acknowledgement reads
// it: the messages in order, with whether each was acknowledged out of
// order already.
type inboxRun struct {
	acked int64
	seqs  []int64
	side  []bool
}

// inboxAck is what acknowledging some of a user's messages does: the new
// acked_seq, the out-of-order acknowledgements to remember, whether the
// cursor passed remembered ones, and how many messages it acknowledged.
type inboxAck struct {
	acked    int64
	side     []int64
	passSide bool
	n        int
}

// walkAcks applies acknowledged sequences to a user's run: acked_seq
// moves over every message acknowledged now or before, up to the first
// that is not; those acknowledged now after it are remembered. Sequences
// not in the run (not the user's, acknowledged already, or past what was
// read) change nothing.
func walkAcks(run inboxRun, acks map[int64]bool) inboxAck {
	out := inboxAck{acked: run.acked}
	gap := false
	for i, seq := range run.seqs {
		now := acks[seq] && !run.side[i]
		if now {
			out.n++
		}
		switch {
		case gap:
			if now {
				out.side = append(out.side, seq)
			}
		case now || run.side[i]:
			out.acked = seq
			out.passSide = out.passSide || run.side[i]
		default:
			gap = true
		}
	}
	return out
}

// ackInbox acknowledges direct messages (by user, their sequences). One
// user acknowledging their next message in order (the common case) is one
// UPDATE (ackNext); otherwise, or if that moved nothing: one read of the
// users' cursors (with their remembered out-of-order acknowledgements,
// usually none), one of their runs, one UPDATE of their cursors, and the
// rare out-of-order rows. It returns how many messages it acknowledged.
func (t *sqlTx) ackInbox(byUser map[int64][]int64) (int, error) {
	if u, seq, ok := loneAck(byUser); ok {
		moved, err := t.ackNext(u, seq)
		if err != nil {
			return 0, err
		}
		if moved {
			return 1, nil
		}
	}
	users := slices.Sorted(maps.Keys(byUser))
	runs, err := t.readRuns(users, byUser)
	if err != nil {
		return 0, fmt.Errorf("store: ack: %w", err)
	}
	var moves []inboxSpan // user, old acked_seq (lo), new (hi)
	var remember []RecipientSeq
	n := 0
	for _, u := range users {
		run := runs[u]
		if run == nil {
			continue
		}
		acks := map[int64]bool{}
		for _, s := range byUser[u] {
			acks[s] = true
		}
		a := walkAcks(*run, acks)
		n += a.n
		if a.acked > run.acked {
			moves = append(moves, inboxSpan{user: u, lo: run.acked, hi: a.acked})
		}
		if a.passSide {
			if _, err := t.exec("DELETE FROM inbox_acks WHERE user_id = ? AND msg_seq <= ?", u, a.acked); err != nil {
				return 0, fmt.Errorf("store: ack: %w", err)
			}
		}
		for _, s := range a.side {
			remember = append(remember, RecipientSeq{RecipientID: u, Seq: s})
		}
	}
	if err := t.moveAcked(moves); err != nil {
		return 0, err
	}
	return n, t.insertSideAcks(remember)
}

// loneAck returns the user and sequence of an acknowledgement of one
// message by one user.
func loneAck(byUser map[int64][]int64) (user, seq int64, ok bool) {
	if len(byUser) != 1 {
		return 0, 0, false
	}
	for u, seqs := range byUser {
		if len(seqs) == 0 || slices.Min(seqs) != slices.Max(seqs) {
			return 0, 0, false
		}
		user, seq, ok = u, seqs[0], true
	}
	return user, seq, ok
}

// ackNext acknowledges seq if it is the user's next message in order: a
// direct message to the user after acked_seq with none before it after
// acked_seq, and none acknowledged out of order (walkAcks would move the
// cursor on over those). One compare-and-set UPDATE moves acked_seq (and
// sent_seq with it) to seq if so; its subqueries take their bounds from
// the arguments, not from the cursor's columns (a range bound from a
// column read the user's whole inbox on MariaDB): the user's newest
// message below seq (one index entry of ix_messages_to_user, read
// backwards) must be at or below acked_seq, seq one of theirs (by key).
// It reports whether the cursor moved; if not, nothing changed.
func (t *sqlTx) ackNext(user, seq int64) (bool, error) {
	k, err := t.exec("UPDATE inbox_cursors SET acked_seq = ?, sent_seq = "+t.s.d.greatest+"(sent_seq, ?)"+
		" WHERE user_id = ? AND acked_seq < ?"+
		" AND acked_seq >= COALESCE((SELECT m.msg_seq FROM messages m"+t.s.d.byInbox+
		" WHERE m.to_user_id = ? AND m.msg_seq < ? ORDER BY m.msg_seq DESC LIMIT 1), 0)"+
		" AND EXISTS (SELECT 1 FROM messages m WHERE m.msg_seq = ? AND m.to_user_id = ?)"+
		" AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = ?)",
		seq, seq, user, seq, user, seq, seq, user, user)
	if err != nil {
		return false, fmt.Errorf("store: ack: %w", err)
	}
	return k == 1, nil
}

// readRuns reads each user's cursor and remembered acknowledgements, then
// the user's inbox after acked_seq up to the highest sequence acknowledged
// now or before: a range no wider than inboxWalk sequences (so no more
// messages) in one statement for every user; a wider one (rare) at most
// inboxWalk messages, in a statement per 40 users. A user with nothing new
// acknowledged gets no run.
func (t *sqlTx) readRuns(users []int64, byUser map[int64][]int64) (map[int64]*inboxRun, error) {
	acked, side, err := t.ackHeads(users)
	if err != nil {
		return nil, err
	}
	narrow, wide := runSpans(users, byUser, acked, side)
	runs := map[int64]*inboxRun{}
	scan := func(rows *sql.Rows) error {
		var u, seq int64
		if err := rows.Scan(&u, &seq); err != nil {
			return err
		}
		r := runs[u]
		if r == nil {
			r = &inboxRun{acked: acked[u]}
			runs[u] = r
		}
		r.seqs, r.side = append(r.seqs, seq), append(r.side, side[u][seq])
		return nil
	}
	if err := t.readNarrow(narrow, scan); err != nil {
		return nil, err
	}
	for chunk := range slices.Chunk(wide, pendingUserChunk) {
		var b strings.Builder
		var args []any
		for i, sp := range chunk {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			fmt.Fprintf(&b, "SELECT * FROM (SELECT m.to_user_id, m.msg_seq FROM messages m%s"+
				" WHERE m.to_user_id = ? AND m.msg_seq > ? AND m.msg_seq <= ? ORDER BY m.msg_seq LIMIT ?) r%d", t.s.d.byInbox, i)
			args = append(args, sp.user, sp.lo, sp.hi, inboxWalk)
		}
		if err := t.each(b.String(), args, scan); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// runSpans returns, for each user with something acknowledged after its
// acked_seq, the range of its inbox to read (from acked_seq to the highest
// acknowledged now or before): narrow ones (at most inboxWalk sequences
// wide) and wide ones.
func runSpans(users []int64, byUser map[int64][]int64, acked map[int64]int64, side map[int64]map[int64]bool) (narrow, wide []inboxSpan) {
	for _, u := range users {
		a, ok := acked[u]
		if !ok || slices.Max(byUser[u]) <= a {
			continue
		}
		sp := inboxSpan{user: u, lo: a, hi: slices.Max(byUser[u])}
		for seq := range side[u] {
			sp.hi = max(sp.hi, seq)
		}
		if sp.hi-sp.lo <= inboxWalk {
			narrow = append(narrow, sp)
		} else {
			wide = append(wide, sp)
		}
	}
	return narrow, wide
}

// readNarrow reads narrow ranges of inboxes, every range in one statement
// (an OR of index ranges; each holds at most inboxWalk messages).
func (t *sqlTx) readNarrow(spans []inboxSpan, scan func(*sql.Rows) error) error {
	for chunk := range slices.Chunk(spans, rowChunk) {
		var b strings.Builder
		args := make([]any, 0, 3*len(chunk))
		for i, sp := range chunk {
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(m.to_user_id = ? AND m.msg_seq > ? AND m.msg_seq <= ?)")
			args = append(args, sp.user, sp.lo, sp.hi)
		}
		if err := t.each("SELECT m.to_user_id, m.msg_seq FROM messages m"+t.s.d.byInbox+" WHERE "+b.String()+
			" ORDER BY m.to_user_id, m.msg_seq", args, scan); err != nil {
			return err
		}
	}
	return nil
}

// ackHeads reads the users' acked_seq and their acknowledgements out of
// order (rare: usually none), in one statement per chunk of users.
func (t *sqlTx) ackHeads(users []int64) (map[int64]int64, map[int64]map[int64]bool, error) {
	acked := map[int64]int64{}
	side := map[int64]map[int64]bool{}
	for chunk := range slices.Chunk(users, inChunk) {
		err := t.each("SELECT c.user_id, c.acked_seq, COALESCE(a.msg_seq, 0) FROM inbox_cursors c"+
			" LEFT JOIN inbox_acks a ON a.user_id = c.user_id WHERE c.user_id IN ("+placeholders(len(chunk))+")", anySlice(chunk),
			func(rows *sql.Rows) error {
				var u, a, seq int64
				if err := rows.Scan(&u, &a, &seq); err != nil {
					return err
				}
				acked[u] = a
				if seq > a {
					if side[u] == nil {
						side[u] = map[int64]bool{}
					}
					side[u][seq] = true
				}
				return nil
			})
		if err != nil {
			return nil, nil, err
		}
	}
	return acked, side, nil
}

// moveAcked moves the users' acked_seq (from lo to hi, compare-and-set: a
// cursor moved since the read is left alone, and its messages come again)
// and sent_seq with it, in one statement per chunk of users.
func (t *sqlTx) moveAcked(moves []inboxSpan) error {
	for chunk := range slices.Chunk(moves, rowChunk) {
		to, toArgs := caseOf("user_id", chunk, func(s inboxSpan) int64 { return s.hi })
		from, fromArgs := caseOf("user_id", chunk, func(s inboxSpan) int64 { return s.lo })
		ids := make([]any, len(chunk))
		for i, s := range chunk {
			ids[i] = s.user
		}
		q := "UPDATE inbox_cursors SET acked_seq = " + to + ", sent_seq = " + t.s.d.greatest + "(sent_seq, " + to + ")" +
			" WHERE user_id IN (" + placeholders(len(ids)) + ") AND acked_seq = " + from
		if _, err := t.exec(q, slices.Concat(toArgs, toArgs, ids, fromArgs)...); err != nil {
			return fmt.Errorf("store: ack: %w", err)
		}
	}
	return nil
}

// insertSideAcks remembers messages acknowledged out of order.
func (t *sqlTx) insertSideAcks(rows []RecipientSeq) error {
	for chunk := range slices.Chunk(rows, inChunk) {
		args := make([]any, 0, 2*len(chunk))
		for _, r := range chunk {
			args = append(args, r.RecipientID, r.Seq)
		}
		q := t.s.d.insertIgnore + " inbox_acks (user_id, msg_seq) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?), ", len(chunk)), ", ") + t.s.d.onConflictIgnore
		if _, err := t.exec(q, args...); err != nil {
			return fmt.Errorf("store: ack: %w", err)
		}
	}
	return nil
}

// directByUser groups direct rows' sequences by user.
func directByUser(rows []RecipientSeq) map[int64][]int64 {
	out := map[int64][]int64{}
	for _, r := range rows {
		out[r.RecipientID] = append(out[r.RecipientID], r.Seq)
	}
	for _, s := range out {
		slices.SortFunc(s, cmp.Compare)
	}
	return out
}
