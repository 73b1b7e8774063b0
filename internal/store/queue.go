package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
)

// MaxNameLen bounds user and group names in the store (the chat service
// applies its own, smaller limit).
const MaxNameLen = 128

// inChunk bounds the number of values in one IN (...) list.
const inChunk = 500

// sqlTx implements Tx on a database transaction.
type sqlTx struct {
	ctx context.Context
	tx  *sql.Tx
	s   *sqlStore
	// until: when set (Bound), the server stops statements then.
	until time.Time
	// writes counts the statements run through execResult that succeeded.
	writes int
	// inboxes: users whose inbox cursor this transaction made sure of;
	// once it commits, the store knows them (committed).
	inboxes []int64
	// fetched: what this transaction's last fetch (PendingFor) read of
	// each user's inbox, for the mark (markInbox).
	fetched map[int64]inboxRead
	// inserted: the messages this transaction inserted (sequence →
	// recipient, 0 for a group message) since it last moved a cursor
	// (forgetCursors), for WaitingFor (newWaiting).
	inserted map[int64]int64
}

// forgetCursors is called by every method that moves cursors: what
// WaitingFor knows of the messages inserted before holds no more.
func (t *sqlTx) forgetCursors() { t.inserted = nil }

// committed runs after the transaction committed: the cursors it made
// sure of exist.
func (t *sqlTx) committed() {
	for _, u := range t.inboxes {
		t.s.inboxes.Store(u, struct{}{})
	}
}

func (t *sqlTx) exec(q string, args ...any) (int64, error) {
	res, err := t.execResult(q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execResult is exec returning the driver's result (for LastInsertId).
func (t *sqlTx) execResult(q string, args ...any) (sql.Result, error) {
	if t.s.inspect != nil {
		t.s.inspect(t, q, args)
	}
	res, err := t.tx.ExecContext(t.ctx, t.bound(q), args...)
	if err == nil {
		t.writes++
	}
	return res, t.overBudget(err)
}

func (t *sqlTx) query(q string, args ...any) (*sql.Rows, error) {
	if t.s.inspect != nil {
		t.s.inspect(t, q, args)
	}
	rows, err := t.tx.QueryContext(t.ctx, t.bound(q), args...)
	return rows, t.overBudget(err)
}

func (t *sqlTx) Bound(until time.Time) func() {
	if !t.s.statementTime {
		return func() {}
	}
	t.until = until
	return func() { t.until = time.Time{} }
}

// overBudget marks err as ErrOverBudget if the server stopped the
// statement at Bound's deadline.
func (t *sqlTx) overBudget(err error) error {
	var me *mysql.MySQLError
	if err != nil && !t.until.IsZero() && errors.As(err, &me) && me.Number == erStatementTimeout {
		return fmt.Errorf("%w: %v", ErrOverBudget, err)
	}
	return err
}

// erStatementTimeout is MariaDB's error for a statement stopped by
// max_statement_time (ER_STATEMENT_TIMEOUT).
const erStatementTimeout = 1969

func (t *sqlTx) queryRow(q string, args ...any) *sql.Row {
	if t.s.inspect != nil {
		t.s.inspect(t, q, args)
	}
	return t.tx.QueryRowContext(t.ctx, t.bound(q), args...)
}

// bound makes the server stop the statement when the transaction's
// context expires. The driver gives up on a statement at the deadline and
// drops the connection, but MariaDB would go on running it, holding its
// locks (the token fence's row, in a visit) until it finished; with
// max_statement_time it stops at the deadline and the transaction rolls
// back. SQLite needs nothing: the driver interrupts the statement.
func (t *sqlTx) bound(q string) string {
	if !t.until.IsZero() {
		if d, ok := t.ctx.Deadline(); !ok || t.until.Before(d) {
			return t.s.boundUntil(t.until, q)
		}
	}
	return t.s.boundStatement(t.ctx, q)
}

func checkName(kind, name string) error {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxNameLen {
		return fmt.Errorf("%w: %s name %q must be 1-%d characters of valid UTF-8", ErrInvalid, kind, name, MaxNameLen)
	}
	return nil
}

func (t *sqlTx) EnsureUser(name string) (User, bool, error) {
	if err := checkName("user", name); err != nil {
		return User{}, false, err
	}
	k, err := t.exec(t.s.d.insertIgnore+" users (name, created_us) VALUES (?, ?)"+t.s.d.onConflictIgnore, name, t.s.nowUS())
	if err != nil {
		return User{}, false, fmt.Errorf("store: create user: %w", err)
	}
	u, err := t.UserByName(name)
	return u, k > 0, err
}

func (t *sqlTx) UserByName(name string) (User, error) {
	var u User
	var hash, away sql.NullString
	var us, awayUS int64
	err := t.queryRow("SELECT user_id, name, password_hash, created_us, away_message, away_us FROM users WHERE name = ?", name).
		Scan(&u.ID, &u.Name, &hash, &us, &away, &awayUS)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("%w: user %q", ErrNotFound, name)
	}
	if err != nil {
		return User{}, fmt.Errorf("store: read user: %w", err)
	}
	u.PasswordHash = hash.String
	u.CreatedAt = time.UnixMicro(us).UTC()
	u.Away = awayOf(away, awayUS)
	return u, nil
}

func (t *sqlTx) ClaimPassword(userID int64, hash string) (bool, error) {
	if hash == "" {
		return false, fmt.Errorf("%w: empty password hash", ErrInvalid)
	}
	k, err := t.exec("UPDATE users SET password_hash = ? WHERE user_id = ? AND password_hash IS NULL", hash, userID)
	if err != nil {
		return false, fmt.Errorf("store: claim password: %w", err)
	}
	return k > 0, nil
}

func (t *sqlTx) EnsureGroup(name string) (Group, bool, error) {
	if err := checkName("group", name); err != nil {
		return Group{}, false, err
	}
	k, err := t.exec(t.s.d.insertIgnore+" chat_groups (name, created_us) VALUES (?, ?)"+t.s.d.onConflictIgnore, name, t.s.nowUS())
	if err != nil {
		return Group{}, false, fmt.Errorf("store: create group: %w", err)
	}
	g, err := t.GroupByName(name)
	return g, k > 0, err
}

func (t *sqlTx) GroupByName(name string) (Group, error) {
	var g Group
	var us int64
	var by sql.NullInt64
	err := t.queryRow("SELECT group_id, name, created_us, invite_only, created_by FROM chat_groups WHERE name = ?", name).
		Scan(&g.ID, &g.Name, &us, &g.InviteOnly, &by)
	if errors.Is(err, sql.ErrNoRows) {
		return Group{}, fmt.Errorf("%w: group %q", ErrNotFound, name)
	}
	if err != nil {
		return Group{}, fmt.Errorf("store: read group: %w", err)
	}
	g.CreatedAt = time.UnixMicro(us).UTC()
	g.CreatedBy = by.Int64
	return g, nil
}

func (t *sqlTx) JoinGroup(groupID, userID int64) (bool, error) {
	// The new member's cursor starts after the group's newest message. The
	// group row's lock, taken first (before the membership's foreign key
	// check takes a shared one), orders the join against a visit storing to
	// the group: the member gets exactly what is stored after the join.
	var last int64
	if err := t.queryRow("SELECT last_seq FROM chat_groups WHERE group_id = ?"+t.s.d.forUpdate, groupID).Scan(&last); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("%w: group %d", ErrNotFound, groupID)
		}
		return false, fmt.Errorf("store: join group: %w", err)
	}
	// joined_seq: the member's group history starts after the newest
	// message stored so far.
	k, err := t.exec(t.s.d.insertIgnore+" group_members (group_id, user_id, joined_us, joined_seq) "+
		"SELECT ?, ?, ?, COALESCE((SELECT MAX(msg_seq) FROM messages), 0)"+t.s.d.fromDual+t.s.d.onConflictIgnore,
		groupID, userID, t.s.nowUS())
	if err != nil {
		return false, fmt.Errorf("store: join group: %w", err)
	}
	if _, err := t.exec("DELETE FROM group_invites WHERE group_id = ? AND user_id = ?", groupID, userID); err != nil {
		return false, fmt.Errorf("store: join group: use the invitation: %w", err)
	}
	if k == 0 {
		return false, nil
	}
	// A member who left and comes back before having everything sent while
	// a member keeps the cursor: nothing sent to them is lost (they also
	// get what was sent while away).
	m, err := t.exec("UPDATE group_cursors SET until_seq = NULL WHERE group_id = ? AND user_id = ?", groupID, userID)
	if err != nil {
		return false, fmt.Errorf("store: join group: %w", err)
	}
	if m == 0 {
		if _, err := t.exec("INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq) VALUES (?, ?, ?, ?)",
			groupID, userID, last, last); err != nil {
			return false, fmt.Errorf("store: join group: %w", err)
		}
	}
	return true, nil
}

