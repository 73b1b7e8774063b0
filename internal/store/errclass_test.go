package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// Only errors about the data make work the cause of its failure: an
// outage, a broken connection, a timeout, a deadlock or a Galera failover
// never do, however they are wrapped.
func TestIsDataError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Op: "connect", Err: syscall.ECONNREFUSED}}
	cases := []struct {
		name string
		err  error
		data bool
	}{
		{"nil", nil, false},
		{"connection refused", fmt.Errorf("store: fenced: %w", refused), false},
		{"bad connection", fmt.Errorf("store: insert messages: %w", driver.ErrBadConn), false},
		{"invalid connection", fmt.Errorf("store: insert messages: %w", mysql.ErrInvalidConn), false},
		{"unavailable", fmt.Errorf("%w: MariaDB did not answer", ErrUnavailable), false},
		{"context deadline", fmt.Errorf("store: pending: %w", context.DeadlineExceeded), false},
		{"i/o timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, false},
		{"over budget", fmt.Errorf("store: pending: %w", ErrOverBudget), false},
		{"fenced", fmt.Errorf("store: %w", ErrFenced), false},
		{"deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}, false},
		{"lock wait timeout", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, false},
		{"galera not primary", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, false},
		{"statement time", &mysql.MySQLError{Number: 1969, Message: "Query execution was interrupted (max_statement_time exceeded)"}, false},
		{"read only", &mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option"}, false},
		{"unknown", errors.New("something else"), false},
		{"invalid argument", fmt.Errorf("%w: message m1 content is not valid UTF-8", ErrInvalid), true},
		{"incorrect string value", fmt.Errorf("store: insert messages: %w", &mysql.MySQLError{Number: 1366, Message: "Incorrect string value"}), true},
		{"duplicate", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, true},
		{"foreign key", &mysql.MySQLError{Number: 1452, Message: "Cannot add or update a child row"}, true},
		{"data too long", &mysql.MySQLError{Number: 1406, Message: "Data too long for column"}, true},
		{"check constraint", &mysql.MySQLError{Number: 4025, Message: "CONSTRAINT failed"}, true},
	}
	for _, c := range cases {
		if got := IsDataError(c.err); got != c.data {
			t.Errorf("%s: IsDataError(%v) = %v, want %v", c.name, c.err, got, c.data)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// SQLite's constraint errors, as its driver returns them, are data errors;
// its busy database is not.
func TestIsDataErrorSQLite(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1, 'a')"); err != nil {
		t.Fatal(err)
	}
	_, dup := db.ExecContext(ctx, "INSERT INTO t VALUES (1, 'b')")
	_, null := db.ExecContext(ctx, "INSERT INTO t VALUES (2, NULL)")
	for _, err := range []error{dup, null} {
		if err == nil || !IsDataError(fmt.Errorf("store: insert: %w", err)) {
			t.Errorf("%v: not a data error", err)
		}
	}
	_, missing := db.ExecContext(ctx, "INSERT INTO nowhere VALUES (1)")
	if missing == nil || IsDataError(missing) {
		t.Errorf("%v: a missing table is the store's, not the data's", missing)
	}
}

// Only an error that says no connection was made is the store being out
// of reach: a refused or timed-out dial (on every server of the DSN,
// joined), or ErrUnavailable. A connection that broke, a timeout on a
// connection, a deadlock or a data error are not.
func TestIsUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Op: "connect", Err: syscall.ECONNREFUSED}}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: context.DeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a refused dial", fmt.Errorf("store: fenced transaction: 127.0.0.1:3306: %w", refused), true},
		{"every server refused", fmt.Errorf("store: fenced transaction: %w", errors.Join(fmt.Errorf("a: %w", refused), fmt.Errorf("b: %w", refused))), true},
		{"unavailable", fmt.Errorf("%w: not in the primary component", ErrUnavailable), true},
		{"a read that timed out", fmt.Errorf("store: ack: %w", readTimeout), false},
		{"a deadline", fmt.Errorf("store: ack: %w", context.DeadlineExceeded), false},
		{"a broken connection", fmt.Errorf("store: insert messages: %w", mysql.ErrInvalidConn), false},
		{"a deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, false},
	} {
		if got := IsUnreachable(c.err); got != c.want {
			t.Errorf("%s: IsUnreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
