package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/chaos"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestNetCutStore applies one real network fault with nft: on a 3-node
// ring (nodes on 127.0.0.11-13, each under its own group id) with
// clients sending, one node is cut from the store for a few seconds and
// healed. The cut must drop packets, and the run's nft table must be gone
// afterwards. The run's checks are logged, not judged here: the ring's
// answer to network faults is issue 28's work (make chaos NET=1 judges
// it).
func TestNetCutStore(t *testing.T) {
	if why := chaos.NetUsable(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("network faults cannot run: %s (CI needs them: .ci/run installs nftables)", why)
		}
		t.Skipf("!!! SKIPPING THE NETWORK-FAULT TEST: %s", why)
	}
	c, err := mysql.ParseDSN(testutil.MySQLDSN(t)) // skips or fails without MariaDB
	if err != nil {
		t.Fatal(err)
	}
	c.DBName = ""
	cfg := chaos.DefaultConfig()
	cfg.Seed = 2811
	cfg.Ringnode = ringnodeBin
	cfg.DB = c.FormatDSN()
	cfg.Nodes, cfg.Clients, cfg.BigGroup, cfg.Rate = 3, 3, 0, 2
	cfg.Hostile = false
	cfg.Net = true
	cfg.Faults = []chaos.Kind{chaos.NetCutStore}
	cfg.Duration = 6 * time.Second
	cfg.Gap = [2]time.Duration{time.Second, time.Second}
	cfg.NetHold = [2]time.Duration{4 * time.Second, 4 * time.Second}
	cfg.DrainTimeout = 30 * time.Second
	cfg.WorkDir = t.TempDir()
	out := &testWriter{t: t}
	cfg.Out = out
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rep, err := chaos.Run(ctx, cfg)
	if rep != nil {
		_ = rep.Write(out)
	}
	out.flush()
	if err != nil {
		t.Fatalf("run could not be made: %v", err)
	}
	if rep.NetTable == "" {
		t.Fatal("the run made no nft table")
	}
	if rep.Injected[chaos.NetCutStore] == 0 {
		t.Errorf("no cut injected: %v", rep.Injected)
	}
	if rep.NetDropped == 0 {
		t.Error("the cut dropped no packet: the node was not cut")
	}
	tables, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		t.Fatalf("nft list tables: %v", err)
	}
	if strings.Contains(string(tables), "table inet "+rep.NetTable+"\n") {
		t.Errorf("table inet %s is still there after the run", rep.NetTable)
	}
}
