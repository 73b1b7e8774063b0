package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options tune Open.
type Options struct {
	// Create makes Open create what is missing: the SQLite file and its
	// directory, or the MariaDB database (the server and the account must
	// exist). Commands that only read (status) leave it false so that a
	// typo in a DSN does not create a new, empty store.
	Create bool
	// Now is the clock used for timestamps; nil means time.Now.
	Now func() time.Time
	// Log receives the store's own events: connections moving from one
	// database server to another (a DSN with several).
	Log zerolog.Logger
}

// Open connects to the store named by dsn (see ParseDSN) and checks that it
// answers. It does not apply migrations; call Migrate for that.
func Open(ctx context.Context, dsn string, opts Options) (Store, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return OpenDSN(ctx, d, opts)
}

// OpenDSN is Open for an already parsed DSN.
func OpenDSN(ctx context.Context, d DSN, opts Options) (Store, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	switch d.Dialect {
	case "sqlite":
		return openSQLite(ctx, d, opts, now)
	case "mysql":
		return openMySQL(ctx, d, opts, now)
	}
	return nil, fmt.Errorf("%w: unknown dialect %q", ErrBadDSN, d.Dialect)
}

func openSQLite(ctx context.Context, d DSN, opts Options, now func() time.Time) (Store, error) {
	if _, err := os.Stat(d.Path); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, d.Path, err)
		}
		if !opts.Create {
			return nil, fmt.Errorf("%w: no store at %s (run `ringnode migrate` first, or check --db)", ErrNotFound, d.Path)
		}
		// The store holds every user's messages and password hashes: only
		// the user running the nodes reads it.
		if err := os.MkdirAll(filepath.Dir(d.Path), 0o700); err != nil {
			return nil, fmt.Errorf("%w: create directory for %s: %v", ErrUnavailable, d.Path, err)
		}
		// Created here with 0600; SQLite gives its -wal and -shm files the
		// database file's mode.
		f, err := os.OpenFile(d.Path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil && !errors.Is(err, os.ErrExist) { // another node may have just made it
			return nil, fmt.Errorf("%w: create %s: %v", ErrUnavailable, d.Path, err)
		}
		if f != nil {
			f.Close()
		}
	}
	if err := privateFiles(d.Path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// busy_timeout: writers from other processes wait instead of failing.
	// WAL: readers do not block the writer. immediate: every transaction
	// takes the write lock up front, so read-then-write never deadlocks.
	conn := "file:" + d.Path +
		"?_pragma=busy_timeout(15000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", conn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, d.Path, err)
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	if err := pingSQLite(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, d.Path, err)
	}
	st := newSQLStore(db, d, sqliteDialect, now)
	st.server = func() string { return "" } // one file, no server
	st.returning = true                     // SQLite 3.35 and later; the driver embeds a newer one
	return st, nil
}

// pingSQLite opens the first connection. Nodes that start together on a
// new file race to switch it to WAL, and the loser's switch fails at once
// with SQLITE_BUSY (the busy timeout does not cover it): it tries again,
// a bounded number of times.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	var err error
	for try := range 20 {
		if err = db.PingContext(ctx); err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(10*(try+1)) * time.Millisecond):
		}
	}
	return err
}

// privateFiles makes an SQLite store's files (the database, -wal and -shm)
// readable by their owner only, as they are when Open creates them; a
// store an older version made world-readable is tightened.
func privateFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("make %s private: %w", p, err)
			}
		}
	}
	return nil
}

