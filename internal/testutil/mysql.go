// Package testutil holds helpers shared by the tests of several packages:
// throw-away MariaDB databases and waiting on conditions with deadlines.
package testutil

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultMySQLServer is the MariaDB server the tests use unless
// RINGCHAT_TEST_MYSQL names another (driver DSN form, no database).
const DefaultMySQLServer = "root@tcp(127.0.0.1:3306)/"

var unsafe = regexp.MustCompile(`[^a-z0-9_]+`)

// MySQLDSN creates an empty database for this test on the test MariaDB
// server and drops it when the test ends. It returns the database's DSN in
// the driver's form. Without a reachable server the test fails when CI is
// set, and is skipped with a loud message otherwise.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv("RINGCHAT_TEST_MYSQL")
	if server == "" {
		server = DefaultMySQLServer
	}
	cfg, err := mysql.ParseDSN(server)
	if err != nil {
		t.Fatalf("RINGCHAT_TEST_MYSQL=%q: %v", server, err)
	}
	cfg.DBName = ""
	cfg.Timeout = 3 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err == nil {
		err = db.Ping()
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		msg := "MariaDB test server " + cfg.Addr + " unreachable: " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI needs it: .ci/run starts it)", msg)
		}
		t.Skipf("!!! SKIPPING MariaDB TEST: %s. Start MariaDB to run it: make db installs and starts one (see the README, Two commands on a fresh machine).", msg)
	}
	name := "rct_" + unsafe.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name += "_" + hex.EncodeToString(b[:])
	if _, err := db.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		db.Close()
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
		db.Close()
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// WaitLimit is how long tests wait for a condition unless they need
// longer.
const WaitLimit = 10 * time.Second

// WaitFor calls cond every interval until it returns true, and reports
// whether it did before within passed. It fails no test itself: for a
// caller with a failure message of its own (what it last saw), or off the
// test's goroutine.
func WaitFor(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// Eventually polls cond every few milliseconds until it returns true or the
// deadline passes, then fails the test with msg.
func Eventually(t testing.TB, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	if !WaitFor(within, 5*time.Millisecond, cond) {
		t.Fatalf("condition not met within %v: %s", within, msg)
	}
}
