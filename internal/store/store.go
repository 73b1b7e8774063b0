// Package store persists the ring topology (resource P: nodes, successor
// pointers, the coordinator and its epoch, the token fence) and the message
// queue (resource Q: users, groups, memberships, presence, messages, and
// each user's and member's cursor on their inbox and groups).
//
// Two implementations share one SQL code path: MariaDB/MySQL through
// github.com/go-sql-driver/mysql, and an embedded SQLite file through
// modernc.org/sqlite that several processes on one machine can share. Both
// pass the conformance suite in package storetest.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ringchat/ringchat/internal/nodelist"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrNotFound is returned when a user, group or node does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrEpochChanged is returned by ClaimCoordinator when the coordinator
	// epoch is no longer the one the caller expected (compare-and-set lost).
	ErrEpochChanged = errors.New("store: coordinator epoch changed")
	// ErrNotCoordinator is returned when a topology change or token
	// generation is attempted by a node that does not hold the coordinator
	// role for the epoch it claims.
	ErrNotCoordinator = errors.New("store: not the coordinator for this epoch")
	// ErrFenced is returned when a critical section carries a token older
	// than the one the store has already seen: a stale holder cannot write.
	ErrFenced = errors.New("store: stale token fenced off")
	// ErrUserOnline is returned by SetPresence when the user is already
	// logged in at another node.
	ErrUserOnline = errors.New("store: user already online")
	// ErrInvalid is returned for arguments the store refuses (empty names,
	// unknown nodes in a topology change, and so on).
	ErrInvalid = errors.New("store: invalid argument")
	// ErrUnavailable wraps errors reaching the database server.
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrAccessDenied wraps authentication failures at the database server.
	ErrAccessDenied = errors.New("store: access denied")
	// ErrOverBudget is returned by a statement the server stopped at the
	// deadline of Tx.Bound: it changed nothing, and the transaction goes on.
	ErrOverBudget = errors.New("store: statement stopped at its budget")
	// ErrCommitUnknown wraps a transaction's failure whose COMMIT was sent
	// and not answered: its connection broke, or the caller's deadline
	// came first. The store may or may not have committed it.
	ErrCommitUnknown = errors.New("store: the COMMIT was not answered; it may have committed")
)

// NodeRow is one row of the node table. Successor is 0 when the node is not in
// the ring (NULL in the store).
type NodeRow struct {
	nodelist.Entry
	Successor int64
	// DBServer is the database server the node last recorded using
	// (SetDBServer; empty until it does).
	DBServer string
	// Health is what the node last said of itself (SetHealth; empty: it
	// serves), HealthAge how long ago on the store's clock (negative: it
	// never reported).
	Health    string
	HealthAge time.Duration
}

// InRing reports whether the node has a successor pointer.
func (n NodeRow) InRing() bool { return n.Successor != 0 }

// Successors maps every node in the ring to its successor (the ring's
// topology as the store records it; nodes not in the ring are absent).
func Successors(nodes []NodeRow) map[int64]int64 {
	out := make(map[int64]int64, len(nodes))
	for _, n := range nodes {
		if n.InRing() {
			out[n.ID] = n.Successor
		}
	}
	return out
}

// Coordinator is the single coordinator row. NodeID is 0 when there is no
// coordinator. Epoch only grows, and only through ClaimCoordinator.
type Coordinator struct {
	NodeID int64
	Epoch  int64
}

// Lease is the coordinator lease of the lease election method: Holder is
// the coordinator for Epoch and keeps the role for Remaining (measured on
// the store's clock when the lease was read or written). Remaining is 0 when
// the lease has expired or the coordinator holds none (it was elected by a
// voting method).
type Lease struct {
	Holder    int64
	Epoch     int64
	Remaining time.Duration
}

// CoordinatorTerm is one entry of the coordinator history: the node that
// claimed the given epoch. Epochs are unique in the history, so two nodes can
// never both have claimed the same epoch.
type CoordinatorTerm struct {
	Epoch     int64
	NodeID    int64
	ClaimedAt time.Time
}

