package store

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/nodelist"
)

func init() {
	// The driver logs connection trouble on its own; we return it as errors.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

// dialect holds what differs between the SQL dialects.
type dialect struct {
	name string
	// insertIgnore and onConflictIgnore wrap an INSERT that silently skips
	// rows violating a unique key.
	insertIgnore     string
	onConflictIgnore string
	// forUpdate locks rows read in a transaction (SQLite transactions
	// already hold the write lock).
	forUpdate string
	// lockShare is forUpdate with a shared lock.
	lockShare string
	// fromDual ends an INSERT ... SELECT of constants (MySQL needs a FROM
	// before ON DUPLICATE/IGNORE handling; SQLite's upsert needs a WHERE
	// after a SELECT).
	fromDual string
	// clockUS is the store's clock in microseconds as an SQL expression
	// ("?" binds the process clock: SQLite lives on this machine).
	clockUS string
	// connectionID is the server's id of the statement's connection (0
	// for SQLite): the fence row keeps its writer's (fencewait.go).
	connectionID string
	// greatest is the two-argument maximum function; straightJoin joins
	// two tables keeping the left one outer (the planner may not reorder).
	greatest     string
	straightJoin string
	// byInbox follows "messages m" where a user's inbox is read (a range
	// of ix_messages_to_user): with the range's bounds taken from a cursor,
	// the planner may scan the whole table in msg_seq order instead.
	byInbox   string
	txOptions *sql.TxOptions
	// retryable reports transient errors after which a transaction is
	// retried from the start; connLost, a connection that broke (retried
	// unless it broke during the COMMIT).
	retryable, connLost func(error) bool
}

var mysqlDialect = dialect{
	name:         "mysql",
	insertIgnore: "INSERT IGNORE INTO",
	fromDual:     " FROM DUAL",
	forUpdate:    " FOR UPDATE",
	lockShare:    " LOCK IN SHARE MODE",
	clockUS:      "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)",
	connectionID: "CONNECTION_ID()",
	greatest:     "GREATEST",
	straightJoin: "STRAIGHT_JOIN",
	byInbox:      " FORCE INDEX (ix_messages_to_user)",
	// Read committed: a transaction that waited for the fence row lock sees
	// what the previous holder committed.
	txOptions: &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	retryable: func(err error) bool {
		// Deadlock, lock wait timeout, and a Galera member that is not
		// in the primary component (it runs nothing: the connection is
		// dropped, and the next attempt goes to another server).
		return isMySQLErr(err, 1213) || isMySQLErr(err, 1205) || isMySQLErr(err, 1047)
	},
	connLost: func(err error) bool {
		return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn)
	},
}

var sqliteDialect = dialect{
	name:             "sqlite",
	insertIgnore:     "INSERT INTO",
	onConflictIgnore: " ON CONFLICT DO NOTHING",
	fromDual:         " WHERE true",
	clockUS:          "?",
	connectionID:     "0",
	greatest:         "MAX",
	straightJoin:     "CROSS JOIN",
	byInbox:          " INDEXED BY ix_messages_to_user",
	retryable:        func(error) bool { return false },
	connLost:         func(error) bool { return false },
}

// sqlStore implements Store for both dialects.
type sqlStore struct {
	db  *sql.DB
	dsn DSN
	d   dialect
	now func() time.Time
	// statementTime: the server stops a statement at its context's
	// deadline (MariaDB's max_statement_time; not in MySQL).
	statementTime bool
	// returning: the server returns an insert's generated keys
	// (INSERT ... RETURNING: MariaDB 10.5 and later, SQLite).
	returning bool
	// server is the address of the database server in use (empty for an
	// SQLite store).
	server func() string
	// inspect, when set (tests), sees every statement of a transaction
	// before it runs, with the transaction: plan checks.
	inspect func(t *sqlTx, q string, args []any)
	// inboxes holds the users whose inbox cursor a committed transaction
	// of this process saw exist or made (cursors are never deleted):
	// storing a direct message to one of them writes no cursor statement.
	inboxes sync.Map // int64 → struct{}
	// ends are COMMITs and ROLLBACKs still waiting for the server's
	// answer after their caller stopped waiting (awaitEnd); Close waits
	// for them.
	ends sync.WaitGroup
}

