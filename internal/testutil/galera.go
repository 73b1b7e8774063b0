package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// Galera starts a 3-server MariaDB Galera cluster for this test with
// scripts/galera.sh (script is its path from the test's directory) and
// stops it when the test ends, printing the servers' status and the end
// of their logs if the test failed. Without what the cluster needs the
// test fails when CI is set, and is skipped otherwise.
func Galera(t testing.TB, script string) *procutil.Galera {
	t.Helper()
	if missing := procutil.GaleraMissing(); missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("Galera: %s (CI needs it: .ci/run installs it)", missing)
		}
		t.Skipf("!!! SKIPPING GALERA TEST: %s", missing)
	}
	g, err := procutil.NewGalera(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			status, _ := g.Status(ctx)
			t.Logf("galera status:\n%s", status)
			for i := 1; i <= procutil.GaleraServers; i++ {
				b, _ := os.ReadFile(filepath.Join(g.Dir, fmt.Sprintf("n%d", i), "error.log"))
				t.Logf("server %d log tail:\n%s", i, tail(b, 3000))
			}
		}
		if err := g.Down(ctx); err != nil {
			t.Errorf("galera down: %v", err)
		}
	})
	if err := g.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return g
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
