package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newMemoryCmd() *cobra.Command {
	var o memoryOpts
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Memory of one node holding many idle protocol-2 clients",
		Long: `memory starts a ring of ringnode processes on 127.0.0.1 (a fresh database), reads
node 1's resident memory (VmRSS), logs --clients protocol-2 clients in at node 1,
leaves them idle for --idle, and reads it again: the node's memory with that many
idle clients, and what one client costs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMemory(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.bin, "bin", "", "ringnode binary (default: beside ringbench)")
	f.StringVar(&o.db, "db", "root@tcp(127.0.0.1:3306)/", `MariaDB server (driver DSN without a database), or "sqlite"`)
	f.IntVar(&o.nodes, "nodes", 5, "ring size")
	f.IntVar(&o.clients, "clients", 500, "idle clients, all at node 1")
	f.DurationVar(&o.idle, "idle", 10*time.Second, "how long the clients stay idle before the second reading")
	return cmd
}

type memoryOpts struct {
	bin, db string
	nodes   int
	clients int
	idle    time.Duration
}

func runMemory(cmd *cobra.Command, o memoryOpts) error {
	if o.nodes < 1 || o.clients < 2 || o.idle < 0 {
		return errors.New("memory: need --nodes ≥ 1, --clients ≥ 2 and a --idle ≥ 0")
	}
	ctx := cmd.Context()
	r, list, stop, err := startClientRing(ctx, o.bin, o.db, "memory", o.nodes, nil)
	if err != nil {
		return err
	}
	defer stop()
	pid := r.pid(1)
	addr := fmt.Sprintf("127.0.0.1:%d", list[0].ClientPort)
	b := &chatBench{o: chatBenchOpts{nodes: 1, clients: o.clients, users: "idle"}}
	// The first login waits for the ring: the reading before it is of a
	// node in the ring with no client.
	before, err := rssAfterRing(ctx, addr, pid)
	if err != nil {
		return err
	}
	if err := b.connect(ctx, func(int) string { return addr }); err != nil {
		return err
	}
	defer b.close()
	fmt.Fprintf(cmd.ErrOrStderr(), "%d clients logged in at node 1; idle for %v\n", o.clients, o.idle)
	time.Sleep(o.idle)
	after, err := readRSS(pid)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "| memory (%d nodes, %s store, node 1) | measured |\n|---|---|\n", o.nodes, storeKind(o.db))
	fmt.Fprintf(out, "| node 1 RSS in the ring, no client | %.1f MB |\n", float64(before)/1e6)
	fmt.Fprintf(out, "| node 1 RSS with %d idle clients (after %v) | %.1f MB |\n", o.clients, o.idle, float64(after)/1e6)
	fmt.Fprintf(out, "| per client | %.1f KB |\n", float64(after-before)/float64(o.clients)/1e3)
	return nil
}

// rssAfterRing waits until node 1's client port answers a login (the node
// is in the ring), logs that client out again, and reads node 1's RSS.
func rssAfterRing(ctx context.Context, addr string, pid int) (int64, error) {
	probe := &chatBench{o: chatBenchOpts{nodes: 1, clients: 1, users: "probe"}}
	if err := probe.connect(ctx, func(int) string { return addr }); err != nil {
		return 0, err
	}
	probe.close()
	return readRSS(pid)
}

// readRSS returns a process's resident set size in bytes.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS of %d: %w", pid, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS for process %d", pid)
}