// boundStatement prefixes q, on a server that can, with the time left
// before ctx's deadline as the statement's time limit.
func (s *sqlStore) boundStatement(ctx context.Context, q string) string {
	if !s.statementTime {
		return q
	}
	d, ok := ctx.Deadline()
	if !ok {
		return q
	}
	return s.boundUntil(d, q)
}

// boundUntil prefixes q, on a server that can, with the time left before
// d as the statement's time limit.
func (s *sqlStore) boundUntil(d time.Time, q string) string {
	left := time.Until(d)
	if !s.statementTime || left > maxBoundedStatement {
		return q
	}
	return fmt.Sprintf("SET STATEMENT max_statement_time=%.3f FOR %s", max(left.Seconds(), 0.001), q)
}

// maxBoundedStatement: statements of contexts with more time than this
// left run unbounded at the server (store operations outside the token's
// critical section have seconds; the server's own lock wait timeout bounds
// them).
const maxBoundedStatement = 10 * time.Second

func newSQLStore(db *sql.DB, dsn DSN, d dialect, now func() time.Time) *sqlStore {
	return &sqlStore{db: db, dsn: dsn, d: d, now: now}
}

func (s *sqlStore) Dialect() string { return s.d.name }

func (s *sqlStore) Server() string { return s.server() }

// isDuplicate reports a unique key's violation, which ends the statement
// and not the transaction.
func (s *sqlStore) isDuplicate(err error) bool {
	if s.d.name == "mysql" {
		return isMySQLErr(err, 1062)
	}
	var c interface{ Code() int }
	// SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY
	return errors.As(err, &c) && (c.Code() == 2067 || c.Code() == 1555)
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Close closes the database and waits for the COMMITs and ROLLBACKs
// whose callers gave up on them (commit, rollback): each ends with the
// server's answer, or when its connection fails (the driver's read
// timeout, or TCP_USER_TIMEOUT on a cut link).
func (s *sqlStore) Close() error {
	err := s.db.Close()
	s.ends.Wait()
	return err
}

func (s *sqlStore) nowUS() int64 { return s.now().UnixMicro() }

// maxTxAttempts bounds retries of a transaction after a deadlock or a
// lost connection. On a Galera cluster a deadlock is also how a commit
// that lost a race with another server's is refused (certification):
// under contention between servers a transaction can lose a few in a row.
const maxTxAttempts = 8

// inTx runs fn in a transaction, retrying it after transient conflicts,
// and after a connection lost before its COMMIT was sent (the server it
// ran on died or left its cluster: nothing was committed, and the next
// attempt connects to the next server). A connection lost during the
// COMMIT is not retried: the commit may have reached the store.
func (s *sqlStore) inTx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		var committing bool
		committing, err = s.tryTx(ctx, fn)
		again := s.d.retryable(err) || (!committing && s.d.connLost(err))
		if err == nil || !again || ctx.Err() != nil || attempt == maxTxAttempts {
			break
		}
		// Two transactions that deadlocked would meet again at once: the
		// retries spread out, more each time (at most 64 ms, 140 ms in
		// all; a visit's deadline ends them sooner).
		t := time.NewTimer(time.Duration(rand.Int64N(int64(attempt*attempt) * int64(time.Millisecond))))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	if err != nil {
		return wrapOp(op, err)
	}
	return nil
}

func (s *sqlStore) tryTx(ctx context.Context, fn func(*sql.Tx) error) (committing bool, err error) {
	return s.tryTxOpts(ctx, s.d.txOptions, fn)
}

// tryTxOpts runs fn in one transaction and commits it. committing: the
// error (if any) came from the COMMIT.
func (s *sqlStore) tryTxOpts(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) error) (committing bool, err error) {
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			s.rollback(ctx, tx)
		}
	}()
	if err = fn(tx); err != nil {
		return false, err
	}
	return true, s.commit(ctx, tx)
}

