package store

import (
	"cmp"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Group messages are stored once. A member's delivery state is a cursor on
// the group's timeline (table group_cursors): acked_seq (the member has
// every message up to it), sent_seq (handed to a connection up to it) and,
// after the member left, until_seq (the last message sent while a member).
// What waits for a member is the group's messages in (sent_seq, end], end
// being until_seq or the group's last_seq; what a visit reads and writes for
// the members online at its node is in proportion to those members and the
// batch, never to the group's size.

// Bounds of the pending fetch. Each statement of it reads a bounded number
// of rows whatever the size of the history, the backlog or a group.
const (
	// pendingUserChunk bounds the users of one statement (one UNION ALL
	// part each: an index range of at most perUser rows).
	pendingUserChunk = 40
	// pendingGroupChunk bounds the groups of one timeline statement.
	pendingGroupChunk = 20
	// MaxPendingUsers bounds the users of one PendingFor call.
	MaxPendingUsers = 2000
	// maxCursorRows bounds the pending cursors read for one chunk of
	// users (a user in very many groups is served over several visits).
	maxCursorRows = 1000
)

// cursorRow is one member's pending window on a group's timeline.
type cursorRow struct {
	group, user, sent, end int64
}

// groupKey names one member's cursor.
type groupKey struct{ group, user int64 }

// userSource is one source of a user's pending messages (their direct rows,
// or one group cursor): its messages in order, and whether it had more than
// were read (then nothing after its last one may be taken this time).
type userSource struct {
	items     []Delivery
	truncated bool
}

// PendingFor returns what waits for these users (logged in at nodeID): up
// to perUser each and limit in all, every user's a prefix of what waits for
// them in global order (per-sender FIFO holds across direct and group
// messages), ordered by (Seq, RecipientID). A user's own group messages come
// back with Own set: marking them moves the cursor past them, nobody is
// shown them. Every statement is bounded: at most perUser rows per user and
// source, whatever the backlog.
func (t *sqlTx) PendingFor(nodeID int64, users []int64, perUser, limit int) ([]Delivery, error) {
	if limit <= 0 || perUser <= 0 || len(users) > MaxPendingUsers {
		return nil, fmt.Errorf("%w: limit %d, per user %d, %d users (at most %d)", ErrInvalid, limit, perUser, len(users), MaxPendingUsers)
	}
	users = slices.Clone(users)
	slices.Sort(users)
	users = slices.Compact(users)
	sources := map[int64][]userSource{}
	h, err := t.pendingHeads(users)
	if err != nil {
		return nil, fmt.Errorf("store: pending messages: %w", err)
	}
	if err := t.pendingDirect(users, h, perUser, sources); err != nil {
		return nil, fmt.Errorf("store: pending messages: %w", err)
	}
	if err := t.pendingGroups(h.cursors, h.names, perUser, sources); err != nil {
		return nil, fmt.Errorf("store: pending messages: %w", err)
	}
	var out []Delivery
	for _, u := range users {
		out = append(out, userPrefix(sources[u], perUser)...)
	}
	slices.SortFunc(out, func(a, b Delivery) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.RecipientID, b.RecipientID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// userPrefix merges one user's sources in order and keeps what may be
// taken: nothing past the first truncated source's last message, and at
// most perUser.
func userPrefix(srcs []userSource, perUser int) []Delivery {
	cut := int64(-1)
	var all []Delivery
	for _, s := range srcs {
		if s.truncated && len(s.items) > 0 {
			last := s.items[len(s.items)-1].Seq
			if cut < 0 || last < cut {
				cut = last
			}
		}
		all = append(all, s.items...)
	}
	slices.SortFunc(all, func(a, b Delivery) int { return cmp.Compare(a.Seq, b.Seq) })
	if cut >= 0 {
		all = slices.DeleteFunc(all, func(d Delivery) bool { return d.Seq > cut })
	}
	if len(all) > perUser {
		all = all[:perUser]
	}
	return all
}

// pendingDirect reads the oldest perUser pending direct messages of each
// of users with some (h.direct; one index range per user:
// ix_messages_to_user, from the inbox cursor h read) with the messages and
// the recipient's name, in one statement per chunk of users. What it read
// of each inbox is kept for the mark (t.fetched).
func (t *sqlTx) pendingDirect(users []int64, h heads, perUser int, sources map[int64][]userSource) error {
	per := map[int64]*userSource{}
	cursors := map[int64]int64{} // the sent_seq each user's range started from
	for chunk := range slices.Chunk(h.direct, pendingUserChunk) {
		var b strings.Builder
		args := make([]any, 0, 4*len(chunk))
		for i, u := range chunk {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			// The inner select reads only the user's index range; the
			// message and the sender's name are joined after it, by key
			// (the addressee is the user, whose name the heads read).
			inner, a := t.inboxRange(u, h.inbox[u], perUser)
			fmt.Fprintf(&b, "SELECT q%d.user_id, q%d.sent_seq, "+directCols+" FROM ("+inner+") q%d"+
				" %s messages m ON m.msg_seq = q%d.msg_seq %s users s ON s.user_id = m.sender_id",
				i, i, i, t.s.d.straightJoin, i, t.s.d.straightJoin)
			args = append(args, a...)
		}
		err := t.each(b.String(), args, func(rows *sql.Rows) error {
			var d Delivery
			var sent int64
			if err := scanMessage(rows, &d.Message, &d.RecipientID, &sent); err != nil {
				return err
			}
			d.Recipient = h.names[d.RecipientID]
			d.ToUser = d.Recipient
			s := per[d.RecipientID]
			if s == nil {
				s = &userSource{}
				per[d.RecipientID] = s
			}
			s.items = append(s.items, d)
			cursors[d.RecipientID] = sent
			return nil
		})
		if err != nil {
			return err
		}
	}
	for u, s := range per {
		slices.SortFunc(s.items, func(a, b Delivery) int { return cmp.Compare(a.Seq, b.Seq) })
		s.truncated = len(s.items) >= perUser
		sources[u] = append(sources[u], *s)
	}
	t.keepFetched(users, per, cursors)
	return nil
}

// keepFetched records what a fetch of users read of their inboxes (per
// user, the messages in order, read from the cursor at sent_seq cursors[u])
// for this transaction's marks, in place of what an earlier fetch read.
func (t *sqlTx) keepFetched(users []int64, per map[int64]*userSource, cursors map[int64]int64) {
	if t.fetched == nil {
		t.fetched = map[int64]inboxRead{}
	}
	for _, u := range users {
		delete(t.fetched, u)
	}
	for u, s := range per {
		r := inboxRead{sent: cursors[u]}
		for _, d := range s.items {
			r.seqs = append(r.seqs, d.Seq)
		}
		t.fetched[u] = r
	}
}

// inboxRead is what a fetch read of one user's inbox: the cursor's
// sent_seq, and the messages after it in order (at most perUser: the
// first of those waiting, the ones acknowledged out of order skipped).
type inboxRead struct {
	sent int64
	seqs []int64
}

// inboxHead is what pendingHeads read of a user's inbox cursor.
type inboxHead struct {
	sent int64
	side bool // some acknowledged out of order
}

// directCols are messageCols for direct messages to the user read: no
// addressee's name (the user's) and no group.
const directCols = "m.msg_seq, m.msg_id, s.name, NULL, NULL, m.content, m.sent_us, m.stored_us"

// inboxRange is the inner select of the user's pending direct messages
// (user_id, sent_seq: the cursor it read from, msg_seq), with its
// arguments: a plain index range of the user's inbox from the cursor h
// read (skipping what was acknowledged out of order only for a user who
// has such).
func (t *sqlTx) inboxRange(u int64, h inboxHead, perUser int) (string, []any) {
	q := "SELECT m.to_user_id AS user_id, ? AS sent_seq, m.msg_seq FROM messages m" + t.s.d.byInbox + " WHERE m.to_user_id = ? AND m.msg_seq > ?"
	if h.side {
		q += " AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = m.to_user_id AND a.msg_seq = m.msg_seq)"
	}
	return q + " ORDER BY m.msg_seq LIMIT ?", []any{h.sent, u, h.sent, perUser}
}

// heads is what a fetch first reads of its users: who has direct messages
// pending (direct, sorted) with their inbox cursors, and their group
// cursors with messages after them, with the names of those users.
type heads struct {
	direct  []int64
	inbox   map[int64]inboxHead
	cursors []cursorRow
	names   map[int64]string
}

// pendingHeads reads, in one statement per chunk of users, each user's
// inbox cursor with whether a direct message waits after it (one index
// row per user: their newest direct message, read backwards; an EXISTS of
// one after the cursor would read the inbox from its start; the subquery
// in the select list is never turned into a join), and the users' group
// cursors that have messages after them (at most maxCursorRows per chunk
// of users; the users' cursors first, ix_group_cursors_user, then their
// groups by key: from the group's side, the join would read every
// member's cursor of a big group). The users' inbox ranges then read from
// their cursors' positions as constants.
func (t *sqlTx) pendingHeads(users []int64) (heads, error) {
	h := heads{inbox: map[int64]inboxHead{}, names: map[int64]string{}}
	for chunk := range slices.Chunk(users, inChunk) {
		ph := placeholders(len(chunk))
		q := "SELECT 0, c.user_id, c.sent_seq, COALESCE((SELECT m.msg_seq FROM messages m" + t.s.d.byInbox + " WHERE m.to_user_id = c.user_id" +
			" ORDER BY m.msg_seq DESC LIMIT 1), 0) > c.sent_seq, EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = c.user_id), u.name" +
			" FROM inbox_cursors c " + t.s.d.straightJoin + " users u ON u.user_id = c.user_id WHERE c.user_id IN (" + ph + ")" +
			" UNION ALL SELECT * FROM (SELECT 1, c.group_id, c.user_id, c.sent_seq, COALESCE(c.until_seq, g.last_seq), u.name FROM group_cursors c " +
			t.s.d.straightJoin + " chat_groups g ON g.group_id = c.group_id " +
			t.s.d.straightJoin + " users u ON u.user_id = c.user_id" +
			" WHERE c.user_id IN (" + ph + ") AND c.sent_seq < COALESCE(c.until_seq, g.last_seq)" +
			" ORDER BY c.user_id, c.group_id LIMIT ?) gc"
		args := slices.Concat(anySlice(chunk), anySlice(chunk), []any{maxCursorRows})
		err := t.each(q, args, func(rows *sql.Rows) error {
			var kind, a, b, c, d int64
			var name sql.NullString
			if err := rows.Scan(&kind, &a, &b, &c, &d, &name); err != nil {
				return err
			}
			if kind == 1 {
				h.cursors = append(h.cursors, cursorRow{group: a, user: b, sent: c, end: d})
				h.names[b] = name.String
				return nil
			}
			if c != 0 { // a direct message waits
				h.direct = append(h.direct, a)
				h.inbox[a] = inboxHead{sent: b, side: d != 0}
				h.names[a] = name.String
			}
			return nil
		})
		if err != nil {
			return heads{}, err
		}
	}
	slices.Sort(h.direct)
	return h, nil
}

// storedMessage is a message with its sender's id.
type storedMessage struct {
	Message
	senderID int64
	groupID  int64
}

const messageColsIDs = "m.sender_id, COALESCE(m.to_group_id, 0), " + messageCols

// pendingGroups reads, for the users' pending group cursors (read by
// pendingHeads), each group's timeline once per cursor position among its
// members here, at most perUser messages.
func (t *sqlTx) pendingGroups(cursors []cursorRow, names map[int64]string, perUser int, sources map[int64][]userSource) error {
	if len(cursors) == 0 {
		return nil
	}
	windows, list := groupWindows(cursors)
	if err := t.readWindows(list, perUser); err != nil {
		return err
	}
	for _, w := range list {
		slices.SortFunc(w.msgs, func(a, b storedMessage) int { return cmp.Compare(a.Seq, b.Seq) })
		w.truncated = len(w.msgs) >= perUser
	}
	for _, c := range cursors {
		src := cursorSource(c, names[c.user], windows[windowKey{c.group, c.sent}])
		if len(src.items) == 0 {
			continue
		}
		sources[c.user] = append(sources[c.user], src)
	}
	return nil
}

// groupWindow is one read of a group's timeline, shared by the members
// whose cursors stand at the same position: from (exclusive) to to.
type groupWindow struct {
	group, from, to int64
	msgs            []storedMessage
	truncated       bool
}

type windowKey struct{ group, from int64 }

// groupWindows makes one window per group and cursor position: the members
// of a group here usually share their position (they are up to date), and
// one far behind must not hold back the others' new messages. It returns
// them by key and in (group, from) order.
func groupWindows(cursors []cursorRow) (map[windowKey]*groupWindow, []*groupWindow) {
	windows := map[windowKey]*groupWindow{}
	for _, c := range cursors {
		k := windowKey{c.group, c.sent}
		if w := windows[k]; w != nil {
			w.to = max(w.to, c.end)
			continue
		}
		windows[k] = &groupWindow{group: c.group, from: c.sent, to: c.end}
	}
	list := slices.SortedFunc(maps.Values(windows), func(a, b *groupWindow) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.from, b.from))
	})
	return windows, list
}

