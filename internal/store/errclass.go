package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
)

// mysqlDataErrors are the MariaDB/MySQL error numbers that are about the
// data a statement carries: the same statement fails again on a server
// that works, whatever the load, the connection or the server.
var mysqlDataErrors = map[uint16]bool{
	1048: true, // ER_BAD_NULL_ERROR: a column cannot be null
	1062: true, // ER_DUP_ENTRY
	1169: true, // ER_DUP_UNIQUE
	1216: true, // ER_NO_REFERENCED_ROW: a foreign key
	1217: true, // ER_ROW_IS_REFERENCED
	1264: true, // ER_WARN_DATA_OUT_OF_RANGE
	1265: true, // WARN_DATA_TRUNCATED
	1292: true, // ER_TRUNCATED_WRONG_VALUE
	1300: true, // ER_INVALID_CHARACTER_STRING
	1364: true, // ER_NO_DEFAULT_FOR_FIELD
	1366: true, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: e.g. a string the column's character set cannot hold
	1367: true, // ER_ILLEGAL_VALUE_FOR_TYPE
	1406: true, // ER_DATA_TOO_LONG
	1411: true, // ER_WRONG_VALUE_FOR_TYPE
	1451: true, // ER_ROW_IS_REFERENCED_2
	1452: true, // ER_NO_REFERENCED_ROW_2
	1557: true, // ER_FOREIGN_DUPLICATE_KEY
	1586: true, // ER_DUP_ENTRY_WITH_KEY_NAME
	1690: true, // ER_DATA_OUT_OF_RANGE
	3819: true, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
	4025: true, // ER_CONSTRAINT_FAILED (MariaDB's CHECK)
}

// SQLite's primary result codes about the data (the low byte of an
// extended code).
const (
	sqliteTooBig     = 18 // SQLITE_TOOBIG: a string or blob over the limit
	sqliteConstraint = 19 // SQLITE_CONSTRAINT: unique, not null, check, foreign key
	sqliteMismatch   = 20 // SQLITE_MISMATCH: a value of the wrong type
)

// IsDataError reports whether err is about the data of the work that
// failed, not about the store: a constraint it breaks, a value a column
// cannot hold, arguments the store refuses (ErrInvalid). Such work fails
// again with the same data on a store that works; it is the only kind of
// failure that can make a piece of work the cause of its own failures.
//
// Everything else is the store's, and the work succeeds once the store is
// back: a server that cannot be reached or refuses connections
// (ErrUnavailable), a connection that broke (driver.ErrBadConn,
// mysql.ErrInvalidConn), a timeout (a net.Error, a context's deadline, a
// statement stopped at its budget: ErrOverBudget), a deadlock or a lock
// wait timeout, a Galera member outside the primary component, SQLite's
// busy or locked database, a newer token (ErrFenced), and any error this
// function does not know.
func IsDataError(err error) bool {
	if err == nil || storeFault(err) {
		return false
	}
	if errors.Is(err, ErrInvalid) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return mysqlDataErrors[me.Number]
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteTooBig, sqliteConstraint, sqliteMismatch:
			return true
		}
	}
	return false
}

// IsUnreachable reports an error that says the store's server could not be
// reached at all: no connection was made (a dial refused or timed out, on
// every server of the DSN), or ErrUnavailable. A ping fails on the same,
// so such a failure says nothing of whether the store, once reached,
// serves a node's work.
func IsUnreachable(err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// storeFault reports errors that are the store's whatever else they wrap.
func storeFault(err error) bool {
	for _, e := range []error{ErrFenced, ErrOverBudget, ErrUnavailable, driver.ErrBadConn, mysql.ErrInvalidConn,
		context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}