// rollback ends tx after a failure. database/sql's ROLLBACK takes no
// context either, and one whose answer is lost waits for the server to
// send it again (200 ms at the least, doubling): in a chaos run at 20 %
// loss on a node's packets, a visit that failed at its 400-ms deadline
// held the token for 3.3 s, its ROLLBACK's answer lost again and again,
// and only the coordinator's new tokens moved meanwhile. So on a server
// reached over the network, for a caller with a deadline, the ROLLBACK
// runs on its own goroutine and the caller waits for its answer
// rollbackGrace at most. Nothing needs that answer: the server ends the
// transaction, and frees its locks, when the ROLLBACK arrives (or when
// it ends the connection: idle_write_transaction_timeout, or the next
// token holder's fence look); a next transaction runs on another
// connection. The goroutine ends with the answer or with the connection
// (Close waits for it, as for a COMMIT).
func (s *sqlStore) rollback(ctx context.Context, tx *sql.Tx) {
	if _, ok := ctx.Deadline(); s.d.name != "mysql" || !ok {
		_ = tx.Rollback()
		return
	}
	s.awaitEnd(tx.Rollback, rollbackGrace)
}

// rollbackGrace is the longest a failed transaction's caller waits for
// its ROLLBACK's answer: a round trip on a LAN, with room for a lost
// request's retransmission at the node's 20-ms minimum (tcpopt).
const rollbackGrace = 50 * time.Millisecond

// commit commits tx by ctx's deadline. database/sql's COMMIT takes no
// context: a COMMIT whose answer is lost waits for the server to send it
// again (200 ms at the least, doubling), and a critical section's COMMIT
// held the token for a second and more at 20 % loss on the node's
// packets, every node's visits waiting behind it. So on a server reached
// over the network the COMMIT runs on its own goroutine and the caller
// stops waiting at its deadline: the outcome is unknown, as when a
// connection breaks during the COMMIT (ErrCommitUnknown), and a critical
// section treats it so (the next visit stores the messages again,
// deduplicated, and makes the deliveries pending again; the fence orders
// the late commit before the next holder's). The goroutine ends with the
// answer or with the connection (Close waits for it).
func (s *sqlStore) commit(ctx context.Context, tx *sql.Tx) error {
	if _, ok := ctx.Deadline(); s.d.name != "mysql" || !ok {
		return s.commitErr(ctx, tx.Commit())
	}
	// A COMMIT sent just before the deadline (the statements used the
	// budget) is waited for a little past it: answered at once, it
	// committed, and failing it would fail a visit that did its work (it
	// used to run past the deadline and succeed; database/sql sends no
	// COMMIT once the context has ended).
	wait := commitGrace
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), commitGrace)
	}
	if answered, err := s.awaitEnd(tx.Commit, wait); answered {
		return s.commitErr(ctx, err)
	}
	return fmt.Errorf("%w: no answer in %s, by the caller's deadline or after: %w", ErrCommitUnknown, wait.Round(time.Millisecond), context.DeadlineExceeded)
}

// awaitEnd runs end (a transaction's COMMIT or ROLLBACK, which
// database/sql sends without a context) on a goroutine of its own and
// waits for it wait at most: answered tells whether it returned by then,
// with err. The goroutine ends with the server's answer or with the
// connection; Close waits for it (s.ends).
func (s *sqlStore) awaitEnd(end func() error, wait time.Duration) (answered bool, err error) {
	done := make(chan error, 1)
	s.ends.Add(1)
	go func() {
		defer s.ends.Done()
		done <- end()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		return true, err
	case <-t.C:
		return false, nil
	}
}

// commitGrace is the least time a COMMIT is waited for: an answered one
// takes a round trip and a log flush, a few milliseconds on a LAN.
const commitGrace = 50 * time.Millisecond