// Fence is a token stamp: the generation that created the token and the hop
// sequence number within it, and the node holding it. Fences are ordered
// lexicographically by (Generation, Seq); Holder tells two copies of one
// stamp apart.
type Fence struct {
	Generation int64
	Seq        int64
	Holder     int64
	// Secret is the secret of the generation (hex), made by NewGeneration
	// and returned by Fence and NewGeneration: a token proves its stamp
	// with an HMAC under it (token.Prove). Fenced ignores it.
	Secret string
}

// Less reports whether f is older than g.
func (f Fence) Less(g Fence) bool {
	if f.Generation != g.Generation {
		return f.Generation < g.Generation
	}
	return f.Seq < g.Seq
}

func (f Fence) String() string { return fmt.Sprintf("%d/%d", f.Generation, f.Seq) }

// SuccessorChange sets one node's successor pointer. Successor 0 takes the
// node out of the ring.
type SuccessorChange struct {
	NodeID    int64
	Successor int64
}

// User is a chat user. PasswordHash is empty until the name is claimed with a
// password.
type User struct {
	ID           int64
	Name         string
	PasswordHash string
	CreatedAt    time.Time
	Away         Away // filled by UserByName and StatusOf
}

// Group is a chat group. Members is filled by ListGroups, UserGroups and
// UserInvites only. An invite-only group is joined only with an invitation
// (Invite); CreatedBy is its creator (0 if unknown).
type Group struct {
	ID         int64
	Name       string
	Members    int
	CreatedAt  time.Time
	InviteOnly bool
	CreatedBy  int64
}

// Presence says that a user is logged in at a node.
type Presence struct {
	UserID   int64
	UserName string
	NodeID   int64
	Since    time.Time
	Away     Away // filled by Online
}

// NewMessage is a message to insert. Exactly one of ToUserID and ToGroupID is
// non-zero. ID is the client-visible message id (a UUID); inserting the same
// ID twice stores the message once.
type NewMessage struct {
	ID        string
	SenderID  int64
	ToUserID  int64
	ToGroupID int64
	Content   string
	SentAt    time.Time
	NodeID    int64 // node that accepted the message from its sender
}

// Message is a stored message. Seq is its position in the global order.
type Message struct {
	Seq      int64
	ID       string
	Sender   string
	ToUser   string // set for a direct message
	ToGroup  string // set for a group message
	Content  string
	SentAt   time.Time
	StoredAt time.Time
}

// Waiting names a node where messages wait for users logged in there:
// Users, or, if All, possibly any user there (a group's members, or more
// users than were asked for).
type Waiting struct {
	Node  int64
	Users []int64
	All   bool
}

// Delivery is one pending (recipient, message) pair.
type Delivery struct {
	RecipientID int64
	Recipient   string
	// GroupID is set for a group message that waits behind the
	// recipient's cursor on the group (0: a direct message, on the
	// recipient's inbox).
	GroupID int64
	// Own: the recipient sent this group message. Nobody is shown it;
	// marking it moves the recipient's cursor past it.
	Own bool
	Message
}

// Row is the inbox (or group cursor) position the delivery is.
func (d Delivery) Row() RecipientSeq {
	return RecipientSeq{RecipientID: d.RecipientID, Seq: d.Seq, GroupID: d.GroupID}
}

// Inserted is the outcome of one message of InsertMessages.
type Inserted struct {
	Seq int64
	Dup bool
	// SentAt is the stored message's acceptance time: for a message sent
	// again (Dup), the first one's, as every delivery of it shows.
	SentAt time.Time
}

// RecipientSeq names one message (by its sequence) that waits for one
// recipient: a direct message, a position on the recipient's inbox (marking
// it needs the recipient's earlier waiting ones marked with it or before;
// acknowledging it acknowledges it alone), or, with GroupID set, a position
// on the recipient's cursor of that group (marking or acknowledging it
// covers the group's earlier messages for that member).
type RecipientSeq struct {
	RecipientID int64
	Seq         int64
	GroupID     int64
}

// Conversation selects a history: a group, or the direct messages between
// two users. With Member set, a group's history holds only the messages
// stored after Member joined it (none if Member is not a member).
type Conversation struct {
	GroupID int64
	UserA   int64
	UserB   int64
	Member  int64
	// Before, when set, keeps History to messages older than this
	// sequence: the page before one already shown.
	Before int64
}