func (t *sqlTx) LeaveGroup(groupID, userID int64) (bool, error) {
	k, err := t.exec("DELETE FROM group_members WHERE group_id = ? AND user_id = ?", groupID, userID)
	if err != nil {
		return false, fmt.Errorf("store: leave group: %w", err)
	}
	if k == 0 {
		return false, nil
	}
	// What was sent while a member still reaches them; the cursor goes
	// once they have it.
	if _, err := t.exec("UPDATE group_cursors SET until_seq = (SELECT g.last_seq FROM chat_groups g WHERE g.group_id = ?)"+
		" WHERE group_id = ? AND user_id = ?", groupID, groupID, userID); err != nil {
		return false, fmt.Errorf("store: leave group: %w", err)
	}
	if _, err := t.exec("DELETE FROM group_cursors WHERE group_id = ? AND user_id = ? AND acked_seq >= until_seq",
		groupID, userID); err != nil {
		return false, fmt.Errorf("store: leave group: %w", err)
	}
	return true, nil
}

func (t *sqlTx) GroupMembers(groupID int64) ([]int64, error) {
	out, err := t.queryIDs("SELECT user_id FROM group_members WHERE group_id = ? ORDER BY user_id", groupID)
	if err != nil {
		return nil, fmt.Errorf("store: group members: %w", err)
	}
	return out, nil
}