// commitErr marks a COMMIT's error ErrCommitUnknown when the commit may
// have reached the store (its connection broke, or its context ended).
func (s *sqlStore) commitErr(ctx context.Context, err error) error {
	if err != nil && (s.d.connLost(err) || ctx.Err() != nil) && !errors.Is(err, ErrCommitUnknown) {
		return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	return err
}

// wrapOp prefixes an error with the operation, keeping our sentinels
// recognisable and marking database errors as such.
func wrapOp(op string, err error) error {
	for _, sentinel := range []error{ErrNotFound, ErrEpochChanged, ErrNotCoordinator, ErrFenced,
		ErrUserOnline, ErrInvalid, ErrUnavailable, ErrAccessDenied, ErrCommitUnknown} {
		if errors.Is(err, sentinel) {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

func (s *sqlStore) AddNodes(ctx context.Context, nodes []nodelist.Entry) (int, error) {
	for _, n := range nodes {
		if n.ID < 1 || n.Host == "" || !validPort(n.CoordPort) || !validPort(n.ClientPort) {
			return 0, wrapOp("add nodes", fmt.Errorf("%w: node %+v", ErrInvalid, n))
		}
	}
	added := 0
	err := s.inTx(ctx, "add nodes", func(tx *sql.Tx) error {
		added = 0
		q := s.d.insertIgnore + " nodes (node_id, host, coord_port, client_port, added_us) VALUES (?, ?, ?, ?, ?)" + s.d.onConflictIgnore
		for _, n := range nodes {
			res, err := tx.ExecContext(ctx, q, n.ID, n.Host, n.CoordPort, n.ClientPort, s.nowUS())
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			added += int(k)
		}
		return nil
	})
	return added, err
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

func (s *sqlStore) Nodes(ctx context.Context) ([]NodeRow, error) {
	var args []any
	if s.d.clockUS == "?" {
		args = append(args, s.nowUS())
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT node_id, host, coord_port, client_port, successor_id, db_server, health, health_us, "+s.d.clockUS+
			" FROM nodes ORDER BY node_id", args...)
	if err != nil {
		return nil, wrapOp("list nodes", err)
	}
	defer rows.Close()
	var out []NodeRow
	for rows.Next() {
		var n NodeRow
		var succ, healthUS sql.NullInt64
		var server, health sql.NullString
		var nowUS int64
		if err := rows.Scan(&n.ID, &n.Host, &n.CoordPort, &n.ClientPort, &succ, &server, &health, &healthUS, &nowUS); err != nil {
			return nil, wrapOp("list nodes", err)
		}
		n.Successor, n.DBServer, n.Health, n.HealthAge = succ.Int64, server.String, health.String, -1
		if healthUS.Valid {
			n.HealthAge = time.Duration(max(nowUS-healthUS.Int64, 0)) * time.Microsecond
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapOp("list nodes", err)
	}
	return out, nil
}

func (s *sqlStore) SetDBServer(ctx context.Context, nodeID int64, server string) error {
	if len(server) > 255 {
		return wrapOp("record database server", fmt.Errorf("%w: server name of %d bytes", ErrInvalid, len(server)))
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE nodes SET db_server = ? WHERE node_id = ?", server, nodeID); err != nil {
		return wrapOp("record database server", err)
	}
	return nil
}

// checkNodeExists fails with ErrInvalid unless nodeID is in the node table.
func (s *sqlStore) checkNodeExists(ctx context.Context, tx *sql.Tx, nodeID int64) error {
	var exists int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM nodes WHERE node_id = ?", nodeID).Scan(&exists); err != nil {
		return err
	}
	if exists == 0 {
		return fmt.Errorf("%w: node %d is not in the node table", ErrInvalid, nodeID)
	}
	return nil
}

// checkCoordinator fails with ErrNotCoordinator unless coord is the current
// coordinator row. It locks the row for the rest of the transaction.
func (s *sqlStore) checkCoordinator(ctx context.Context, tx *sql.Tx, coord Coordinator) error {
	var node sql.NullInt64
	var epoch int64
	err := tx.QueryRowContext(ctx, "SELECT node_id, epoch FROM ring_coordinator WHERE id = 1"+s.d.forUpdate).
		Scan(&node, &epoch)
	if err != nil {
		return err
	}
	if coord.NodeID == 0 || node.Int64 != coord.NodeID || epoch != coord.Epoch {
		return fmt.Errorf("%w: node %d epoch %d, store has node %d epoch %d",
			ErrNotCoordinator, coord.NodeID, coord.Epoch, node.Int64, epoch)
	}
	return nil
}

func (s *sqlStore) SetSuccessors(ctx context.Context, coord Coordinator, changes []SuccessorChange) error {
	return s.inTx(ctx, "set successors", func(tx *sql.Tx) error {
		if err := s.checkCoordinator(ctx, tx, coord); err != nil {
			return err
		}
		known := map[int64]bool{}
		rows, err := tx.QueryContext(ctx, "SELECT node_id FROM nodes")
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			known[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range changes {
			if !known[c.NodeID] || (c.Successor != 0 && !known[c.Successor]) {
				return fmt.Errorf("%w: successor change %d -> %d names an unknown node", ErrInvalid, c.NodeID, c.Successor)
			}
		}
		for _, c := range changes {
			var succ any
			if c.Successor != 0 {
				succ = c.Successor
			}
			if _, err := tx.ExecContext(ctx, "UPDATE nodes SET successor_id = ? WHERE node_id = ?", succ, c.NodeID); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *sqlStore) ResetRing(ctx context.Context) error {
	return s.inTx(ctx, "reset ring", func(tx *sql.Tx) error {
		for _, q := range []string{
			"UPDATE nodes SET successor_id = NULL",
			"UPDATE ring_coordinator SET node_id = NULL, lease_until_us = 0, changed_us = ? WHERE id = 1",
			"DELETE FROM presence",
			"UPDATE inbox_cursors SET back_us = " + s.d.greatest + "(sent_us, back_us), back_seq = acked_seq, sent_seq = acked_seq WHERE sent_seq > acked_seq",
		} {
			var args []any
			if strings.Contains(q, "?") {
				args = append(args, s.nowUS())
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *sqlStore) Coordinator(ctx context.Context) (Coordinator, error) {
	var c Coordinator
	var node sql.NullInt64
	err := s.db.QueryRowContext(ctx, "SELECT node_id, epoch FROM ring_coordinator WHERE id = 1").Scan(&node, &c.Epoch)
	if err != nil {
		return Coordinator{}, wrapOp("read coordinator", err)
	}
	c.NodeID = node.Int64
	return c, nil
}

func (s *sqlStore) CoordinatorLease(ctx context.Context) (Lease, error) {
	holder, epoch, until, now, err := s.readLease(ctx, s.db, "")
	if err != nil {
		return Lease{}, wrapOp("read coordinator lease", err)
	}
	return leaseOf(holder, epoch, until, now), nil
}

func (s *sqlStore) ClaimCoordinator(ctx context.Context, nodeID, prevEpoch int64, ttl time.Duration) (int64, error) {
	if nodeID < 1 || ttl < 0 {
		return 0, wrapOp("claim coordinator", fmt.Errorf("%w: node id %d, ttl %v", ErrInvalid, nodeID, ttl))
	}
	epoch := prevEpoch + 1
	err := s.inTx(ctx, "claim coordinator", func(tx *sql.Tx) error {
		if err := s.checkNodeExists(ctx, tx, nodeID); err != nil {
			return err
		}
		now := s.nowUS()
		var until int64
		if ttl > 0 {
			_, _, _, clock, err := s.leaseRow(ctx, tx)
			if err != nil {
				return err
			}
			until = clock + ttl.Microseconds()
		}
		res, err := tx.ExecContext(ctx,
			"UPDATE ring_coordinator SET node_id = ?, epoch = ?, changed_us = ?, lease_until_us = ? WHERE id = 1 AND epoch = ?",
			nodeID, epoch, now, until, prevEpoch)
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			return fmt.Errorf("%w: expected epoch %d", ErrEpochChanged, prevEpoch)
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO coordinator_history (epoch, node_id, claimed_us) VALUES (?, ?, ?)",
			epoch, nodeID, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	return epoch, nil
}

// leaseRow reads the coordinator row and the store's clock (the database
// server's on MariaDB) inside tx, locking the row.
func (s *sqlStore) leaseRow(ctx context.Context, tx *sql.Tx) (holder, epoch, until, now int64, err error) {
	return s.readLease(ctx, tx, s.d.forUpdate)
}

// readLease reads the coordinator row's holder, epoch and lease end with
// the store's clock, through q (the pool, or a transaction that locks the
// row with lock).
func (s *sqlStore) readLease(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, lock string) (holder, epoch, until, now int64, err error) {
	var node sql.NullInt64
	query := "SELECT node_id, epoch, lease_until_us, " + s.d.clockUS + " FROM ring_coordinator WHERE id = 1" + lock
	var args []any
	if s.d.clockUS == "?" {
		args = append(args, s.nowUS())
	}
	err = q.QueryRowContext(ctx, query, args...).Scan(&node, &epoch, &until, &now)
	return node.Int64, epoch, until, now, err
}

func leaseOf(holder, epoch, until, now int64) Lease {
	return Lease{Holder: holder, Epoch: epoch, Remaining: time.Duration(max(until-now, 0)) * time.Microsecond}
}

func (s *sqlStore) AcquireLease(ctx context.Context, nodeID int64, ttl time.Duration) (bool, Lease, error) {
	if nodeID < 1 || ttl <= 0 {
		return false, Lease{}, wrapOp("acquire lease", fmt.Errorf("%w: node %d, ttl %v", ErrInvalid, nodeID, ttl))
	}
	var (
		won   bool
		lease Lease
	)
	err := s.inTx(ctx, "acquire lease", func(tx *sql.Tx) error {
		if err := s.checkNodeExists(ctx, tx, nodeID); err != nil {
			return err
		}
		holder, epoch, until, now, err := s.leaseRow(ctx, tx)
		if err != nil {
			return err
		}
		if holder != 0 && holder != nodeID && until > now {
			won, lease = false, leaseOf(holder, epoch, until, now)
			return nil
		}
		until, epoch = now+ttl.Microseconds(), epoch+1
		if _, err := tx.ExecContext(ctx,
			"UPDATE ring_coordinator SET node_id = ?, epoch = ?, changed_us = ?, lease_until_us = ? WHERE id = 1",
			nodeID, epoch, s.nowUS(), until); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO coordinator_history (epoch, node_id, claimed_us) VALUES (?, ?, ?)",
			epoch, nodeID, s.nowUS()); err != nil {
			return err
		}
		won, lease = true, leaseOf(nodeID, epoch, until, now)
		return nil
	})
	if err != nil {
		return false, Lease{}, err
	}
	return won, lease, nil
}

func (s *sqlStore) RenewLease(ctx context.Context, nodeID, epoch int64, ttl time.Duration) (bool, Lease, error) {
	if nodeID < 1 || ttl <= 0 {
		return false, Lease{}, wrapOp("renew lease", fmt.Errorf("%w: node %d, ttl %v", ErrInvalid, nodeID, ttl))
	}
	var (
		ok    bool
		lease Lease
	)
	err := s.inTx(ctx, "renew lease", func(tx *sql.Tx) error {
		holder, cur, until, now, err := s.leaseRow(ctx, tx)
		if err != nil {
			return err
		}
		if holder != nodeID || cur != epoch {
			ok, lease = false, leaseOf(holder, cur, until, now)
			return nil
		}
		until = now + ttl.Microseconds()
		if _, err := tx.ExecContext(ctx, "UPDATE ring_coordinator SET lease_until_us = ? WHERE id = 1 AND epoch = ?",
			until, epoch); err != nil {
			return err
		}
		ok, lease = true, leaseOf(holder, cur, until, now)
		return nil
	})
	if err != nil {
		return false, Lease{}, err
	}
	return ok, lease, nil
}

func (s *sqlStore) CoordinatorHistory(ctx context.Context) ([]CoordinatorTerm, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT epoch, node_id, claimed_us FROM coordinator_history ORDER BY epoch")
	if err != nil {
		return nil, wrapOp("coordinator history", err)
	}
	defer rows.Close()
	var out []CoordinatorTerm
	for rows.Next() {
		var t CoordinatorTerm
		var us int64
		if err := rows.Scan(&t.Epoch, &t.NodeID, &us); err != nil {
			return nil, wrapOp("coordinator history", err)
		}
		t.ClaimedAt = time.UnixMicro(us).UTC()
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapOp("coordinator history", err)
	}
	return out, nil
}

func (s *sqlStore) Fence(ctx context.Context) (Fence, error) {
	var f Fence
	err := s.db.QueryRowContext(ctx, "SELECT generation, seq, holder, secret FROM token_fence WHERE id = 1").
		Scan(&f.Generation, &f.Seq, &f.Holder, &f.Secret)
	if err != nil {
		return Fence{}, wrapOp("read fence", err)
	}
	return f, nil
}

func (s *sqlStore) NewGeneration(ctx context.Context, coord Coordinator) (Fence, error) {
	var f Fence
	var b [32]byte
	if _, err := crand.Read(b[:]); err != nil {
		return Fence{}, fmt.Errorf("store: new token generation: %w", err)
	}
	secret := hex.EncodeToString(b[:])
	err := s.inTx(ctx, "new token generation", func(tx *sql.Tx) error {
		if err := s.checkCoordinator(ctx, tx, coord); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			"UPDATE token_fence SET generation = generation + 1, seq = 0, holder = ?, secret = ?, changed_us = ?, holder_conn = "+s.d.connectionID+" WHERE id = 1",
			coord.NodeID, secret, s.nowUS()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT generation, seq, holder, secret FROM token_fence WHERE id = 1").
			Scan(&f.Generation, &f.Seq, &f.Holder, &f.Secret)
	})
	return f, err
}

// maxUnissuedGen bounds the generation of a stamp fenced before the store
// has issued any (no token exists then: only tools and tests fence), so
// that NewGeneration can always go on from the fence row.
const maxUnissuedGen = 1 << 32

func (s *sqlStore) Fenced(ctx context.Context, f Fence, fn func(Tx) error) error {
	var last *sqlTx // the attempt that ran last: its effects committed if err is nil
	err := s.inTx(ctx, "fenced transaction", func(tx *sql.Tx) error {
		// The UPDATE takes the fence row's lock: fenced transactions run one
		// after another, and a stale one finds the newer fence and stops.
		// The row's generation is the last one NewGeneration issued: a stamp
		// of another generation is refused, an older one (superseded) as well
		// as a newer one (never issued: forged), which would otherwise raise
		// the row past every real token and out of NewGeneration's reach.
		// A transaction left behind holding the lock is ended
		// (fencewait.go).
		stop := s.endFenceBlockersAfter(ctx, fenceWaitKill, f)
		res, err := tx.ExecContext(ctx, s.boundStatement(ctx,
			"UPDATE token_fence SET generation = ?, seq = ?, holder = ?, changed_us = ?, holder_conn = "+s.d.connectionID+" WHERE id = 1 AND "+
				"((generation = ? AND (seq < ? OR (seq = ? AND holder = ?))) OR (generation = 0 AND ? BETWEEN 1 AND ?))"),
			f.Generation, f.Seq, f.Holder, s.nowUS(), f.Generation, f.Seq, f.Seq, f.Holder, f.Generation, maxUnissuedGen)
		stop()
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if k == 0 {
			var cur Fence
			if err := tx.QueryRowContext(ctx, "SELECT generation, seq, holder FROM token_fence WHERE id = 1").
				Scan(&cur.Generation, &cur.Seq, &cur.Holder); err != nil {
				return err
			}
			if f.Generation > cur.Generation {
				return fmt.Errorf("%w: token %s of node %d is of a generation the store never issued (last issued %d)",
					ErrFenced, f, f.Holder, cur.Generation)
			}
			return fmt.Errorf("%w: token %s of node %d is not newer than %s of node %d", ErrFenced, f, f.Holder, cur, cur.Holder)
		}
		last = &sqlTx{ctx: ctx, tx: tx, s: s}
		return fn(last)
	})
	if err == nil && last != nil {
		last.committed()
	}
	return err
}

func (s *sqlStore) Update(ctx context.Context, fn func(Tx) error) error {
	var last *sqlTx
	err := s.inTx(ctx, "transaction", func(tx *sql.Tx) error {
		last = &sqlTx{ctx: ctx, tx: tx, s: s}
		return fn(last)
	})
	if err == nil && last != nil {
		last.committed()
	}
	return err
}

func (s *sqlStore) View(ctx context.Context, fn func(Tx) error) error {
	opts := sql.TxOptions{ReadOnly: true}
	if s.d.txOptions != nil {
		opts.Isolation = s.d.txOptions.Isolation
	}
	if _, err := s.tryTxOpts(ctx, &opts, func(tx *sql.Tx) error {
		return fn(&sqlTx{ctx: ctx, tx: tx, s: s})
	}); err != nil {
		return wrapOp("read", err)
	}
	return nil
}

func (s *sqlStore) Online(ctx context.Context) ([]Presence, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT p.user_id, u.name, p.node_id, p.since_us, u.away_message, u.away_us FROM presence p JOIN users u ON u.user_id = p.user_id "+
			"ORDER BY p.node_id, u.name")
	if err != nil {
		return nil, wrapOp("list online users", err)
	}
	defer rows.Close()
	var out []Presence
	for rows.Next() {
		var p Presence
		var us, awayUS int64
		var away sql.NullString
		if err := rows.Scan(&p.UserID, &p.UserName, &p.NodeID, &us, &away, &awayUS); err != nil {
			return nil, wrapOp("list online users", err)
		}
		p.Since, p.Away = time.UnixMicro(us).UTC(), awayOf(away, awayUS)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapOp("list online users", err)
	}
	return out, nil
}