// Store is the persistent state shared by all nodes: the ring's control
// state (Control) and the chat's message queue (Queue) in one database.
// All methods are safe for concurrent use and may be called from several
// processes at once.
type Store interface {
	// Dialect is "mysql" or "sqlite".
	Dialect() string
	// Server is the database server in use, host:port (empty for an
	// SQLite store): with several in the DSN, the one connections go to.
	Server() string
	// Close releases the connection pool.
	Close() error
	Control
	Queue
}

// Control is the ring's part of the store: the node table and successor
// pointers, the coordinator with its epochs and lease, and the token's
// fence. The ring package's node drives it; the chat never writes it.
type Control interface {
	// Ping checks that the database answers.
	Ping(ctx context.Context) error

	// AddNodes inserts the given nodes, skipping ids already present (the
	// store is the truth once a node is in it). It returns how many were new.
	AddNodes(ctx context.Context, nodes []nodelist.Entry) (int, error)
	// Nodes lists every known node ordered by id.
	Nodes(ctx context.Context) ([]NodeRow, error)
	// SetDBServer records the database server a node uses (shown by
	// status); an unknown node id changes nothing.
	SetDBServer(ctx context.Context, nodeID int64, server string) error
	// SetHealth records what a node says of itself now (empty: it serves;
	// at most MaxHealthLen bytes, else ErrInvalid), stamped with the
	// store's clock: status shows it with its age. An unknown node id
	// changes nothing.
	SetHealth(ctx context.Context, nodeID int64, health string) error
	// SetSuccessors applies topology changes in one transaction, only if
	// coord still holds the coordinator role at coord.Epoch
	// (ErrNotCoordinator otherwise). Unknown node ids give ErrInvalid and
	// change nothing.
	SetSuccessors(ctx context.Context, coord Coordinator, changes []SuccessorChange) error
	// ResetRing clears the ring state for a fresh start (the reference's
	// --drop): successor pointers, the coordinator (its epoch and history
	// are kept so epochs never repeat) and presence. Users, groups and
	// messages are kept: nothing queued is lost.
	ResetRing(ctx context.Context) error

	// Coordinator returns the coordinator row.
	Coordinator(ctx context.Context) (Coordinator, error)
	// CoordinatorLease returns the coordinator row with its lease as the
	// store's clock has it now: Remaining 0 means the lease ran out (or
	// the coordinator holds none), so that a claim-if-stale would win.
	CoordinatorLease(ctx context.Context) (Lease, error)
	// ClaimCoordinator makes nodeID the coordinator with epoch prevEpoch+1
	// if the current epoch is still prevEpoch (compare-and-set), and records
	// the term in the history. With ttl > 0 the new coordinator holds the
	// lease for ttl at once (nobody's claim-if-stale takes the role from it
	// before its first renewal); with 0 it has none until it renews. It
	// returns the new epoch, or ErrEpochChanged.
	ClaimCoordinator(ctx context.Context, nodeID, prevEpoch int64, ttl time.Duration) (int64, error)
	// AcquireLease makes nodeID the coordinator with a new epoch and a
	// lease of ttl if no lease is valid: no coordinator, an expired lease,
	// a coordinator without a lease, or a lease held by nodeID itself (a
	// restarted holder). It records the term in the history like
	// ClaimCoordinator. It reports whether it acquired, and the lease as
	// the store has it afterwards. Time is the store's clock, so nodes
	// with skewed clocks agree on expiry.
	AcquireLease(ctx context.Context, nodeID int64, ttl time.Duration) (bool, Lease, error)
	// RenewLease extends the lease to ttl from now if nodeID still holds
	// it for epoch. It reports whether it did, and the lease afterwards.
	RenewLease(ctx context.Context, nodeID, epoch int64, ttl time.Duration) (bool, Lease, error)
	// CoordinatorHistory lists every claimed term, oldest first.
	CoordinatorHistory(ctx context.Context) ([]CoordinatorTerm, error)

	// Fence returns the newest token stamp a critical section has used.
	Fence(ctx context.Context) (Fence, error)
	// NewGeneration starts a new token generation for the coordinator coord
	// (ErrNotCoordinator if it no longer is) and returns the first fence of
	// that generation (sequence 0). The fence row records it, so every
	// token of an older generation is fenced off from then on.
	NewGeneration(ctx context.Context, coord Coordinator) (Fence, error)
	// Fenced runs fn in one transaction that first advances the fence to f.
	// If the store has already seen a newer stamp, or the same stamp used
	// by another holder, fn is not run and ErrFenced is returned. The same
	// holder may run several sections with one stamp (one visit). If fn
	// returns an error the transaction is rolled back and the error
	// returned.
	Fenced(ctx context.Context, f Fence, fn func(Tx) error) error
}

