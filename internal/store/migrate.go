package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/ringchat/ringchat/migrations"
)

// migrateLockTimeoutSec bounds how long a node waits for another node's
// migration to finish before giving up.
const migrateLockTimeoutSec = 120

// Migration reports one applied schema version.
type Migration struct {
	Version int64
	Name    string
}

// SchemaVersion is the newest schema version embedded in this binary.
func SchemaVersion() (int64, error) {
	var newest int64
	for _, dir := range []string{"mysql", "sqlite"} {
		sub, err := fs.Sub(migrations.FS, dir)
		if err != nil {
			return 0, err
		}
		entries, err := fs.ReadDir(sub, ".")
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			var v int64
			if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > newest {
				newest = v
			}
		}
	}
	return newest, nil
}

// SchemaVersions lists, ascending, the schema versions embedded in this
// binary (numbers may have gaps: changes made side by side take numbers
// apart).
func SchemaVersions() ([]int64, error) {
	seen := map[int64]bool{}
	for _, dir := range []string{"mysql", "sqlite"} {
		entries, err := fs.ReadDir(migrations.FS, dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			var v int64
			if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil {
				seen[v] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// Migrate applies every pending migration of the store's dialect and returns
// those it applied (none when the schema is current). It is safe to call from
// several processes at once: they take a lock and the schema is applied once.
func Migrate(ctx context.Context, st Store) ([]Migration, error) {
	return migrate(ctx, st, 0)
}

// migrate applies the pending migrations up to version (0: all of them).
func migrate(ctx context.Context, st Store, version int64) ([]Migration, error) {
	s, ok := st.(*sqlStore)
	if !ok {
		return nil, fmt.Errorf("store: migrate: unsupported store %T", st)
	}
	sub, err := fs.Sub(migrations.FS, s.d.name)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	gd := goose.DialectSQLite3
	var locker sessionLocker = &fileLocker{path: s.dsn.Path + ".migrate.lock"}
	if s.d.name == "mysql" {
		gd, locker = goose.DialectMySQL, newMySQLLocker(s)
	}
	p, err := goose.NewProvider(gd, s.db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	// The lock is taken around the whole of goose's Up, not through goose's
	// own session locker: goose checks for pending migrations (and creates
	// its version table) before it takes that lock, which races when nodes
	// start together.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, wrapOp("migrate", err)
	}
	defer conn.Close()
	if err := locker.SessionLock(ctx, conn); err != nil {
		return nil, wrapOp("migrate", err)
	}
	var results []*goose.MigrationResult
	if version > 0 {
		results, err = p.UpTo(ctx, version)
	} else {
		results, err = p.Up(ctx)
	}
	if uerr := locker.SessionUnlock(context.WithoutCancel(ctx), conn); err == nil && uerr != nil {
		err = uerr
	}
	if err != nil {
		return nil, wrapOp("migrate", err)
	}
	out := make([]Migration, 0, len(results))
	for _, r := range results {
		out = append(out, Migration{Version: r.Source.Version, Name: baseName(r.Source.Path)})
	}
	return out, nil
}

// AppliedMigrations lists the schema versions recorded as applied, one entry
// per row of the version table (so a version applied twice would show twice),
// ascending. A store never migrated has none.
func AppliedMigrations(ctx context.Context, st Store) ([]int64, error) {
	s, ok := st.(*sqlStore)
	if !ok {
		return nil, fmt.Errorf("store: applied migrations: unsupported store %T", st)
	}
	var exists int
	q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'goose_db_version'"
	if s.d.name == "sqlite" {
		q = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'"
	}
	if err := s.db.QueryRowContext(ctx, q).Scan(&exists); err != nil {
		return nil, wrapOp("applied migrations", err)
	}
	if exists == 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT version_id FROM goose_db_version WHERE is_applied AND version_id > 0 ORDER BY id")
	if err != nil {
		return nil, wrapOp("applied migrations", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, wrapOp("applied migrations", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapOp("applied migrations", err)
	}
	return out, nil
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

type sessionLocker interface {
	SessionLock(ctx context.Context, conn *sql.Conn) error
	SessionUnlock(ctx context.Context, conn *sql.Conn) error
}

// mysqlLocker serialises migrations with a lease row in a table of its
// own, taken and renewed by compare-and-set on the server's clock. Not an
// advisory lock (GET_LOCK): a Galera cluster does not replicate those, so
// nodes starting together against different servers would both hold one.
// A row written on two servers at once is certified once: the loser's
// commit fails with a deadlock, and it tries again (inTx), reading the
// winner's row. A migrating node that dies leaves the lease to expire.
type mysqlLocker struct {
	s      *sqlStore
	holder string
	stop   chan struct{}
	done   chan struct{}
}

const (
	// migrateLeaseTTL is how long a migration lease lasts unrenewed (a
	// node that died migrating holds the others up this long).
	migrateLeaseTTL = 30 * time.Second
	// migrateLeaseRenew is how often the holder renews it.
	migrateLeaseRenew = 5 * time.Second
)

func newMySQLLocker(s *sqlStore) *mysqlLocker {
	return &mysqlLocker{s: s, holder: fmt.Sprintf("%s/%d/%d", hostname(), os.Getpid(), rand.Int64())}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "?"
	}
	return h
}

// SessionLock takes the lease, waiting up to migrateLockTimeoutSec for a
// holder to finish, and renews it until SessionUnlock.
func (l *mysqlLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS ringchat_migrate_lock ("+
		"id INT PRIMARY KEY, holder VARCHAR(128) NOT NULL, expires DATETIME(6) NOT NULL) ENGINE=InnoDB"); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	deadline := time.Now().Add(migrateLockTimeoutSec * time.Second)
	for {
		got, err := l.try(ctx)
		if err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("take migration lock: another node held it for over %d s", migrateLockTimeoutSec)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-t.C:
		}
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.renew()
	return nil
}

// try takes or renews the lease if it is free, expired or ours, and
// reports whether it is ours afterwards.
func (l *mysqlLocker) try(ctx context.Context) (bool, error) {
	var holder string
	err := l.s.inTx(ctx, "migration lock", func(tx *sql.Tx) error {
		ttl := migrateLeaseTTL.Microseconds()
		_, err := tx.ExecContext(ctx, "INSERT INTO ringchat_migrate_lock (id, holder, expires)"+
			" VALUES (1, ?, NOW(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE"+
			" holder = IF(expires < NOW(6) OR holder = VALUES(holder), VALUES(holder), holder),"+
			" expires = IF(holder = VALUES(holder), VALUES(expires), expires)", l.holder, ttl)
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT holder FROM ringchat_migrate_lock WHERE id = 1").Scan(&holder)
	})
	return holder == l.holder, err
}

// renew keeps the lease while the migration runs.
func (l *mysqlLocker) renew() {
	defer close(l.done)
	t := time.NewTicker(migrateLeaseRenew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), migrateLeaseRenew)
			_, _ = l.try(ctx) // a failed renewal leaves the lease to run out
			cancel()
		}
	}
}

// SessionUnlock stops renewing and gives the lease up.
func (l *mysqlLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if l.stop != nil {
		close(l.stop)
		<-l.done
		l.stop = nil
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM ringchat_migrate_lock WHERE id = 1 AND holder = ?", l.holder); err != nil {
		return fmt.Errorf("release migration lock: %w", err)
	}
	return nil
}

// fileLocker serialises migrations of an SQLite store between processes on
// one machine with an exclusive flock on a file beside the database; the
// kernel releases it if the process dies.
type fileLocker struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (l *fileLocker) SessionLock(ctx context.Context, _ *sql.Conn) error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	// Poll a non-blocking lock so that a cancelled context is honoured.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("take migration lock %s: %w", l.path, err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("take migration lock %s: %w", l.path, ctx.Err())
		}
	}
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
	return nil
}

func (l *fileLocker) SessionUnlock(context.Context, *sql.Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
	return err
}
