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
}

func (t *sqlTx) exec(q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(t.ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
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
	var hash sql.NullString
	var us int64
	err := t.tx.QueryRowContext(t.ctx, "SELECT user_id, name, password_hash, created_us FROM users WHERE name = ?", name).
		Scan(&u.ID, &u.Name, &hash, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("%w: user %q", ErrNotFound, name)
	}
	if err != nil {
		return User{}, fmt.Errorf("store: read user: %w", err)
	}
	u.PasswordHash = hash.String
	u.CreatedAt = time.UnixMicro(us).UTC()
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
	err := t.tx.QueryRowContext(t.ctx, "SELECT group_id, name, created_us FROM chat_groups WHERE name = ?", name).
		Scan(&g.ID, &g.Name, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return Group{}, fmt.Errorf("%w: group %q", ErrNotFound, name)
	}
	if err != nil {
		return Group{}, fmt.Errorf("store: read group: %w", err)
	}
	g.CreatedAt = time.UnixMicro(us).UTC()
	return g, nil
}

func (t *sqlTx) JoinGroup(groupID, userID int64) (bool, error) {
	k, err := t.exec(t.s.d.insertIgnore+" group_members (group_id, user_id, joined_us) VALUES (?, ?, ?)"+t.s.d.onConflictIgnore,
		groupID, userID, t.s.nowUS())
	if err != nil {
		return false, fmt.Errorf("store: join group: %w", err)
	}
	return k > 0, nil
}

func (t *sqlTx) LeaveGroup(groupID, userID int64) (bool, error) {
	k, err := t.exec("DELETE FROM group_members WHERE group_id = ? AND user_id = ?", groupID, userID)
	if err != nil {
		return false, fmt.Errorf("store: leave group: %w", err)
	}
	return k > 0, nil
}

func (t *sqlTx) GroupMembers(groupID int64) ([]int64, error) {
	rows, err := t.tx.QueryContext(t.ctx, "SELECT user_id FROM group_members WHERE group_id = ? ORDER BY user_id", groupID)
	if err != nil {
		return nil, fmt.Errorf("store: group members: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: group members: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (t *sqlTx) queryGroups(op, q string, args ...any) ([]Group, error) {
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		var g Group
		var us int64
		if err := rows.Scan(&g.ID, &g.Name, &us, &g.Members); err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		g.CreatedAt = time.UnixMicro(us).UTC()
		out = append(out, g)
	}
	return out, rows.Err()
}

const groupCols = "SELECT g.group_id, g.name, g.created_us, " +
	"(SELECT COUNT(*) FROM group_members c WHERE c.group_id = g.group_id) FROM chat_groups g"

func (t *sqlTx) UserGroups(userID int64) ([]Group, error) {
	return t.queryGroups("user groups", groupCols+
		" JOIN group_members m ON m.group_id = g.group_id WHERE m.user_id = ? ORDER BY g.name", userID)
}

func (t *sqlTx) ListGroups() ([]Group, error) {
	return t.queryGroups("list groups", groupCols+" ORDER BY g.name")
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
	err := t.tx.QueryRowContext(t.ctx,
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
	k, err := t.exec(t.s.d.insertIgnore+
		" messages (msg_id, sender_id, to_user_id, to_group_id, content, sent_us, stored_us, node_id)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?)"+t.s.d.onConflictIgnore,
		m.ID, m.SenderID, nullID(m.ToUserID), nullID(m.ToGroupID), m.Content, m.SentAt.UnixMicro(), t.s.nowUS(), m.NodeID)
	if err != nil {
		return 0, false, fmt.Errorf("store: insert message: %w", err)
	}
	var seq int64
	if err := t.tx.QueryRowContext(t.ctx, "SELECT msg_seq FROM messages WHERE msg_id = ?", m.ID).Scan(&seq); err != nil {
		return 0, false, fmt.Errorf("store: insert message: %w", err)
	}
	if k == 0 {
		return seq, true, nil
	}
	if err := t.insertRecipients(recipientRows(seq, recipients)); err != nil {
		return 0, false, err
	}
	return seq, false, nil
}

// recipientRows are the rows of one message's recipients, duplicates
// removed.
func recipientRows(seq int64, recipients []int64) []RecipientSeq {
	rs := slices.Clone(recipients)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	rows := make([]RecipientSeq, len(rs))
	for i, id := range rs {
		rows[i] = RecipientSeq{RecipientID: id, Seq: seq}
	}
	return rows
}

func (t *sqlTx) insertRecipients(rows []RecipientSeq) error {
	for chunk := range slices.Chunk(rows, inChunk) {
		var b strings.Builder
		b.WriteString("INSERT INTO recipients (user_id, msg_seq) VALUES ")
		args := make([]any, 0, 2*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?)")
			args = append(args, r.RecipientID, r.Seq)
		}
		if _, err := t.exec(b.String(), args...); err != nil {
			return fmt.Errorf("store: insert recipients: %w", err)
		}
	}
	return nil
}

// msgChunk bounds the rows of one multi-row message insert.
const msgChunk = 100

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
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	stored, err := t.seqsOf(ids)
	if err != nil {
		return nil, err
	}
	// The new ones, each id once, in order.
	var fresh []int
	seen := map[string]bool{}
	for i, m := range ms {
		if _, ok := stored[m.ID]; ok || seen[m.ID] {
			out[i].Dup = true
			continue
		}
		seen[m.ID] = true
		fresh = append(fresh, i)
	}
	now := t.s.nowUS()
	for chunk := range slices.Chunk(fresh, msgChunk) {
		var b strings.Builder
		b.WriteString("INSERT INTO messages (msg_id, sender_id, to_user_id, to_group_id, content, sent_us, stored_us, node_id) VALUES ")
		args := make([]any, 0, 8*len(chunk))
		for k, i := range chunk {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			m := ms[i]
			args = append(args, m.ID, m.SenderID, nullID(m.ToUserID), nullID(m.ToGroupID), m.Content, m.SentAt.UnixMicro(), now, m.NodeID)
		}
		if _, err := t.exec(b.String(), args...); err != nil {
			return nil, fmt.Errorf("store: insert messages: %w", err)
		}
	}
	if len(fresh) > 0 {
		newIDs := make([]string, len(fresh))
		for k, i := range fresh {
			newIDs[k] = ms[i].ID
		}
		seqs, err := t.seqsOf(newIDs)
		if err != nil {
			return nil, err
		}
		maps.Copy(stored, seqs)
	}
	var rows []RecipientSeq
	for _, i := range fresh {
		rows = append(rows, recipientRows(stored[ms[i].ID], recipients[i])...)
	}
	if err := t.insertRecipients(rows); err != nil {
		return nil, err
	}
	for i, m := range ms {
		out[i].Seq = stored[m.ID]
	}
	return out, nil
}

// seqsOf maps the stored ones of these message ids to their sequence.
func (t *sqlTx) seqsOf(ids []string) (map[string]int64, error) {
	out := map[string]int64{}
	for chunk := range slices.Chunk(ids, inChunk) {
		ph := placeholders(len(chunk))
		rows, err := t.tx.QueryContext(t.ctx, "SELECT msg_id, msg_seq FROM messages WHERE msg_id IN ("+ph+")", anySlice(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("store: message sequences: %w", err)
		}
		for rows.Next() {
			var id string
			var seq int64
			if err := rows.Scan(&id, &seq); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: message sequences: %w", err)
			}
			out[id] = seq
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("store: message sequences: %w", err)
		}
	}
	return out, nil
}

const messageCols = "m.msg_seq, m.msg_id, s.name, tu.name, g.name, m.content, m.sent_us, m.stored_us"

const messageJoins = " JOIN users s ON s.user_id = m.sender_id" +
	" LEFT JOIN users tu ON tu.user_id = m.to_user_id" +
	" LEFT JOIN chat_groups g ON g.group_id = m.to_group_id"

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
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	rows, err := t.tx.QueryContext(t.ctx,
		"SELECT r.user_id, ru.name, "+messageCols+" FROM presence p"+
			" JOIN recipients r ON r.user_id = p.user_id"+
			" JOIN users ru ON ru.user_id = r.user_id"+
			" JOIN messages m ON m.msg_seq = r.msg_seq"+messageJoins+
			" WHERE p.node_id = ? AND r.delivered_us IS NULL ORDER BY r.msg_seq, r.user_id LIMIT ?",
		nodeID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: pending messages: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		if err := scanMessage(rows, &d.Message, &d.RecipientID, &d.Recipient); err != nil {
			return nil, fmt.Errorf("store: pending messages: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (t *sqlTx) PendingForNodeFair(nodeID int64, perRecipient, limit int) ([]Delivery, error) {
	if limit <= 0 || perRecipient <= 0 {
		return nil, fmt.Errorf("%w: limit %d, per recipient %d", ErrInvalid, limit, perRecipient)
	}
	// The window numbers each recipient's undelivered rows oldest first;
	// both dialects (MariaDB 10.2+, SQLite 3.25+) have window functions.
	rows, err := t.tx.QueryContext(t.ctx,
		"SELECT w.user_id, ru.name, "+messageCols+" FROM"+
			" (SELECT r.user_id, r.msg_seq, ROW_NUMBER() OVER (PARTITION BY r.user_id ORDER BY r.msg_seq) AS rn"+
			" FROM presence p JOIN recipients r ON r.user_id = p.user_id"+
			" WHERE p.node_id = ? AND r.delivered_us IS NULL) w"+
			" JOIN users ru ON ru.user_id = w.user_id"+
			" JOIN messages m ON m.msg_seq = w.msg_seq"+messageJoins+
			" WHERE w.rn <= ? ORDER BY w.msg_seq, w.user_id LIMIT ?",
		nodeID, perRecipient, limit)
	if err != nil {
		return nil, fmt.Errorf("store: pending messages: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		if err := scanMessage(rows, &d.Message, &d.RecipientID, &d.Recipient); err != nil {
			return nil, fmt.Errorf("store: pending messages: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (t *sqlTx) NodesWithPending(fromSeq, toSeq int64) ([]int64, error) {
	ids, err := t.queryIDs("SELECT DISTINCT p.node_id FROM recipients r JOIN presence p ON p.user_id = r.user_id"+
		" WHERE r.msg_seq BETWEEN ? AND ? AND r.delivered_us IS NULL ORDER BY p.node_id", fromSeq, toSeq)
	if err != nil {
		return nil, fmt.Errorf("store: nodes with pending messages: %w", err)
	}
	return ids, nil
}

// execIn runs q once per chunk of vals, with q's single "(?)" placeholder
// list expanded; head are the arguments before the list.
func (t *sqlTx) execIn(q string, head []any, vals []any) (int, error) {
	total := 0
	for chunk := range slices.Chunk(vals, inChunk) {
		ph := placeholders(len(chunk))
		args := append(slices.Clone(head), chunk...)
		k, err := t.exec(strings.Replace(q, "(?)", "("+ph+")", 1), args...)
		if err != nil {
			return total, err
		}
		total += int(k)
	}
	return total, nil
}

func anySlice[T any](in []T) []any {
	out := make([]any, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}

func (t *sqlTx) MarkDelivered(recipientID int64, seqs []int64) error {
	_, err := t.execIn("UPDATE recipients SET delivered_us = ? WHERE user_id = ? AND msg_seq IN (?)",
		[]any{t.s.nowUS(), recipientID}, anySlice(seqs))
	if err != nil {
		return fmt.Errorf("store: mark delivered: %w", err)
	}
	return nil
}

// rowChunk bounds the (user_id = ? AND msg_seq = ?) terms of one statement
// (SQLite limits the depth of an expression tree).
const rowChunk = 200

// execRows runs head followed by an OR of one equality pair per row, once
// per chunk; both dialects use the primary key for such an OR.
func (t *sqlTx) execRows(head string, args []any, rows []RecipientSeq) (int, error) {
	total := 0
	for chunk := range slices.Chunk(rows, rowChunk) {
		q, a := rowsClause(head, args, chunk)
		k, err := t.exec(q, a...)
		if err != nil {
			return total, err
		}
		total += int(k)
	}
	return total, nil
}

// placeholders returns "?, ?, ..." with n question marks, for an IN list.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// rowsClause returns head followed by "((user_id = ? AND msg_seq = ?) OR
// ...)" for rows, and args followed by the rows' values.
func rowsClause(head string, args []any, rows []RecipientSeq) (string, []any) {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(" (")
	a := slices.Clone(args)
	for i, r := range rows {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(user_id = ? AND msg_seq = ?)")
		a = append(a, r.RecipientID, r.Seq)
	}
	b.WriteString(")")
	return b.String(), a
}

// queryIDs runs q and returns its one integer column.
func (t *sqlTx) queryIDs(q string, args ...any) ([]int64, error) {
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (t *sqlTx) MarkDeliveredRows(nodeID int64, rows []RecipientSeq) ([]RecipientSeq, int64, error) {
	stamp := t.s.nowUS()
	if len(rows) == 0 {
		return nil, stamp, nil
	}
	var users []any
	seen := map[int64]bool{}
	for _, r := range rows {
		if !seen[r.RecipientID] {
			seen[r.RecipientID] = true
			users = append(users, r.RecipientID)
		}
	}
	// Who is present here now (read committed: the latest commit), locked
	// until this transaction ends.
	present := map[int64]bool{}
	for chunk := range slices.Chunk(users, inChunk) {
		ph := placeholders(len(chunk))
		q := "SELECT user_id FROM presence WHERE node_id = ? AND user_id IN (" + ph + ")" + t.s.d.lockShare
		ids, err := t.queryIDs(q, append([]any{nodeID}, chunk...)...)
		if err != nil {
			return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
		}
		for _, id := range ids {
			present[id] = true
		}
	}
	want := slices.DeleteFunc(slices.Clone(rows), func(r RecipientSeq) bool { return !present[r.RecipientID] })
	if len(want) == 0 {
		return nil, stamp, nil
	}
	k, err := t.execRows("UPDATE recipients SET delivered_us = ? WHERE delivered_us IS NULL AND", []any{stamp}, want)
	if err != nil {
		return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
	}
	if k == len(want) {
		return want, stamp, nil
	}
	// Some were not pending any more: find the ones this call marked.
	marked := map[RecipientSeq]bool{}
	for chunk := range slices.Chunk(want, rowChunk) {
		q, args := rowsClause("SELECT user_id, msg_seq FROM recipients WHERE delivered_us = ? AND", []any{stamp}, chunk)
		rs, err := t.tx.QueryContext(t.ctx, q, args...)
		if err != nil {
			return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
		}
		for rs.Next() {
			var r RecipientSeq
			if err := rs.Scan(&r.RecipientID, &r.Seq); err != nil {
				rs.Close()
				return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
			}
			marked[r] = true
		}
		if err := rs.Close(); err != nil {
			return nil, 0, fmt.Errorf("store: mark delivered: %w", err)
		}
	}
	return slices.DeleteFunc(want, func(r RecipientSeq) bool { return !marked[r] }), stamp, nil
}

func (t *sqlTx) UnmarkDelivered(stamp int64, rows []RecipientSeq) (int, error) {
	k, err := t.execRows("UPDATE recipients SET delivered_us = NULL WHERE delivered_us = ? AND", []any{stamp}, rows)
	if err != nil {
		return k, fmt.Errorf("store: unmark delivered: %w", err)
	}
	return k, nil
}

func (t *sqlTx) AckRows(rows []RecipientSeq) (int, error) {
	k, err := t.execRows("DELETE FROM recipients WHERE", nil, rows)
	if err != nil {
		return k, fmt.Errorf("store: ack: %w", err)
	}
	return k, nil
}

func (t *sqlTx) ResetDelivered(recipientID int64) (int, error) {
	k, err := t.exec("UPDATE recipients SET delivered_us = NULL WHERE user_id = ? AND delivered_us IS NOT NULL", recipientID)
	if err != nil {
		return 0, fmt.Errorf("store: reset delivered: %w", err)
	}
	return int(k), nil
}

func (t *sqlTx) Ack(recipientID int64, messageIDs []string) (int, error) {
	k, err := t.execIn("DELETE FROM recipients WHERE user_id = ? AND msg_seq IN "+
		"(SELECT msg_seq FROM messages WHERE msg_id IN (?))", []any{recipientID}, anySlice(messageIDs))
	if err != nil {
		return k, fmt.Errorf("store: ack: %w", err)
	}
	return k, nil
}

func (t *sqlTx) AckSeqs(recipientID int64, seqs []int64) (int, error) {
	k, err := t.execIn("DELETE FROM recipients WHERE user_id = ? AND msg_seq IN (?)", []any{recipientID}, anySlice(seqs))
	if err != nil {
		return k, fmt.Errorf("store: ack: %w", err)
	}
	return k, nil
}

func (t *sqlTx) PendingCount(recipientID int64) (int, error) {
	var n int
	if err := t.tx.QueryRowContext(t.ctx, "SELECT COUNT(*) FROM recipients WHERE user_id = ?", recipientID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: pending count: %w", err)
	}
	return n, nil
}

func (t *sqlTx) History(c Conversation, limit int) ([]Message, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	var where string
	var args []any
	switch {
	case c.GroupID != 0 && c.UserA == 0 && c.UserB == 0:
		where, args = "m.to_group_id = ?", []any{c.GroupID}
	case c.GroupID == 0 && c.UserA != 0 && c.UserB != 0:
		where = "((m.sender_id = ? AND m.to_user_id = ?) OR (m.sender_id = ? AND m.to_user_id = ?))"
		args = []any{c.UserA, c.UserB, c.UserB, c.UserA}
	default:
		return nil, fmt.Errorf("%w: a history needs a group or two users", ErrInvalid)
	}
	rows, err := t.tx.QueryContext(t.ctx, "SELECT "+messageCols+" FROM messages m"+messageJoins+
		" WHERE "+where+" ORDER BY m.msg_seq DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		if err := scanMessage(rows, &m); err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

func (t *sqlTx) PruneMessages(cutoff time.Time) (int, error) {
	k, err := t.exec("DELETE FROM messages WHERE stored_us < ? AND NOT EXISTS "+
		"(SELECT 1 FROM recipients r WHERE r.msg_seq = messages.msg_seq)", cutoff.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("store: prune messages: %w", err)
	}
	return int(k), nil
}

func (t *sqlTx) ProbeCounter() (int64, error) {
	var v int64
	if err := t.tx.QueryRowContext(t.ctx, "SELECT counter FROM mutex_probe WHERE id = 1").Scan(&v); err != nil {
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
