package store

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Away is a user's away status: an empty Message is not away. It stays
// until the user clears it, across logins.
type Away struct {
	Message string
	Since   time.Time
}

// MaxAwayLen bounds an away message, in bytes.
const MaxAwayLen = 300

// UserStatus is what WHOIS tells of a user: online where and since when,
// and their away status.
type UserStatus struct {
	User
	NodeID int64 // 0: not logged in anywhere
	Since  time.Time
}

// Member is one member of a group as NAMES lists it.
type Member struct {
	UserID int64
	Name   string
	NodeID int64 // 0: not logged in anywhere
	Away   Away
}

// MaxMembersPage bounds one page of GroupMembersPage.
const MaxMembersPage = 1000

func awayOf(msg sql.NullString, us int64) Away {
	if !msg.Valid || msg.String == "" {
		return Away{}
	}
	return Away{Message: msg.String, Since: time.UnixMicro(us).UTC()}
}

func (t *sqlTx) SetAway(userID int64, message string) (Away, error) {
	if len(message) > MaxAwayLen {
		return Away{}, fmt.Errorf("%w: away message of %d bytes (at most %d)", ErrInvalid, len(message), MaxAwayLen)
	}
	now := t.s.nowUS()
	var msg any
	if message != "" {
		msg = message
	} else {
		now = 0
	}
	n, err := t.exec("UPDATE users SET away_message = ?, away_us = ? WHERE user_id = ?", msg, now, userID)
	if err != nil {
		return Away{}, fmt.Errorf("store: set away: %w", err)
	}
	if n == 0 {
		return Away{}, fmt.Errorf("%w: user %d", ErrNotFound, userID)
	}
	return awayOf(sql.NullString{String: message, Valid: message != ""}, now), nil
}

func (t *sqlTx) StatusOf(name string) (UserStatus, error) {
	var s UserStatus
	var hash, away sql.NullString
	var created, awayUS, since int64
	var node sql.NullInt64
	err := t.queryRow("SELECT u.user_id, u.name, u.password_hash, u.created_us, u.away_message, u.away_us, p.node_id, COALESCE(p.since_us, 0)"+
		" FROM users u LEFT JOIN presence p ON p.user_id = u.user_id WHERE u.name = ?", name).
		Scan(&s.ID, &s.Name, &hash, &created, &away, &awayUS, &node, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return UserStatus{}, fmt.Errorf("%w: user %q", ErrNotFound, name)
	}
	if err != nil {
		return UserStatus{}, fmt.Errorf("store: read user status: %w", err)
	}
	s.PasswordHash, s.CreatedAt, s.Away = hash.String, time.UnixMicro(created).UTC(), awayOf(away, awayUS)
	if node.Valid {
		s.NodeID, s.Since = node.Int64, time.UnixMicro(since).UTC()
	}
	return s, nil
}

func (t *sqlTx) GroupMembersPage(groupID, afterUserID int64, limit int) ([]Member, error) {
	if limit <= 0 || limit > MaxMembersPage+1 {
		return nil, fmt.Errorf("%w: members page of %d (1-%d)", ErrInvalid, limit, MaxMembersPage+1)
	}
	// By user id, the membership key's order: a page reads its own rows,
	// whatever the group's size.
	var out []Member
	err := t.each("SELECT m.user_id, u.name, COALESCE(p.node_id, 0), u.away_message, u.away_us FROM group_members m"+
		" JOIN users u ON u.user_id = m.user_id LEFT JOIN presence p ON p.user_id = m.user_id"+
		" WHERE m.group_id = ? AND m.user_id > ? ORDER BY m.user_id LIMIT ?",
		[]any{groupID, afterUserID, limit}, func(rows *sql.Rows) error {
			var m Member
			var away sql.NullString
			var us int64
			if err := rows.Scan(&m.UserID, &m.Name, &m.NodeID, &away, &us); err != nil {
				return err
			}
			m.Away = awayOf(away, us)
			out = append(out, m)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: group members: %w", err)
	}
	return out, nil
}

func (t *sqlTx) MarkRead(userID, peerID, seq int64) (int64, bool, error) {
	if seq <= 0 {
		return 0, false, fmt.Errorf("%w: read up to sequence %d", ErrInvalid, seq)
	}
	// Never past the newest message stored: a mark is what was read, not
	// what will be.
	var newest sql.NullInt64
	if err := t.queryRow("SELECT MAX(msg_seq) FROM messages").Scan(&newest); err != nil {
		return 0, false, fmt.Errorf("store: mark read: %w", err)
	}
	seq = min(seq, newest.Int64)
	if seq <= 0 {
		return 0, false, nil
	}
	n, err := t.exec("UPDATE read_marks SET read_seq = ? WHERE user_id = ? AND peer_id = ? AND read_seq < ?", seq, userID, peerID, seq)
	if err != nil {
		return 0, false, fmt.Errorf("store: mark read: %w", err)
	}
	if n > 0 {
		return seq, true, nil
	}
	cur, err := t.ReadMark(userID, peerID)
	if err != nil {
		return 0, false, err
	}
	if cur > 0 {
		return cur, false, nil // as far already, or further
	}
	if _, err := t.exec("INSERT INTO read_marks (user_id, peer_id, read_seq) VALUES (?, ?, ?)", userID, peerID, seq); err != nil {
		return 0, false, fmt.Errorf("store: mark read: %w", err)
	}
	return seq, true, nil
}

func (t *sqlTx) ReadMark(userID, peerID int64) (int64, error) {
	var seq int64
	err := t.queryRow("SELECT read_seq FROM read_marks WHERE user_id = ? AND peer_id = ?", userID, peerID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read mark: %w", err)
	}
	return seq, nil
}