func openMySQL(ctx context.Context, d DSN, opts Options, now func() time.Time) (Store, error) {
	cfg := d.MySQL.Clone()
	cfg.ClientFoundRows = true // an UPDATE that matches but changes nothing still counts as done
	db, err := openMySQLDB(ctx, cfg, d.Hosts, opts.Log)
	if err != nil && isMySQLErr(err, 1193) { // unknown system variable: not MariaDB
		for k := range sessionGuards {
			if cfg.Params[k] == sessionGuards[k] {
				delete(cfg.Params, k)
			}
		}
		db, err = openMySQLDB(ctx, cfg, d.Hosts, opts.Log)
	}
	if err != nil && opts.Create && isMySQLErr(err, 1049) { // unknown database
		if cerr := createMySQLDatabase(ctx, cfg, d.Hosts, opts.Log); cerr != nil {
			return nil, classifyMySQL(cerr, d)
		}
		db, err = openMySQLDB(ctx, cfg, d.Hosts, opts.Log)
	}
	if err != nil {
		return nil, classifyMySQL(err, d)
	}
	st := newSQLStore(db.db, d, mysqlDialect, now)
	st.server = db.server
	// The session guards are MariaDB's: where they were accepted, so is
	// max_statement_time.
	st.statementTime = cfg.Params["idle_write_transaction_timeout"] != ""
	if cfg.Params["tx_isolation"] == sessionGuards["tx_isolation"] {
		st.d.txOptions = nil // the session's level already
	}
	var version string
	if err := db.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		db.db.Close()
		return nil, classifyMySQL(err, d)
	}
	st.returning = mariaDBAtLeast(version, 10, 5)
	return st, nil
}

// OpenPool opens a connection pool on a MariaDB DSN (see ParseDSN), with
// the store's failover between several servers, for tools that query the
// store's tables themselves (the chaos suite's checks).
func OpenPool(ctx context.Context, dsn string) (*sql.DB, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if d.Dialect != "mysql" {
		return nil, fmt.Errorf("%w: %s is not MariaDB", ErrBadDSN, d)
	}
	db, err := openMySQLDB(ctx, d.MySQL.Clone(), d.Hosts, zerolog.Nop())
	if err != nil {
		return nil, classifyMySQL(err, d)
	}
	return db.db, nil
}

// mariaDBAtLeast reports whether a server's VERSION() is MariaDB's, at
// least major.minor ("10.11.19-MariaDB-0+deb12u1").
func mariaDBAtLeast(version string, major, minor int) bool {
	if !strings.Contains(version, "MariaDB") {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// mysqlDB is an open pool with the address of the server it uses.
type mysqlDB struct {
	db     *sql.DB
	server func() string
}

// Close closes the pool.
func (m mysqlDB) Close() error { return m.db.Close() }

func openMySQLDB(ctx context.Context, cfg *mysql.Config, hosts []string, log zerolog.Logger) (mysqlDB, error) {
	f, err := newFailover(cfg, hosts, func(from, to string, cause error) {
		log.Warn().Str("from", from).Str("to", to).AnErr("cause", cause).
			Msg("database server changed: connections go to the next server of the DSN")
	})
	if err != nil {
		return mysqlDB{}, err
	}
	connector, server := driver.Connector(f), f.Server
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return mysqlDB{}, err
	}
	return mysqlDB{db: db, server: server}, nil
}

func createMySQLDatabase(ctx context.Context, cfg *mysql.Config, hosts []string, log zerolog.Logger) error {
	server := cfg.Clone()
	server.DBName = ""
	db, err := openMySQLDB(ctx, server, hosts, log)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(cfg.DBName)+
		" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	return err
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

func isMySQLErr(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

// classifyMySQL turns a connection error into one readable line.
func classifyMySQL(err error, d DSN) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1045, 1044, 1698:
			return fmt.Errorf("%w: %s refused user %q (check the user and password in --db): %s",
				ErrAccessDenied, d.MySQL.Addr, d.MySQL.User, me.Message)
		case 1049:
			return fmt.Errorf("%w: database %q does not exist on %s (run `ringnode migrate` first, or check --db)",
				ErrNotFound, d.MySQL.DBName, d.MySQL.Addr)
		}
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, d, me.Message)
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: cannot reach MariaDB at %s: connection refused (is the server running?)", ErrUnavailable, d.MySQL.Addr)
	case errors.As(err, &oe) && oe.Op == "dial":
		return fmt.Errorf("%w: cannot reach MariaDB at %s: %v", ErrUnavailable, d.MySQL.Addr, oe.Err)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: MariaDB at %s did not answer in time", ErrUnavailable, d.MySQL.Addr)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: MariaDB at %s: %v", ErrUnavailable, d.MySQL.Addr, err)
	}
	return fmt.Errorf("%w: MariaDB at %s: %v", ErrUnavailable, d.MySQL.Addr, err)
}