// Queue is the chat's part of the store: users, groups, presence and the
// message queue, read and written in transactions (Tx). Work that needs
// the token runs in a Control's Fenced section, which hands it the same Tx.
type Queue interface {
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Nodes lists every known node ordered by id (a login reads it to tell
	// a presence at a node that left the ring).
	Nodes(ctx context.Context) ([]NodeRow, error)

	// Update runs fn in one unfenced transaction, for operations that do not
	// need the token (logins, group membership).
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in one read-only transaction (on SQLite a deferred one:
	// it never takes the write lock, so it does not compete with visits).
	// fn must only read: on MariaDB a write fails.
	View(ctx context.Context, fn func(Tx) error) error

	// Online lists every logged-in user and their node, ordered by node then
	// user name.
	Online(ctx context.Context) ([]Presence, error)

	// ClaimLoginAttempt asks, on the store's clock, whether a password of
	// userID may be checked now under the throttle p. If earlier failures
	// make attempts wait, it returns how long (> 0) and counts nothing.
	// Otherwise it returns 0 having counted this attempt as a failure
	// ahead of the check, so that the attempts of every node together,
	// however many run at once, never exceed p; a right password then
	// clears the count (ClearLoginFailures). An unknown user is
	// ErrNotFound, a throttle that cannot run ErrInvalid: nothing changes.
	ClaimLoginAttempt(ctx context.Context, userID int64, p LoginThrottle) (time.Duration, error)
	// ClearLoginFailures forgets the user's failed logins (a right
	// password). A user without any is left alone.
	ClearLoginFailures(ctx context.Context, userID int64) error
}

// Tx is the message-queue view inside a transaction.
type Tx interface {
	// EnsureUser returns the user with this name, creating it if needed.
	EnsureUser(name string) (u User, created bool, err error)
	// UserByName returns ErrNotFound for an unknown name.
	UserByName(name string) (User, error)
	// ClaimPassword sets the password hash if the user has none yet and
	// reports whether it did.
	ClaimPassword(userID int64, hash string) (bool, error)
	// SetAway sets the user's away message (empty: not away) and returns
	// it with the time it was set; over MaxAwayLen is ErrInvalid.
	SetAway(userID int64, message string) (Away, error)
	// StatusOf returns a user with where they are logged in (NodeID 0:
	// nowhere) and their away status; ErrNotFound for an unknown name.
	StatusOf(name string) (UserStatus, error)
	// MarkRead records that userID has read peerID's direct messages up
	// to seq (at most the newest message stored). A mark only moves
	// forward: it returns the mark now and whether it moved.
	MarkRead(userID, peerID, seq int64) (mark int64, moved bool, err error)
	// ReadMark returns how far userID has read peerID's direct messages
	// (0: no mark).
	ReadMark(userID, peerID int64) (int64, error)

	// EnsureGroup returns the group with this name, creating it if needed.
	EnsureGroup(name string) (g Group, created bool, err error)
	// GroupByName returns ErrNotFound for an unknown name.
	GroupByName(name string) (Group, error)
	// JoinGroup adds the user to the group; joining twice is harmless. It
	// reports whether the membership is new.
	JoinGroup(groupID, userID int64) (bool, error)
	// LeaveGroup removes the membership and reports whether there was one.
	LeaveGroup(groupID, userID int64) (bool, error)
	// GroupMembers lists the member ids of a group, ascending.
	GroupMembers(groupID int64) ([]int64, error)
	// GroupMembersPage lists up to limit members of a group (at most
	// MaxMembersPage+1: a page and one to see whether another follows)
	// with user ids above afterUserID, by user id, with where each is
	// logged in and their away status.
	GroupMembersPage(groupID, afterUserID int64, limit int) ([]Member, error)
	// UserGroups lists the groups a user belongs to, by name.
	UserGroups(userID int64) ([]Group, error)
	// ListGroups lists up to limit groups (at most MaxGroupsPage+1: a page
	// and one to see whether another follows) whose
	// names sort after after, by name, with their member counts: one page.
	ListGroups(after string, limit int) ([]Group, error)

	// SetPresence records that the user is logged in at nodeID. It is
	// idempotent for the same node and fails with ErrUserOnline (wrapped
	// with the other node's id) if the user is online elsewhere.
	SetPresence(userID, nodeID int64) error
	// ClearPresence removes the user's presence if it is at nodeID.
	ClearPresence(userID, nodeID int64) (bool, error)
	// ClearNodePresence removes every presence at nodeID (the node left or
	// was spliced out) and returns how many were removed.
	ClearNodePresence(nodeID int64) (int, error)
	// PresenceOf returns the node a user is logged in at, or ErrNotFound.
	PresenceOf(userID int64) (Presence, error)

	// InsertMessage stores m once and returns its global sequence number.
	// A message is stored once and recipients is ignored: a direct message
	// goes on its addressee's inbox (ToUserID) and the addressee's inbox
	// cursor decides whether they still wait for it; a group message, each
	// member's cursor on the group. A message whose ID is already stored is
	// not stored again: its existing sequence is returned with dup=true.
	InsertMessage(m NewMessage, recipients []int64) (seq int64, dup bool, err error)
	// InsertMessages is InsertMessage for several messages, in order, in a
	// few statements: recipients[i] belongs to ms[i]. An id already stored,
	// or repeated within ms, is stored once (Dup in its result). A message
	// that fails validation fails the call (ErrInvalid) and the caller's
	// transaction must be rolled back.
	InsertMessages(ms []NewMessage, recipients [][]int64) ([]Inserted, error)
	// PendingFor returns what waits for these users (logged in at nodeID,
	// at most MaxPendingUsers): up to perUser each and limit in all, each
	// user's share a prefix of what waits for them in global order, ordered
	// by (Seq, RecipientID). Group messages come through the users'
	// cursors; a user's own group messages come back with Own set. Every
	// statement reads at most perUser rows per user and source, whatever
	// the backlog, the history or the groups' sizes.
	PendingFor(nodeID int64, users []int64, perUser, limit int) ([]Delivery, error)
	// Bound makes the server stop the transaction's statements at until,
	// up to the call of the returned function: a statement stopped there
	// fails with ErrOverBudget and the transaction stays usable, so a read
	// can be given a share of a visit's budget and dropped when it runs
	// over, the rest of the visit committing. On a store that cannot stop
	// one statement alone (SQLite) it does nothing.
	Bound(until time.Time) (unbound func())
	// PendingForNode returns up to limit undelivered rows for users present
	// at nodeID, in global order.
	PendingForNode(nodeID int64, limit int) ([]Delivery, error)
	// PendingForNodeFair is PendingForNode with at most perRecipient rows
	// (the oldest) per recipient, so that one recipient's backlog cannot
	// fill a batch and hold up everyone else's messages.
	PendingForNodeFair(nodeID int64, perRecipient, limit int) ([]Delivery, error)
	// WaitingFor returns, by node ascending, where the recipients of these
	// messages who do not have them yet are logged in: the nodes that have
	// new work after the messages were stored, with the users of direct
	// messages (at most maxUsers per node; past that, All), and All at a
	// node with a member of a group that has one of them.
	WaitingFor(seqs []int64, maxUsers int) ([]Waiting, error)
	// MarkDelivered records that these messages were handed to the
	// recipient's connection; they are not returned by PendingForNode again
	// until ResetDelivered. The direct ones must be what waits on the
	// recipient's inbox up to the last of them (as PendingFor returns
	// them): otherwise none of them is marked.
	MarkDelivered(recipientID int64, seqs []int64) error
	// MarkDeliveredRows is MarkDelivered for rows of several recipients (a
	// visit delivers to many users at once), for a visit of node nodeID:
	// it marks only the rows still undelivered whose recipient is still
	// present at nodeID, and returns those (in the given order) with the
	// mark's stamp. A user's direct rows are marked together, and only if
	// they are everything waiting on the user's inbox up to the last of
	// them (a prefix of what waits, as PendingFor returns). The stamp is
	// newer than any on the users' inbox cursors. It reads the presence rows with a lock
	// held to the end of the transaction, so a logout waits for the visit
	// and a login elsewhere (whose ResetDelivered makes the rows pending
	// again) comes after it. Under Bound it marks all or nothing: stopped
	// there, it fails with ErrOverBudget having changed nothing.
	MarkDeliveredRows(nodeID int64, rows []RecipientSeq) (marked []RecipientSeq, stamp int64, err error)
	// UnmarkDelivered makes these rows pending again if they still carry
	// the mark stamped stamp (a row acknowledged is left alone, and so is
	// one made pending by a reset or another undo since the mark, and
	// perhaps marked again), and returns how many rows, or for direct
	// messages and group cursors, moved back: for deliveries a visit
	// marked but never handed to a connection. A direct message's cursor
	// moves back to just before the user's first row, so a mark undone
	// after a newer one makes the newer one's messages come again too.
	UnmarkDelivered(stamp int64, rows []RecipientSeq) (int, error)
	// AckRows acknowledges these rows (acknowledged, or written to a
	// protocol-1 client, which has no ACK) and returns how many it
	// acknowledged. A direct message is acknowledged alone, in or out of
	// order (its inbox cursor moves over every acknowledged message after
	// it; one behind a message not acknowledged is remembered).
	AckRows(rows []RecipientSeq) (int, error)
	// ResetDelivered makes every unacknowledged message of the recipient
	// pending again (after a reconnect) and returns how many.
	ResetDelivered(recipientID int64) (int, error)
	// Ack acknowledges the recipient's messages with these ids and returns
	// how many it acknowledged. Unknown ids, and those of messages not
	// to the recipient or acknowledged already, are ignored.
	Ack(recipientID int64, messageIDs []string) (int, error)
	// AckSeqs is Ack by sequence number.
	AckSeqs(recipientID int64, seqs []int64) (int, error)
	// PendingCount returns how many messages the recipient has not
	// acknowledged (direct, and group messages behind their cursors).
	PendingCount(recipientID int64) (int, error)
	// History returns the last limit messages of a conversation, oldest
	// first.
	History(c Conversation, limit int) ([]Message, error)
	// PruneMessages examines up to limit messages (at most MaxPruneSlice)
	// after sequence afterSeq, deletes those stored before cutoff that no
	// recipient still waits for, and says where to continue: one bounded
	// slice of the history.
	PruneMessages(cutoff time.Time, afterSeq int64, limit int) (PruneSlice, error)

	// ProbeCounter reads the mutual-exclusion probe's counter and
	// SetProbeCounter writes it (two statements on purpose).
	ProbeCounter() (int64, error)
	SetProbeCounter(v int64) error

	// CreateUser creates a user with this name and password hash (empty:
	// none) if the name has never been used, and reports whether it did;
	// for a name in use it returns the existing user and changes nothing.
	CreateUser(name, hash string) (u User, created bool, err error)
	// SetPassword sets or replaces the user's password hash (ErrNotFound
	// for an unknown user) and forgets the user's failed logins.
	SetPassword(userID int64, hash string) error
	// CreateGroup returns the group with this name, creating it if needed
	// as invite-only or open, created by creatorID; an existing group is
	// returned as it is (created=false).
	CreateGroup(name string, inviteOnly bool, creatorID int64) (g Group, created bool, err error)
	// Invite records that byID invites userID to groupID and reports
	// whether the invitation is new. JoinGroup uses it up.
	Invite(groupID, userID, byID int64) (bool, error)
	// Invited reports whether userID holds an invitation to groupID.
	Invited(groupID, userID int64) (bool, error)
	// IsMember reports whether userID is a member of groupID.
	IsMember(groupID, userID int64) (bool, error)
	// UserInvites lists the groups userID is invited to, by name.
	UserInvites(userID int64) ([]Group, error)
}
