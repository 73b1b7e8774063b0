package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/tcpopt"
)

// failover is the connector of every MariaDB DSN, of one server or several
// (a Galera cluster): new connections go to the server in use, and when it cannot
// be reached or is not part of the cluster's primary component, to the
// next in the DSN's order, round to the first again. Connections to a
// server that dies fail and leave the pool (the driver marks them bad), and
// a connection whose server answers that it left the cluster (1047, 1180)
// is dropped at once: the next transaction connects elsewhere.
type failover struct {
	hosts []string
	conns []driver.Connector
	// syncWait: on a Galera member, each connection's transactions wait
	// for the cluster's earlier commits (wsrep_sync_wait=1), unless the
	// DSN set the variable itself.
	syncWait bool
	// switched is called (outside the lock) when connections move from one
	// server to another: the store's one log line.
	switched func(from, to string, cause error)

	mu  sync.Mutex
	cur int // index of the server in use
}

func newFailover(cfg *mysql.Config, hosts []string, switched func(from, to string, cause error)) (*failover, error) {
	f := &failover{hosts: hosts, switched: switched, syncWait: cfg.Params["wsrep_sync_wait"] == ""}
	for _, h := range hosts {
		c := cfg.Clone()
		c.Addr = h
		if c.Net == "tcp" && c.DialFunc == nil {
			c.DialFunc = tcpopt.StoreDialContext // a lost packet costs 20 ms here, not 200; a cut COMMIT gives up in a second
		}
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		f.conns = append(f.conns, conn)
	}
	return f, nil
}

// Server returns the address of the server in use.
func (f *failover) Server() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts[f.cur]
}

// Connect tries the server in use, then the others in order, each once.
func (f *failover) Connect(ctx context.Context) (driver.Conn, error) {
	f.mu.Lock()
	start := f.cur
	f.mu.Unlock()
	var errs []error
	for i := range f.hosts {
		k := (start + i) % len(f.hosts)
		c, err := f.conns[k].Connect(ctx)
		if err == nil {
			if err = f.prepare(ctx, c); err != nil {
				c.Close()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.hosts[k], err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if k != start {
			f.moved(start, k, errors.Join(errs...))
		}
		return &clusterConn{Conn: c}, nil
	}
	return nil, errors.Join(errs...)
}

// moved records that connections now go to server k.
func (f *failover) moved(from, k int, cause error) {
	f.mu.Lock()
	changed := f.cur == from
	if changed {
		f.cur = k
	}
	f.mu.Unlock()
	if changed && f.switched != nil {
		f.switched(f.hosts[from], f.hosts[k], cause)
	}
}

func (f *failover) Driver() driver.Driver { return mysql.MySQLDriver{} }

// prepare checks that a new connection's server takes queries and, on a
// Galera member, makes its transactions wait for the cluster's earlier
// commits: a member applies the others' commits a little after they
// return, and the token's next holder must see the last one's section (a
// login, the logout it follows).
func (f *failover) prepare(ctx context.Context, c driver.Conn) error {
	member, err := clusterReady(ctx, c)
	if err != nil || !member || !f.syncWait {
		return err
	}
	e, ok := c.(driver.ExecerContext)
	if !ok {
		return nil
	}
	_, err = e.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1", nil)
	return err
}

// clusterReady fails unless the server takes queries: a Galera member that
// is in the primary component and synced (wsrep_ready), or a server that
// is no cluster member at all (wsrep off, or no such variable). It
// reports whether the server is a member.
func clusterReady(ctx context.Context, c driver.Conn) (member bool, err error) {
	q, ok := c.(driver.QueryerContext)
	if !ok {
		return false, nil
	}
	on, err := firstValue(ctx, q, "SELECT @@global.wsrep_on", 0)
	if isMySQLErr(err, 1193) || (err == nil && on != "1") {
		return false, nil // not a cluster member
	}
	if err != nil {
		return false, err
	}
	ready, err := firstValue(ctx, q, "SHOW STATUS LIKE 'wsrep_ready'", 1)
	if err != nil {
		return true, err
	}
	if !strings.EqualFold(ready, "ON") {
		return true, fmt.Errorf("%w: the server is not ready (wsrep_ready %s): not in the cluster's primary component", ErrUnavailable, ready)
	}
	return true, nil
}

// firstValue runs q and returns column col of its first row ("" if none).
func firstValue(ctx context.Context, q driver.QueryerContext, query string, col int) (string, error) {
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(vals); err != nil {
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		return "", err
	}
	if col >= len(vals) {
		return "", nil
	}
	return asString(vals[col]), nil
}

func asString(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// clusterConn is a connection to a MariaDB server (a cluster member or
// not). An answer that the member left the cluster's primary component
// makes it bad, so the pool drops it instead of handing it out again. A
// deadlock error inside a transaction (on Galera also a transaction that
// another server's commit aborted) means the server rolled the whole
// transaction back: its commit then fails with that error, whatever the
// code in between did with it, instead of committing nothing and
// reporting success.
type clusterConn struct {
	driver.Conn
	mu      sync.Mutex
	bad     bool
	aborted error // a deadlock seen since the transaction began
}

// notInCluster reports the errors of a Galera member that lost the
// primary component: it takes no queries until it rejoins.
func notInCluster(err error) bool {
	return isMySQLErr(err, 1047) || isMySQLErr(err, 1180)
}

func (c *clusterConn) check(err error) error {
	if err == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if notInCluster(err) {
		c.bad = true
	}
	if isMySQLErr(err, 1213) && c.aborted == nil {
		c.aborted = err
	}
	return err
}

// takeAborted returns (and forgets) the deadlock seen in the transaction.
func (c *clusterConn) takeAborted() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.aborted
	c.aborted = nil
	return err
}

// IsValid implements driver.Validator.
func (c *clusterConn) IsValid() bool {
	c.mu.Lock()
	bad := c.bad
	c.mu.Unlock()
	if v, ok := c.Conn.(driver.Validator); ok && !v.IsValid() {
		return false
	}
	return !bad
}

// ResetSession implements driver.SessionResetter.
func (c *clusterConn) ResetSession(ctx context.Context) error {
	if !c.IsValid() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// BeginTx implements driver.ConnBeginTx.
func (c *clusterConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.takeAborted()
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, c.check(err)
	}
	return clusterTx{tx: tx, c: c}, nil
}

// ExecContext implements driver.ExecerContext.
func (c *clusterConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	return r, c.check(err)
}

// QueryContext implements driver.QueryerContext.
func (c *clusterConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	return r, c.check(err)
}

// PrepareContext implements driver.ConnPrepareContext.
func (c *clusterConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	return s, c.check(err)
}

// Ping implements driver.Pinger.
func (c *clusterConn) Ping(ctx context.Context) error {
	return c.check(c.Conn.(driver.Pinger).Ping(ctx))
}

// CheckNamedValue implements driver.NamedValueChecker (the driver's own
// conversions).
func (c *clusterConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// clusterTx sees the commit's answer: a member that left the cluster
// fails it, and so does a deadlock any statement of the transaction met.
type clusterTx struct {
	tx driver.Tx
	c  *clusterConn
}

// Commit implements driver.Tx.
func (t clusterTx) Commit() error {
	if err := t.c.takeAborted(); err != nil {
		_ = t.tx.Rollback()
		return err
	}
	return t.c.check(t.tx.Commit())
}

// Rollback implements driver.Tx.
func (t clusterTx) Rollback() error {
	t.c.takeAborted()
	return t.c.check(t.tx.Rollback())
}