func (t *sqlTx) queryGroups(op, q string, args ...any) ([]Group, error) {
	var out []Group
	err := t.each(q, args, func(rows *sql.Rows) error {
		var g Group
		var us int64
		var by sql.NullInt64
		if err := rows.Scan(&g.ID, &g.Name, &us, &g.InviteOnly, &by, &g.Members); err != nil {
			return err
		}
		g.CreatedAt = time.UnixMicro(us).UTC()
		g.CreatedBy = by.Int64
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	return out, nil
}

const groupCols = "SELECT g.group_id, g.name, g.created_us, g.invite_only, g.created_by, " +
	"(SELECT COUNT(*) FROM group_members c WHERE c.group_id = g.group_id) FROM chat_groups g"

func (t *sqlTx) UserGroups(userID int64) ([]Group, error) {
	return t.queryGroups("user groups", groupCols+
		" JOIN group_members m ON m.group_id = g.group_id WHERE m.user_id = ? ORDER BY g.name", userID)
}

// MaxGroupsPage bounds one page of ListGroups; a call may ask for one
// group more, to learn whether another page follows.
const MaxGroupsPage = 1000

func (t *sqlTx) ListGroups(after string, limit int) ([]Group, error) {
	if limit <= 0 || limit > MaxGroupsPage+1 {
		return nil, fmt.Errorf("%w: groups page of %d (1-%d)", ErrInvalid, limit, MaxGroupsPage+1)
	}
	return t.queryGroups("list groups", groupCols+" WHERE g.name > ? ORDER BY g.name LIMIT ?", after, limit)
}

func (t *sqlTx) SetPresence(userID, nodeID int64) error {
	if _, err := t.exec(t.s.d.insertIgnore+" presence (user_id, node_id, since_us) VALUES (?, ?, ?)"+t.s.d.onConflictIgnore,
		userID, nodeID, t.s.nowUS()); err != nil {
		return fmt.Errorf("store: set presence: %w", err)
	}
	p, err := t.PresenceOf(userID)
	if err != nil {
		return err
	}
	if p.NodeID != nodeID {
		return fmt.Errorf("%w: %q is logged in at node %d", ErrUserOnline, p.UserName, p.NodeID)
	}
	return nil
}

func (t *sqlTx) ClearPresence(userID, nodeID int64) (bool, error) {
	k, err := t.exec("DELETE FROM presence WHERE user_id = ? AND node_id = ?", userID, nodeID)
	if err != nil {
		return false, fmt.Errorf("store: clear presence: %w", err)
	}
	return k > 0, nil
}

func (t *sqlTx) ClearNodePresence(nodeID int64) (int, error) {
	k, err := t.exec("DELETE FROM presence WHERE node_id = ?", nodeID)
	if err != nil {
		return 0, fmt.Errorf("store: clear node presence: %w", err)
	}
	return int(k), nil
}

func (t *sqlTx) PresenceOf(userID int64) (Presence, error) {
	var p Presence
	var us int64
	err := t.queryRow(
		"SELECT p.user_id, u.name, p.node_id, p.since_us FROM presence p JOIN users u ON u.user_id = p.user_id WHERE p.user_id = ?",
		userID).Scan(&p.UserID, &p.UserName, &p.NodeID, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return Presence{}, fmt.Errorf("%w: user %d is not online", ErrNotFound, userID)
	}
	if err != nil {
		return Presence{}, fmt.Errorf("store: read presence: %w", err)
	}
	p.Since = time.UnixMicro(us).UTC()
	return p, nil
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func checkMessage(m NewMessage) error {
	switch {
	case m.ID == "" || len(m.ID) > 36:
		return fmt.Errorf("%w: message id %q must be 1-36 characters", ErrInvalid, m.ID)
	case (m.ToUserID == 0) == (m.ToGroupID == 0):
		return fmt.Errorf("%w: message %s needs exactly one of a user and a group as destination", ErrInvalid, m.ID)
	case m.SenderID == 0:
		return fmt.Errorf("%w: message %s has no sender", ErrInvalid, m.ID)
	case !utf8.ValidString(m.Content):
		return fmt.Errorf("%w: message %s content is not valid UTF-8", ErrInvalid, m.ID)
	}
	return nil
}

func (t *sqlTx) InsertMessage(m NewMessage, recipients []int64) (int64, bool, error) {
	if err := checkMessage(m); err != nil {
		return 0, false, err
	}
	if err := t.lockGroups([]NewMessage{m}, []int{0}); err != nil {
		return 0, false, err
	}
	k, err := t.exec(t.s.d.insertIgnore+
		" messages (msg_id, sender_id, to_user_id, to_group_id, content, sent_us, stored_us, node_id)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?)"+t.s.d.onConflictIgnore,
		m.ID, m.SenderID, nullID(m.ToUserID), nullID(m.ToGroupID), m.Content, m.SentAt.UnixMicro(), t.s.nowUS(), m.NodeID)
	if err != nil {
		return 0, false, fmt.Errorf("store: insert message: %w", err)
	}
	var seq int64
	if err := t.queryRow("SELECT msg_seq FROM messages WHERE msg_id = ?", m.ID).Scan(&seq); err != nil {
		return 0, false, fmt.Errorf("store: insert message: %w", err)
	}
	if k == 0 {
		return seq, true, nil
	}
	if m.ToGroupID != 0 {
		if err := t.advanceGroups(map[int64]int64{m.ToGroupID: seq}); err != nil {
			return 0, false, err
		}
		return seq, false, nil
	}
	if err := t.ensureInboxes([]int64{m.ToUserID}); err != nil {
		return 0, false, err
	}
	return seq, false, nil
}

// lockGroups locks the rows of the groups that new messages go to, before
// the messages are inserted: a join (which locks the group's row first too)
// and a store to the group then take their locks in one order.
func (t *sqlTx) lockGroups(ms []NewMessage, fresh []int) error {
	var groups []int64
	for _, i := range fresh {
		if g := ms[i].ToGroupID; g != 0 {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 || t.s.d.forUpdate == "" {
		return nil
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	for chunk := range slices.Chunk(groups, inChunk) {
		if _, err := t.queryIDs("SELECT group_id FROM chat_groups WHERE group_id IN ("+placeholders(len(chunk))+") ORDER BY group_id"+
			t.s.d.forUpdate, anySlice(chunk)...); err != nil {
			return fmt.Errorf("store: group timeline: %w", err)
		}
	}
	return nil
}

// advanceGroups records the newest message of each group (one row per
// group, whatever its size: the members' cursors do the rest).
func (t *sqlTx) advanceGroups(last map[int64]int64) error {
	for g, seq := range last {
		if _, err := t.exec("UPDATE chat_groups SET last_seq = ? WHERE group_id = ? AND last_seq < ?", seq, g, seq); err != nil {
			return fmt.Errorf("store: group timeline: %w", err)
		}
	}
	return nil
}

// msgChunk bounds the rows of one multi-row message insert: a busy
// visit's batch (a few hundred messages) is one statement, and one of the
// largest (1,000) two. At most 4 KB of text a message, twice that once
// escaped into the statement: 4 MB, under MariaDB's default packet limit
// of 16 MB.
const msgChunk = 500

func (t *sqlTx) InsertMessages(ms []NewMessage, recipients [][]int64) ([]Inserted, error) {
	if len(recipients) != len(ms) {
		return nil, fmt.Errorf("%w: %d messages, %d recipient lists", ErrInvalid, len(ms), len(recipients))
	}
	for _, m := range ms {
		if err := checkMessage(m); err != nil {
			return nil, err
		}
	}
	out := make([]Inserted, len(ms))
	once := firstOfEachID(ms, out)
	if err := t.lockGroups(ms, once); err != nil {
		return nil, err
	}
	stored, fresh, err := t.insertOnce(ms, once, out)
	if err != nil {
		return nil, err
	}
	var inboxes []int64
	last := map[int64]int64{}
	if t.inserted == nil {
		t.inserted = map[int64]int64{}
	}
	for _, i := range fresh {
		seq := stored[ms[i].ID].seq
		t.inserted[seq] = ms[i].ToUserID // 0: a group message
		if g := ms[i].ToGroupID; g != 0 {
			last[g] = max(last[g], seq)
			continue
		}
		inboxes = append(inboxes, ms[i].ToUserID)
	}
	if err := t.advanceGroups(last); err != nil {
		return nil, err
	}
	if err := t.ensureInboxes(inboxes); err != nil {
		return nil, err
	}
	for i, m := range ms {
		r := stored[m.ID]
		out[i].Seq, out[i].SentAt = r.seq, time.UnixMicro(r.sentUS).UTC()
	}
	return out, nil
}

// firstOfEachID returns the indexes of ms to store: each id once, in
// order (a later copy in the batch is a resend, marked Dup in out).
func firstOfEachID(ms []NewMessage, out []Inserted) []int {
	var once []int
	seen := map[string]bool{}
	for i, m := range ms {
		if seen[m.ID] {
			out[i].Dup = true
			continue
		}
		seen[m.ID] = true
		once = append(once, i)
	}
	return once
}

// insertOnce stores the messages ms[once], msgChunk a statement, and
// returns every id's stored sequence and time with the indexes of the
// messages new to the store (those already stored are marked Dup in out).
func (t *sqlTx) insertOnce(ms []NewMessage, once []int, out []Inserted) (map[string]storedRef, []int, error) {
	now := t.s.nowUS()
	stored := map[string]storedRef{}
	var fresh []int
	for chunk := range slices.Chunk(once, msgChunk) {
		if t.s.returning {
			// A new message as a rule: inserted, its sequence returned, in
			// one statement. A stored one among them fails the statement
			// (and only the statement): the chunk goes the long way.
			refs, err := t.insertReturning(ms, chunk, now)
			if err == nil {
				maps.Copy(stored, refs)
				fresh = append(fresh, chunk...)
				continue
			}
			if !t.s.isDuplicate(err) {
				return nil, nil, fmt.Errorf("store: insert messages: %w", err)
			}
		}
		added, err := t.insertNew(ms, chunk, now, stored, out)
		if err != nil {
			return nil, nil, err
		}
		fresh = append(fresh, added...)
	}
	return stored, fresh, nil
}

// messageValues is the multi-row INSERT of the messages at these indexes.
func messageValues(ms []NewMessage, idx []int, now int64) (string, []any) {
	var b strings.Builder
	b.WriteString("INSERT INTO messages (msg_id, sender_id, to_user_id, to_group_id, content, sent_us, stored_us, node_id) VALUES ")
	args := make([]any, 0, 8*len(idx))
	for k, i := range idx {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		m := ms[i]
		args = append(args, m.ID, m.SenderID, nullID(m.ToUserID), nullID(m.ToGroupID), m.Content, m.SentAt.UnixMicro(), now, m.NodeID)
	}
	return b.String(), args
}

// insertReturning inserts the messages at idx, none of them stored yet,
// and returns their sequences from the insert itself (RETURNING).
func (t *sqlTx) insertReturning(ms []NewMessage, idx []int, now int64) (map[string]storedRef, error) {
	q, args := messageValues(ms, idx, now)
	sent := make(map[string]int64, len(idx))
	for _, i := range idx {
		sent[ms[i].ID] = ms[i].SentAt.UnixMicro()
	}
	refs := make(map[string]storedRef, len(idx))
	err := t.each(q+" RETURNING msg_seq, msg_id", args, func(rows *sql.Rows) error {
		var seq int64
		var id string
		if err := rows.Scan(&seq, &id); err != nil {
			return err
		}
		refs[id] = storedRef{seq: seq, sentUS: sent[id]}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(refs) != len(idx) {
		return nil, fmt.Errorf("%d messages inserted, %d sequences returned", len(idx), len(refs))
	}
	return refs, nil
}

// insertNew stores those of the messages at idx that are not stored yet:
// the stored ones are marked Dup in out; stored gets every one's sequence
// and acceptance time. It returns the indexes it inserted.
func (t *sqlTx) insertNew(ms []NewMessage, idx []int, now int64, stored map[string]storedRef, out []Inserted) ([]int, error) {
	have, err := t.storedRefs(idsAt(ms, idx))
	if err != nil {
		return nil, err
	}
	maps.Copy(stored, have)
	var fresh []int
	for _, i := range idx {
		if _, ok := have[ms[i].ID]; ok {
			out[i].Dup = true
			continue
		}
		fresh = append(fresh, i)
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	q, args := messageValues(ms, fresh, now)
	res, err := t.execResult(q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: insert messages: %w", err)
	}
	if len(fresh) == 1 {
		// One row: its sequence is the insert's id, on every server
		// and whatever its auto-increment settings.
		if id, err := res.LastInsertId(); err == nil && id > 0 {
			m := ms[fresh[0]]
			stored[m.ID] = storedRef{seq: id, sentUS: m.SentAt.UnixMicro()}
			return fresh, nil
		}
	}
	refs, err := t.storedRefs(idsAt(ms, fresh))
	if err != nil {
		return nil, err
	}
	maps.Copy(stored, refs)
	return fresh, nil
}

// idsAt returns the ids of the messages at these indexes.
func idsAt(ms []NewMessage, idx []int) []string {
	ids := make([]string, len(idx))
	for k, i := range idx {
		ids[k] = ms[i].ID
	}
	return ids
}

// storedRef is a stored message's sequence and acceptance time.
type storedRef struct{ seq, sentUS int64 }

// storedRefs maps the stored ones of these message ids to their sequence
// and acceptance time.
func (t *sqlTx) storedRefs(ids []string) (map[string]storedRef, error) {
	out := map[string]storedRef{}
	for chunk := range slices.Chunk(ids, inChunk) {
		err := t.each("SELECT msg_id, msg_seq, sent_us FROM messages WHERE msg_id IN ("+placeholders(len(chunk))+")", anySlice(chunk),
			func(rows *sql.Rows) error {
				var id string
				var r storedRef
				err := rows.Scan(&id, &r.seq, &r.sentUS)
				out[id] = r
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("store: message sequences: %w", err)
		}
	}
	return out, nil
}

// seqsOf maps the stored ones of these message ids to their sequence.
func (t *sqlTx) seqsOf(ids []string) (map[string]int64, error) {
	refs, err := t.storedRefs(ids)
	out := make(map[string]int64, len(refs))
	for id, r := range refs {
		out[id] = r.seq
	}
	return out, err
}

const messageCols = "m.msg_seq, m.msg_id, s.name, tu.name, g.name, m.content, m.sent_us, m.stored_us"

// messageJoins joins the names to messages m, in that order: the messages
// are the few rows a statement picked, the users and groups are looked up
// by key for each. The order is forced: after a crash early in a store's
// life, InnoDB's statistics may say users holds two rows, and the
// optimizer then scans every user and joins the messages to each (a
// block nested loop of users × messages that ran past the visit's
// budget in a fault-injection run).
func (t *sqlTx) messageJoins() string {
	return " " + t.s.d.straightJoin + " users s ON s.user_id = m.sender_id" +
		" LEFT JOIN users tu ON tu.user_id = m.to_user_id" +
		" LEFT JOIN chat_groups g ON g.group_id = m.to_group_id"
}

// scanMessage reads messageCols, after any leading columns in dest.
func scanMessage(rows *sql.Rows, m *Message, lead ...any) error {
	var toUser, toGroup sql.NullString
	var sent, stored int64
	dest := append(lead, &m.Seq, &m.ID, &m.Sender, &toUser, &toGroup, &m.Content, &sent, &stored)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	m.ToUser, m.ToGroup = toUser.String, toGroup.String
	m.SentAt, m.StoredAt = time.UnixMicro(sent).UTC(), time.UnixMicro(stored).UTC()
	return nil
}

func (t *sqlTx) PendingForNode(nodeID int64, limit int) ([]Delivery, error) {
	return t.PendingForNodeFair(nodeID, limit, limit)
}

func (t *sqlTx) PendingForNodeFair(nodeID int64, perRecipient, limit int) ([]Delivery, error) {
	if limit <= 0 || perRecipient <= 0 {
		return nil, fmt.Errorf("%w: limit %d, per recipient %d", ErrInvalid, limit, perRecipient)
	}
	users, err := t.queryIDs("SELECT user_id FROM presence WHERE node_id = ? ORDER BY user_id LIMIT ?", nodeID, MaxPendingUsers)
	if err != nil {
		return nil, fmt.Errorf("store: pending messages: %w", err)
	}
	return t.PendingFor(nodeID, users, perRecipient, limit)
}

func (t *sqlTx) WaitingFor(seqs []int64, maxUsers int) ([]Waiting, error) {
	if maxUsers <= 0 {
		return nil, fmt.Errorf("%w: at most %d users", ErrInvalid, maxUsers)
	}
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	w := waitingAt{maxUsers: maxUsers, at: map[int64]*Waiting{}, byGroup: map[int64]*groupSenders{}}
	// Direct messages this transaction inserted wait for their recipients
	// (newWaiting): only where those are is read. The rest (resent ones,
	// deliveries made pending again) are read with their cursors.
	users, rest, groups := t.newWaiting(seqs)
	for i := 0; i < max(len(users), len(rest), len(groups)); i += inChunk {
		// One statement: the recipients of the new direct messages and
		// where they are (presence, by key); the other direct messages'
		// recipients who do not have them yet and where they are (the
		// messages, their recipients' cursors and presence, by key:
		// whatever the history); then per group among the messages its
		// senders and last sequence.
		var parts []string
		var args []any
		if u := window(users, i); len(u) > 0 {
			parts = append(parts, "SELECT 0, p.node_id, p.user_id, 0, 0 FROM presence p WHERE p.user_id IN ("+placeholders(len(u))+")")
			args = append(args, anySlice(u)...)
		}
		if r := window(rest, i); len(r) > 0 {
			parts = append(parts, "SELECT DISTINCT 0, p.node_id, m.to_user_id, 0, 0 FROM messages m "+t.s.d.straightJoin+" inbox_cursors c"+
				" ON c.user_id = m.to_user_id "+t.s.d.straightJoin+" presence p ON p.user_id = m.to_user_id"+
				" WHERE m.msg_seq IN ("+placeholders(len(r))+") AND m.msg_seq > c.sent_seq"+
				" AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = m.to_user_id AND a.msg_seq = m.msg_seq)")
			args = append(args, anySlice(r)...)
		}
		if g := window(groups, i); len(g) > 0 {
			parts = append(parts, "SELECT 1, to_group_id, MIN(sender_id), MAX(sender_id), MAX(msg_seq) FROM messages"+
				" WHERE msg_seq IN ("+placeholders(len(g))+") AND to_group_id IS NOT NULL GROUP BY to_group_id")
			args = append(args, anySlice(g)...)
		}
		if err := t.each(strings.Join(parts, " UNION ALL "), args, w.scan); err != nil {
			return nil, fmt.Errorf("store: nodes with pending messages: %w", err)
		}
	}
	groupNodes, err := t.groupNodesWithPending(w.byGroup)
	if err != nil {
		return nil, fmt.Errorf("store: nodes with pending messages: %w", err)
	}
	for _, n := range groupNodes {
		at := w.node(n)
		at.All, at.Users = true, nil
	}
	out := make([]Waiting, 0, len(w.at))
	for _, id := range slices.Sorted(maps.Keys(w.at)) {
		at := w.at[id]
		slices.Sort(at.Users)
		at.Users = slices.Compact(at.Users)
		out = append(out, *at)
	}
	return out, nil
}

// newWaiting splits sorted seqs for WaitingFor: the recipients of the
// direct messages this transaction inserted (t.inserted), each once; the
// other sequences (rest), read with their recipients' cursors; and those
// that may be group messages (the inserted group messages and the rest).
//
// An inserted direct message waits for its recipient: its sequence is
// above every cursor (a cursor stands on a message stored before, or
// moves back), nothing can acknowledge it out of order before it is
// handed over, and its recipient's cursor exists (InsertMessages made sure
// of it). Only this transaction's marks and acknowledgements could move the
// cursor past it: they forget what was inserted (t.inserted = nil).
func (t *sqlTx) newWaiting(seqs []int64) (users, rest, groups []int64) {
	for _, s := range seqs {
		to, ok := t.inserted[s]
		switch {
		case !ok:
			rest = append(rest, s)
			groups = append(groups, s)
		case to == 0:
			groups = append(groups, s)
		default:
			users = append(users, to)
		}
	}
	slices.Sort(users)
	return slices.Compact(users), rest, groups
}

// window returns the inChunk values of s from i on.
func window(s []int64, i int) []int64 {
	if i >= len(s) {
		return nil
	}
	return s[i:min(len(s), i+inChunk)]
}

// waitingAt gathers WaitingFor's rows: the nodes where direct messages'
// recipients wait (their users, or All past maxUsers), and per group the
// senders and last sequence among the messages.
type waitingAt struct {
	maxUsers int
	at       map[int64]*Waiting
	byGroup  map[int64]*groupSenders
}

// node returns the entry of node id, made on first use.
func (w *waitingAt) node(id int64) *Waiting {
	if w.at[id] == nil {
		w.at[id] = &Waiting{Node: id}
	}
	return w.at[id]
}

// scan takes one row: kind 0 is (node, user) of a waiting recipient, kind
// 1 (group, lowest sender, highest sender, last sequence).
func (w *waitingAt) scan(rows *sql.Rows) error {
	var kind, a, b, c, d int64
	if err := rows.Scan(&kind, &a, &b, &c, &d); err != nil {
		return err
	}
	if kind == 1 {
		g := groupSenders{group: a, lo: b, hi: c, top: d}
		if o := w.byGroup[g.group]; o != nil {
			o.lo, o.hi, o.top = min(o.lo, g.lo), max(o.hi, g.hi), max(o.top, g.top)
		} else {
			w.byGroup[g.group] = &g
		}
		return nil
	}
	at := w.node(a)
	if !at.All {
		at.Users = append(at.Users, b)
	}
	if len(at.Users) > w.maxUsers {
		at.All, at.Users = true, nil
	}
	return nil
}

func anySlice[T any](in []T) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}

func (t *sqlTx) MarkDelivered(recipientID int64, seqs []int64) error {
	t.forgetCursors()
	rows, err := t.groupRowsOf(recipientID, seqs)
	if err != nil {
		return fmt.Errorf("store: mark delivered: %w", err)
	}
	if _, err := t.markCursors(rows); err != nil {
		return fmt.Errorf("store: mark delivered: %w", err)
	}
	group := map[int64]bool{}
	for _, r := range rows {
		group[r.Seq] = true
	}
	var direct []RecipientSeq
	for _, seq := range seqs {
		if !group[seq] {
			direct = append(direct, RecipientSeq{RecipientID: recipientID, Seq: seq})
		}
	}
	if len(direct) == 0 {
		return nil
	}
	var sent, newest int64
	if err := t.queryRow("SELECT sent_seq, "+t.s.d.greatest+"(sent_us, back_us) FROM inbox_cursors WHERE user_id = ?", recipientID).
		Scan(&sent, &newest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: mark delivered: %w", err)
	}
	direct = slices.DeleteFunc(direct, func(r RecipientSeq) bool { return r.Seq <= sent })
	_, err = t.markInbox(max(t.s.nowUS(), newest+1), direct, map[int64]int64{recipientID: sent})
	return err
}

// groupRowsOf returns the cursor positions of the group messages among
// seqs, for the recipient.
func (t *sqlTx) groupRowsOf(recipientID int64, seqs []int64) ([]RecipientSeq, error) {
	var rows []RecipientSeq
	for chunk := range slices.Chunk(seqs, inChunk) {
		err := t.each("SELECT msg_seq, to_group_id FROM messages WHERE to_group_id IS NOT NULL AND msg_seq IN ("+
			placeholders(len(chunk))+")", anySlice(chunk), func(rs *sql.Rows) error {
			r := RecipientSeq{RecipientID: recipientID}
			err := rs.Scan(&r.Seq, &r.GroupID)
			rows = append(rows, r)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// rowChunk bounds the users of one statement on inbox cursors (SQLite
// limits the depth of an expression tree: at most one OR term or CASE
// branch per user).
const rowChunk = 200

// placeholders returns "?, ?, ..." with n question marks, for an IN list.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// each runs q and calls scan for each row of its result; the rows are
// closed whatever happens.
func (t *sqlTx) each(q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := t.query(q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return t.overBudget(rows.Err())
}

// queryIDs runs q and returns its one integer column.
func (t *sqlTx) queryIDs(q string, args ...any) ([]int64, error) {
	var out []int64
	err := t.each(q, args, func(rows *sql.Rows) error {
		var id int64
		err := rows.Scan(&id)
		out = append(out, id)
		return err
	})
	return out, err
}

func (t *sqlTx) MarkDeliveredRows(nodeID int64, rows []RecipientSeq) ([]RecipientSeq, int64, error) {
	t.forgetCursors()
	stamp := t.s.nowUS()
	if len(rows) == 0 {
		return nil, stamp, nil
	}
	if t.until.IsZero() {
		return t.markDeliveredRows(nodeID, stamp, rows)
	}
	if direct, group := splitRows(rows); len(group) == 0 && len(inboxSpans(direct)) <= rowChunk {
		// One update at most (direct rows, one chunk of users): the server
		// stops it whole, and nothing needs undoing. Only a look-up after it can be
		// stopped with the update done: then the visit fails (and rolls it
		// back) instead of dropping the fetch.
		before := t.writes
		marked, stamp, err := t.markDeliveredRows(nodeID, stamp, rows)
		if errors.Is(err, ErrOverBudget) && t.writes > before {
			return nil, 0, fmt.Errorf("store: mark delivered: stopped after its update: %v", err)
		}
		return marked, stamp, err
	}
	// Bound, several updates: its statements (presence, cursors, rows) are
	// undone together if the server stops one of them, so that no cursor
	// moves for rows that were not marked.
	if _, err := t.exec("SAVEPOINT mark_delivered"); err != nil {
		return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
	}
	marked, stamp, err := t.markDeliveredRows(nodeID, stamp, rows)
	if errors.Is(err, ErrOverBudget) {
		// Its own statement unbounded: the budget has run out.
		if _, rerr := t.tx.ExecContext(t.ctx, "ROLLBACK TO SAVEPOINT mark_delivered"); rerr != nil {
			return nil, 0, fmt.Errorf("store: mark delivered: %w (undoing it: %v)", err, rerr)
		}
	}
	return marked, stamp, err
}

func (t *sqlTx) markDeliveredRows(nodeID, stamp int64, rows []RecipientSeq) ([]RecipientSeq, int64, error) {
	var users []any
	seen := map[int64]bool{}
	for _, r := range rows {
		if !seen[r.RecipientID] {
			seen[r.RecipientID] = true
			users = append(users, r.RecipientID)
		}
	}
	present, newest, err := t.presentHere(nodeID, users)
	if err != nil {
		return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
	}
	// Newer than every stamp on the users' inbox cursors: marks on one
	// cursor are ordered, whatever the nodes' clocks.
	stamp = max(stamp, newest+1)
	want := slices.DeleteFunc(slices.Clone(rows), func(r RecipientSeq) bool {
		sent, ok := present[r.RecipientID]
		// A direct message the cursor has passed is delivered already.
		return !ok || (r.GroupID == 0 && r.Seq <= sent)
	})
	want, groupRows := splitRows(want)
	cursors, err := t.markCursors(groupRows)
	if err != nil {
		return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
	}
	var direct []RecipientSeq
	if len(want) > 0 {
		if direct, err = t.markInbox(stamp, want, present); err != nil {
			return nil, 0, err
		}
	}
	marked := append(direct, cursors...)
	if len(marked) == 0 {
		return nil, stamp, nil
	}
	// In the given order.
	ok := make(map[RecipientSeq]bool, len(marked))
	for _, r := range marked {
		ok[r] = true
	}
	return slices.DeleteFunc(slices.Clone(rows), func(r RecipientSeq) bool { return !ok[r] }), stamp, nil
}

// presentHere returns which of users are present at nodeID now (read
// committed: the latest commit), with their presence rows locked until the
// transaction ends, each with their inbox cursor's sent_seq, and the newest
// stamp on those cursors (the cursors are read by subqueries, which the
// locking read does not lock).
func (t *sqlTx) presentHere(nodeID int64, users []any) (map[int64]int64, int64, error) {
	present := map[int64]int64{}
	var newest int64
	for chunk := range slices.Chunk(users, inChunk) {
		q := "SELECT p.user_id, COALESCE((SELECT c.sent_seq FROM inbox_cursors c WHERE c.user_id = p.user_id), 0)," +
			" COALESCE((SELECT " + t.s.d.greatest + "(c.sent_us, c.back_us) FROM inbox_cursors c" +
			" WHERE c.user_id = p.user_id), 0) FROM presence p WHERE p.node_id = ? AND p.user_id IN (" +
			placeholders(len(chunk)) + ")" + t.s.d.lockShare
		err := t.each(q, append([]any{nodeID}, chunk...), func(rows *sql.Rows) error {
			var id, sent, us int64
			err := rows.Scan(&id, &sent, &us)
			present[id], newest = sent, max(newest, us)
			return err
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return present, newest, nil
}

func (t *sqlTx) UnmarkDelivered(stamp int64, rows []RecipientSeq) (int, error) {
	t.forgetCursors()
	direct, group := splitRows(rows)
	k, err := t.unmarkInbox(stamp, direct)
	if err != nil {
		return k, err
	}
	m, err := t.unmarkCursors(group)
	if err != nil {
		return k + m, fmt.Errorf("store: unmark delivered: %w", err)
	}
	return k + m, nil
}

func (t *sqlTx) AckRows(rows []RecipientSeq) (int, error) {
	t.forgetCursors()
	direct, group := splitRows(rows)
	k, err := t.ackInbox(directByUser(direct))
	if err != nil {
		return k, err
	}
	m, err := t.ackCursors(group)
	if err != nil {
		return k + m, fmt.Errorf("store: ack: %w", err)
	}
	return k + m, nil
}

func (t *sqlTx) ResetDelivered(recipientID int64) (int, error) {
	t.forgetCursors()
	k, err := t.resetInbox(recipientID)
	if err != nil {
		return 0, err
	}
	m, err := t.exec("UPDATE group_cursors SET sent_seq = acked_seq WHERE user_id = ? AND sent_seq > acked_seq", recipientID)
	if err != nil {
		return 0, fmt.Errorf("store: reset delivered: %w", err)
	}
	return k + int(m), nil
}

// MaxAckIDs bounds the message ids of one Ack call.
const MaxAckIDs = 1000

func (t *sqlTx) Ack(recipientID int64, messageIDs []string) (int, error) {
	if len(messageIDs) > MaxAckIDs {
		return 0, fmt.Errorf("%w: %d message ids to acknowledge (at most %d)", ErrInvalid, len(messageIDs), MaxAckIDs)
	}
	seqs, err := t.seqsOf(messageIDs)
	if err != nil {
		return 0, fmt.Errorf("store: ack: %w", err)
	}
	return t.AckSeqs(recipientID, slices.Collect(maps.Values(seqs)))
}

func (t *sqlTx) AckSeqs(recipientID int64, seqs []int64) (int, error) {
	t.forgetCursors()
	if len(seqs) > MaxAckIDs {
		return 0, fmt.Errorf("%w: %d messages to acknowledge (at most %d)", ErrInvalid, len(seqs), MaxAckIDs)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	// Group messages: the cursors of the recipient's groups.
	rows, err := t.groupRowsOf(recipientID, seqs)
	if err != nil {
		return 0, fmt.Errorf("store: ack: %w", err)
	}
	// The rest: the recipient's inbox (sequences that are not direct
	// messages to them change nothing there).
	group := map[int64]bool{}
	for _, r := range rows {
		group[r.Seq] = true
	}
	k := 0
	if direct := slices.DeleteFunc(slices.Clone(seqs), func(s int64) bool { return group[s] }); len(direct) > 0 {
		if k, err = t.ackInbox(map[int64][]int64{recipientID: direct}); err != nil {
			return k, err
		}
	}
	m, err := t.ackCursors(rows)
	if err != nil {
		return k + m, fmt.Errorf("store: ack: %w", err)
	}
	return k + m, nil
}

func (t *sqlTx) PendingCount(recipientID int64) (int, error) {
	var g int
	n, err := t.inboxCount(recipientID)
	if err != nil {
		return 0, fmt.Errorf("store: pending count: %w", err)
	}
	// Not for a visit: it counts the messages behind each cursor.
	if err := t.queryRow("SELECT COUNT(*) FROM group_cursors c JOIN chat_groups g ON g.group_id = c.group_id"+
		" JOIN messages m ON m.to_group_id = c.group_id AND m.msg_seq > c.acked_seq AND m.msg_seq <= COALESCE(c.until_seq, g.last_seq)"+
		" WHERE c.user_id = ? AND m.sender_id <> c.user_id", recipientID).Scan(&g); err != nil {
		return 0, fmt.Errorf("store: pending count: %w", err)
	}
	return n + g, nil
}

func (t *sqlTx) History(c Conversation, limit int) ([]Message, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	var where string
	var args []any
	switch {
	case c.GroupID != 0 && c.UserA == 0 && c.UserB == 0 && c.Member == 0:
		where, args = "m.to_group_id = ?", []any{c.GroupID}
	case c.GroupID != 0 && c.UserA == 0 && c.UserB == 0:
		// Only what was stored after the member joined; nothing for a
		// non-member (the comparison with NULL is never true).
		where = "m.to_group_id = ? AND m.msg_seq > (SELECT j.joined_seq FROM group_members j WHERE j.group_id = ? AND j.user_id = ?)"
		args = []any{c.GroupID, c.GroupID, c.Member}
	case c.GroupID == 0 && c.UserA != 0 && c.UserB != 0 && c.Member == 0:
		where = "((m.sender_id = ? AND m.to_user_id = ?) OR (m.sender_id = ? AND m.to_user_id = ?))"
		args = []any{c.UserA, c.UserB, c.UserB, c.UserA}
	default:
		return nil, fmt.Errorf("%w: a history needs a group or two users", ErrInvalid)
	}
	if c.Before > 0 {
		where += " AND m.msg_seq < ?"
		args = append(args, c.Before)
	}
	var out []Message
	err := t.each("SELECT "+messageCols+" FROM messages m"+t.messageJoins()+
		" WHERE "+where+" ORDER BY m.msg_seq DESC LIMIT ?", append(args, limit), func(rows *sql.Rows) error {
		var m Message
		err := scanMessage(rows, &m)
		out = append(out, m)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// MaxPruneSlice bounds the messages one PruneMessages call examines.
const MaxPruneSlice = 2000

func (t *sqlTx) PruneMessages(cutoff time.Time, afterSeq int64, limit int) (PruneSlice, error) {
	if limit <= 0 || limit > MaxPruneSlice {
		return PruneSlice{}, fmt.Errorf("%w: prune slice of %d (1-%d)", ErrInvalid, limit, MaxPruneSlice)
	}
	res, err := t.pruneSlice(cutoff.UnixMicro(), afterSeq, limit)
	if err != nil {
		return PruneSlice{}, fmt.Errorf("store: prune messages: %w", err)
	}
	return res, nil
}

func (t *sqlTx) ProbeCounter() (int64, error) {
	var v int64
	if err := t.queryRow("SELECT counter FROM mutex_probe WHERE id = 1").Scan(&v); err != nil {
		return 0, fmt.Errorf("store: read probe counter: %w", err)
	}
	return v, nil
}

func (t *sqlTx) SetProbeCounter(v int64) error {
	if _, err := t.exec("UPDATE mutex_probe SET counter = ? WHERE id = 1", v); err != nil {
		return fmt.Errorf("store: write probe counter: %w", err)
	}
	return nil
}

func (t *sqlTx) CreateUser(name, hash string) (User, bool, error) {
	if err := checkName("user", name); err != nil {
		return User{}, false, err
	}
	k, err := t.exec(t.s.d.insertIgnore+" users (name, password_hash, created_us) VALUES (?, ?, ?)"+t.s.d.onConflictIgnore,
		name, sql.NullString{String: hash, Valid: hash != ""}, t.s.nowUS())
	if err != nil {
		return User{}, false, fmt.Errorf("store: create user: %w", err)
	}
	u, err := t.UserByName(name)
	return u, k > 0, err
}

func (t *sqlTx) SetPassword(userID int64, hash string) error {
	if hash == "" {
		return fmt.Errorf("%w: empty password hash", ErrInvalid)
	}
	if _, err := t.exec("UPDATE users SET password_hash = ? WHERE user_id = ?", hash, userID); err != nil {
		return fmt.Errorf("store: set password: %w", err)
	}
	// MySQL counts only changed rows: the same hash again affects none.
	var n int
	if err := t.tx.QueryRowContext(t.ctx, "SELECT COUNT(*) FROM users WHERE user_id = ?", userID).Scan(&n); err != nil {
		return fmt.Errorf("store: set password: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: user %d", ErrNotFound, userID)
	}
	if _, err := t.exec("DELETE FROM login_failures WHERE user_id = ?", userID); err != nil {
		return fmt.Errorf("store: set password: forget failed logins: %w", err)
	}
	return nil
}

func (t *sqlTx) CreateGroup(name string, inviteOnly bool, creatorID int64) (Group, bool, error) {
	if err := checkName("group", name); err != nil {
		return Group{}, false, err
	}
	k, err := t.exec(t.s.d.insertIgnore+" chat_groups (name, created_us, invite_only, created_by) VALUES (?, ?, ?, ?)"+t.s.d.onConflictIgnore,
		name, t.s.nowUS(), inviteOnly, nullID(creatorID))
	if err != nil {
		return Group{}, false, fmt.Errorf("store: create group: %w", err)
	}
	g, err := t.GroupByName(name)
	return g, k > 0, err
}

func (t *sqlTx) Invite(groupID, userID, byID int64) (bool, error) {
	k, err := t.exec(t.s.d.insertIgnore+" group_invites (group_id, user_id, invited_by, invited_us) VALUES (?, ?, ?, ?)"+t.s.d.onConflictIgnore,
		groupID, userID, byID, t.s.nowUS())
	if err != nil {
		return false, fmt.Errorf("store: invite: %w", err)
	}
	return k > 0, nil
}

func (t *sqlTx) exists(op, q string, args ...any) (bool, error) {
	var one int
	err := t.tx.QueryRowContext(t.ctx, q, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: %s: %w", op, err)
	}
	return true, nil
}

func (t *sqlTx) Invited(groupID, userID int64) (bool, error) {
	return t.exists("invited", "SELECT 1 FROM group_invites WHERE group_id = ? AND user_id = ?", groupID, userID)
}

func (t *sqlTx) IsMember(groupID, userID int64) (bool, error) {
	return t.exists("is member", "SELECT 1 FROM group_members WHERE group_id = ? AND user_id = ?", groupID, userID)
}

func (t *sqlTx) UserInvites(userID int64) ([]Group, error) {
	return t.queryGroups("user invites", groupCols+
		" JOIN group_invites i ON i.group_id = g.group_id WHERE i.user_id = ? ORDER BY g.name", userID)
}

// RecipientID returns the id of the group (group) or user called name in
// tx; ErrNotFound if there is none.
func RecipientID(tx Tx, name string, group bool) (int64, error) {
	if group {
		g, err := tx.GroupByName(name)
		return g.ID, err
	}
	u, err := tx.UserByName(name)
	return u.ID, err
}