// readWindows reads every window's messages, pendingGroupChunk windows a
// statement: a window reads at most perUser messages of the group's index
// range.
func (t *sqlTx) readWindows(list []*groupWindow, perUser int) error {
	for chunk := range slices.Chunk(list, pendingGroupChunk) {
		var b strings.Builder
		args := make([]any, 0, 4*len(chunk))
		for i, w := range chunk {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			// The inner select reads only the timeline's index range
			// (ix_messages_to_group); the names are joined after it.
			fmt.Fprintf(&b, "SELECT %d, "+messageColsIDs+" FROM (SELECT msg_seq FROM messages"+
				" WHERE to_group_id = ? AND msg_seq > ? AND msg_seq <= ? ORDER BY msg_seq LIMIT ?) w%d"+
				" "+t.s.d.straightJoin+" messages m ON m.msg_seq = w%d.msg_seq"+t.messageJoins(), i, i, i)
			args = append(args, w.group, w.from, w.to, perUser)
		}
		err := t.each(b.String(), args, func(rows *sql.Rows) error {
			var m storedMessage
			var i int
			if err := scanMessage(rows, &m.Message, &i, &m.senderID, &m.groupID); err != nil {
				return err
			}
			if i < 0 || i >= len(chunk) {
				return fmt.Errorf("group window %d of %d", i, len(chunk))
			}
			chunk[i].msgs = append(chunk[i].msgs, m)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cursorSource is what waits for one member's cursor, read from its
// group's window: the window's messages up to the cursor's end.
func cursorSource(c cursorRow, name string, w *groupWindow) userSource {
	src := userSource{}
	for _, m := range w.msgs {
		if m.Seq > c.end {
			break
		}
		src.items = append(src.items, Delivery{RecipientID: c.user, Recipient: name, GroupID: c.group,
			Own: m.senderID == c.user, Message: m.Message})
	}
	// The window stopped early: this member may have more after it.
	last := c.sent
	if len(w.msgs) > 0 {
		last = w.msgs[len(w.msgs)-1].Seq
	}
	src.truncated = w.truncated && last < c.end
	return src
}

// groupTargets returns, per member's cursor, the highest sequence of rows
// (group rows only).
func groupTargets(rows []RecipientSeq, pick func(old, seq int64) int64) map[groupKey]int64 {
	out := map[groupKey]int64{}
	for _, r := range rows {
		if r.GroupID == 0 {
			continue
		}
		k := groupKey{r.GroupID, r.RecipientID}
		if old, ok := out[k]; ok {
			out[k] = pick(old, r.Seq)
		} else {
			out[k] = r.Seq
		}
	}
	return out
}

// splitRows separates recipient rows from group (cursor) rows.
func splitRows(rows []RecipientSeq) (direct, group []RecipientSeq) {
	for _, r := range rows {
		if r.GroupID != 0 {
			group = append(group, r)
		} else {
			direct = append(direct, r)
		}
	}
	return direct, group
}

// markCursors moves the cursors of group rows to the highest of their
// rows (forward only), and returns the rows whose cursor moved.
func (t *sqlTx) markCursors(rows []RecipientSeq) ([]RecipientSeq, error) {
	targets := groupTargets(rows, func(a, b int64) int64 { return max(a, b) })
	moved := map[groupKey]bool{}
	// One statement per (group, target): the members of a group here read
	// the same window, so their cursors move together.
	type gt struct{ group, target int64 }
	batches := map[gt][]any{}
	for k, seq := range targets {
		batches[gt{k.group, seq}] = append(batches[gt{k.group, seq}], k.user)
	}
	for b, us := range batches {
		slices.SortFunc(us, func(x, y any) int { return cmp.Compare(x.(int64), y.(int64)) })
		for chunk := range slices.Chunk(us, inChunk) {
			k, err := t.exec("UPDATE group_cursors SET sent_seq = ? WHERE group_id = ? AND sent_seq < ? AND user_id IN ("+
				placeholders(len(chunk))+")", append([]any{b.target, b.group, b.target}, chunk...)...)
			if err != nil {
				return nil, err
			}
			if int(k) == len(chunk) {
				for _, u := range chunk {
					moved[groupKey{b.group, u.(int64)}] = true
				}
				continue
			}
			// Some did not move (their cursor was already there): find
			// which did not, one by one (rare: only under a race the fence
			// excludes).
			for _, u := range chunk {
				var sent int64
				err := t.queryRow("SELECT sent_seq FROM group_cursors WHERE group_id = ? AND user_id = ?",
					b.group, u).Scan(&sent)
				if err == nil && sent == b.target {
					moved[groupKey{b.group, u.(int64)}] = true
				} else if err != nil && err != sql.ErrNoRows {
					return nil, err
				}
			}
		}
	}
	var out []RecipientSeq
	for _, r := range rows {
		if r.GroupID != 0 && moved[groupKey{r.GroupID, r.RecipientID}] {
			out = append(out, r)
		}
	}
	return out, nil
}

// unmarkCursors moves the cursors of group rows back to just before the
// lowest of their rows (never behind what was acknowledged): those
// messages are handed out again. It returns how many cursors moved.
func (t *sqlTx) unmarkCursors(rows []RecipientSeq) (int, error) {
	n := 0
	for k, seq := range groupTargets(rows, func(a, b int64) int64 { return min(a, b) }) {
		m, err := t.exec("UPDATE group_cursors SET sent_seq = "+t.s.d.greatest+"(acked_seq, ?) WHERE group_id = ? AND user_id = ? AND sent_seq >= ?",
			seq-1, k.group, k.user, seq)
		if err != nil {
			return n, err
		}
		n += int(m)
	}
	return n, nil
}

// ackCursors moves the acknowledged part of cursors up to the highest of
// their rows (a member's client takes a group's messages in order: having
// one, it has those before it), and removes the cursors of
// members who left once they have everything. It returns how many of the
// rows had their cursor moved.
func (t *sqlTx) ackCursors(rows []RecipientSeq) (int, error) {
	per := map[groupKey]int{}
	for _, r := range rows {
		per[groupKey{r.GroupID, r.RecipientID}]++
	}
	// One statement per (group, target) for all the members acknowledging
	// up to it (the members of a group at a node acknowledge the same
	// messages): a group message acknowledged by 200 members here is one
	// UPDATE, not 200.
	type gt struct{ group, target int64 }
	batches := map[gt][]any{}
	for k, seq := range groupTargets(rows, func(a, b int64) int64 { return max(a, b) }) {
		batches[gt{k.group, seq}] = append(batches[gt{k.group, seq}], k.user)
	}
	n := 0
	for _, b := range slices.SortedFunc(maps.Keys(batches), func(x, y gt) int {
		return cmp.Or(cmp.Compare(x.group, y.group), cmp.Compare(x.target, y.target))
	}) {
		us := batches[b]
		slices.SortFunc(us, func(x, y any) int { return cmp.Compare(x.(int64), y.(int64)) })
		for chunk := range slices.Chunk(us, inChunk) {
			in := placeholders(len(chunk))
			m, err := t.exec("UPDATE group_cursors SET acked_seq = ?, sent_seq = "+t.s.d.greatest+"(sent_seq, ?)"+
				" WHERE group_id = ? AND acked_seq < ? AND user_id IN ("+in+")", append([]any{b.target, b.target, b.group, b.target}, chunk...)...)
			if err != nil {
				return n, err
			}
			if m == 0 {
				continue
			}
			if int(m) == len(chunk) {
				for _, u := range chunk {
					n += per[groupKey{b.group, u.(int64)}]
				}
			} else {
				// Some were there already: count those now at the target
				// (a race the fence excludes; rare).
				moved, err := t.queryIDs("SELECT user_id FROM group_cursors WHERE group_id = ? AND acked_seq = ? AND user_id IN ("+in+")",
					append([]any{b.group, b.target}, chunk...)...)
				if err != nil {
					return n, err
				}
				for _, u := range moved {
					n += per[groupKey{b.group, u}]
				}
			}
			// Members who left keep their cursor only until they have
			// what was sent while they were members.
			if _, err := t.exec("DELETE FROM group_cursors WHERE group_id = ? AND until_seq IS NOT NULL AND acked_seq >= until_seq"+
				" AND user_id IN ("+in+")", append([]any{b.group}, chunk...)...); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// groupSenders is, for one group, what a batch of its messages holds:
// the lowest and highest sender and the last sequence.
type groupSenders struct{ group, lo, hi, top int64 }

// groupNodesWithPending returns the nodes at which a member of one of
// these groups is present and does not have its messages yet: for each
// group, the presence rows joined to the group's cursors (presence first:
// as many rows as users online, not as members).
func (t *sqlTx) groupNodesWithPending(byGroup map[int64]*groupSenders) ([]int64, error) {
	groups := slices.SortedFunc(maps.Values(byGroup), func(a, b *groupSenders) int { return cmp.Compare(a.group, b.group) })
	var out []int64
	for _, g := range groups {
		// A member who sent all of them has nothing new (their own
		// messages are not shown to them).
		sole := int64(0)
		if g.lo == g.hi {
			sole = g.lo
		}
		ids, err := t.queryIDs("SELECT DISTINCT p.node_id FROM presence p "+t.s.d.straightJoin+" group_cursors c"+
			" WHERE c.group_id = ? AND c.user_id = p.user_id AND c.sent_seq < ? AND c.user_id <> ?", g.group, g.top, sole)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// PruneSlice is what one PruneMessages call did.
type PruneSlice struct {
	// Deleted counts the messages removed.
	Deleted int
	// Next is the sequence to continue from (the last one examined).
	Next int64
	// Done: the slice reached messages newer than the cutoff, or the end;
	// a new round starts from sequence 0 after the prune interval.
	Done bool
}

// pruneOne examines up to limit messages after afterSeq in sequence order
// (a primary-key range: bounded whatever the history's size) and deletes
// those stored before cutoffUS that nobody waits for.
func (t *sqlTx) pruneSlice(cutoffUS, afterSeq int64, limit int) (PruneSlice, error) {
	type cand struct{ seq, stored, group int64 }
	var cands []cand
	err := t.each("SELECT msg_seq, stored_us, COALESCE(to_group_id, 0) FROM messages"+
		" WHERE msg_seq > ? ORDER BY msg_seq LIMIT ?", []any{afterSeq, limit}, func(rows *sql.Rows) error {
		var c cand
		err := rows.Scan(&c.seq, &c.stored, &c.group)
		cands = append(cands, c)
		return err
	})
	if err != nil {
		return PruneSlice{}, err
	}
	res := PruneSlice{Next: afterSeq, Done: len(cands) < limit}
	// Each group's oldest unacknowledged position, once per group.
	lowest := map[int64]int64{}
	var old []any
	for _, c := range cands {
		res.Next = c.seq
		if c.stored >= cutoffUS {
			res.Done = true // messages are stored in sequence order: the rest are newer
			break
		}
		if c.group != 0 {
			low, ok := lowest[c.group]
			if !ok {
				var v sql.NullInt64
				if err := t.queryRow("SELECT MIN(acked_seq) FROM group_cursors WHERE group_id = ?", c.group).Scan(&v); err != nil {
					return PruneSlice{}, err
				}
				low = v.Int64
				if !v.Valid {
					low = 1<<63 - 1
				}
				lowest[c.group] = low
			}
			if c.seq > low {
				continue // a member has not had it yet
			}
		}
		old = append(old, c.seq)
	}
	for chunk := range slices.Chunk(old, inChunk) {
		// A direct message goes once its recipient's cursor has it
		// acknowledged (one acknowledged out of order waits for the
		// cursor: its row in inbox_acks goes with it).
		k, err := t.exec("DELETE FROM messages WHERE msg_seq IN ("+placeholders(len(chunk))+
			") AND NOT EXISTS (SELECT 1 FROM inbox_cursors c WHERE c.user_id = messages.to_user_id AND c.acked_seq < messages.msg_seq)", chunk...)
		if err != nil {
			return PruneSlice{}, err
		}
		res.Deleted += int(k)
	}
	return res, nil
}
