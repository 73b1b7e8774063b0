package chaos

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"
)

// The private server starts, keeps a committed row across kill -9 and a
// restart (the fault the suite injects), and stops.
func TestPrivateDBSurvivesKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := StartPrivateDB(ctx, t.TempDir())
	if errors.Is(err, ErrNoMariaDB) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI needs it: .ci/run installs MariaDB)", err)
		}
		t.Skipf("!!! SKIPPING: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Stop()
	dsn, err := CreateDatabase(ctx, db.ServerDSN(), "t")
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) error {
		c, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.ExecContext(ctx, q, args...)
		return err
	}
	if err := exec("CREATE TABLE kv (k INT PRIMARY KEY, v INT) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if err := exec("INSERT INTO kv VALUES (1, 42)"); err != nil {
		t.Fatal(err)
	}
	db.Kill()
	if err := exec("SELECT 1"); err == nil {
		t.Fatal("the server answers after kill -9")
	}
	if err := db.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var v int
	if err := c.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = 1").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after the restart: v %d, %v; want the committed 42", v, err)
	}
}
