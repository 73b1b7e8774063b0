package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrNoMariaDB says that a private MariaDB server cannot be run here (the
// binaries are missing).
var ErrNoMariaDB = errors.New("chaos: mariadbd or mariadb-install-db not found")

// PrivateDB is a mariadbd of our own: its own data directory, port and
// socket, a child process that can be killed with -9 and started again
// without touching the machine's shared server.
type PrivateDB struct {
	dir     string
	datadir string
	port    int
	daemon  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logf *os.File
	runs int
}

// findBinary looks for the first of names in PATH, then in dirs.
func findBinary(names []string, dirs ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	for _, n := range names {
		for _, d := range dirs {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	return ""
}

// StartPrivateDB installs a fresh data directory under dir and starts a
// server on a free port of 127.0.0.1 (root, no password). It returns
// ErrNoMariaDB if MariaDB is not installed.
func StartPrivateDB(ctx context.Context, dir string) (*PrivateDB, error) {
	daemon := findBinary([]string{"mariadbd", "mysqld"}, "/usr/sbin", "/usr/libexec", "/usr/local/sbin")
	install := findBinary([]string{"mariadb-install-db", "mysql_install_db"}, "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/scripts")
	if daemon == "" || install == "" {
		return nil, ErrNoMariaDB
	}
	p := &PrivateDB{dir: dir, datadir: filepath.Join(dir, "data"), daemon: daemon}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--no-defaults", "--datadir=" + p.datadir, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.CommandContext(ctx, install, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("chaos: %s: %v\n%s", install, err, tail(out, 2000))
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p.port = port
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Port is the server's TCP port on 127.0.0.1.
func (p *PrivateDB) Port() int { return p.port }

// ServerDSN is the driver DSN of the server, without a database.
func (p *PrivateDB) ServerDSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", p.port)
}

// Start starts the server (again) and waits until it answers.
func (p *PrivateDB) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return errors.New("chaos: private mariadbd is already running")
	}
	p.runs++
	logf, err := os.OpenFile(filepath.Join(p.dir, "mariadbd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	args := []string{"--no-defaults", "--datadir=" + p.datadir, "--port=" + strconv.Itoa(p.port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(p.dir, "mariadbd.sock"),
		"--pid-file=" + filepath.Join(p.dir, "mariadbd.pid"), "--skip-name-resolve",
		"--max-connections=2000", "--innodb-buffer-pool-size=128M", "--skip-log-bin",
		// Durable commits (the default, stated): a STORED receipt follows a
		// commit, and a kill -9 of the server must not take it back.
		"--innodb-flush-log-at-trx-commit=1"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(p.daemon, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.mu.Unlock()
		return fmt.Errorf("chaos: start %s: %w", p.daemon, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	p.cmd, p.done, p.logf = cmd, done, logf
	p.mu.Unlock()
	return p.waitReady(ctx, done)
}

func (p *PrivateDB) waitReady(ctx context.Context, done chan struct{}) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", p.port)
	cfg.Timeout = time.Second
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("chaos: private mariadbd exited at start (see %s)", filepath.Join(p.dir, "mariadbd.log"))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err == nil {
			err = db.PingContext(ctx)
			db.Close()
		}
		if err == nil {
			return nil
		}
		last = err
		wait(ctx, 50*time.Millisecond)
	}
	return fmt.Errorf("chaos: private mariadbd did not answer within 90s: %v", last)
}

// Kill kills the server with SIGKILL and waits for it to exit.
func (p *PrivateDB) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop stops the server cleanly (SIGTERM), killing it after 30 s.
func (p *PrivateDB) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// CreateDatabase creates a database (binary collation, as the store
// expects) on the server named by serverDSN (driver form, no database) and
// returns the DSN of the new database.
func CreateDatabase(ctx context.Context, serverDSN, name string) (string, error) {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return "", fmt.Errorf("chaos: db %q: %w", serverDSN, err)
	}
	cfg.DBName = ""
	cfg.Timeout = 5 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", fmt.Errorf("chaos: create database %s on %s: %w", name, cfg.Addr, err)
	}
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}

// DropDatabase drops the database of dsn.
func DropDatabase(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	name := cfg.DBName
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	return err
}

// childAttr puts a child in its own process group (a Ctrl-C on the
// terminal reaches only ringchaos, which then stops the children in order)
// and kills it if ringchaos dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// wait sleeps for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
