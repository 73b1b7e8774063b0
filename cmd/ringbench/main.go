// Command ringbench measures a ringchat ring on real processes and prints
// the figures as a markdown table (docs/BENCHMARKS.md keeps the results).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ringbench: "+err.Error())
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var lab string
	root := &cobra.Command{Use: "ringbench", Short: "Measure a ringchat ring", SilenceUsage: true, SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) (err error) {
			benchLab, err = parseLab(lab)
			return err
		}}
	root.PersistentFlags().StringVar(&lab, "lab", "", `run node ID on lab host ID of scripts/netlab.sh's lab NAME:SUBNET (as rclab:198.18.0; root), with --auth open; give --db the lab's store, as root:PASSWORD@tcp(198.18.0.254:3307)/`)
	root.AddCommand(newRingCmd(), newFloorCmd(), newEchoServerCmd(), newElectionCmd(), newFailoverCmd())
	root.AddCommand(newChatCmd(), newBurstCmd(), newMemoryCmd(), newAllCmd(), newScaleCmd())
	return root
}

func newRingCmd() *cobra.Command {
	var (
		bin, db string
		nodes   int
		trials  int
		idle    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ring",
		Short: "Formation, hop time, idle CPU and repair times of a ring of ringnode processes",
		Long: `ring starts ringnode processes on 127.0.0.1 and measures: the time to form the ring
after the last start, the token hop time (send to TOKEN_ACK), the CPU an idle ring
uses, and how long the ring takes to bypass a crashed node, a stalled node and a
crashed coordinator. --db is a MariaDB server (a database per phase is created and
dropped) or "sqlite" for the embedded store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, cleanup, err := newBench(cmd, bin, db, nodes, trials)
			if err != nil {
				return err
			}
			defer cleanup()
			b.idle = idle
			rows, err := b.run(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "| measure (%d nodes, %s store) | target | measured |\n|---|---|---|\n", nodes, storeKind(db))
			for _, r := range rows {
				fmt.Fprintf(out, "| %s | %s | %s |\n", r.metric, r.target, r.measured)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&bin, "bin", "", "ringnode binary (default: beside ringbench)")
	cmd.Flags().StringVar(&db, "db", "root@tcp(127.0.0.1:3306)/", `MariaDB server (driver DSN without a database), or "sqlite"`)
	cmd.Flags().IntVar(&nodes, "nodes", 5, "ring size")
	cmd.Flags().IntVar(&trials, "trials", 5, "repetitions of each fault")
	cmd.Flags().DurationVar(&idle, "idle", 20*time.Second, "how long to measure the idle ring's CPU")
	return cmd
}

// ringnodeBinary returns bin, or the ringnode binary beside ringbench when
// bin is empty, after checking that it exists.
func ringnodeBinary(bin string) (string, error) {
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		bin = filepath.Join(filepath.Dir(self), "ringnode")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("ringnode binary: %w (build it with make build, or pass --bin)", err)
	}
	return bin, nil
}

// newBench prepares a benchmark of ringnode processes: the binary (default:
// beside ringbench), a scratch directory and a store maker.
func newBench(cmd *cobra.Command, bin, db string, nodes, trials int) (*ringBench, func(), error) {
	bin, err := ringnodeBinary(bin)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "ringbench")
	if err != nil {
		return nil, nil, err
	}
	b := &ringBench{bin: bin, dir: dir, nodes: nodes, trials: trials, out: cmd.ErrOrStderr()}
	b.newStore, err = storeMaker(db, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return b, func() { os.RemoveAll(dir) }, nil
}

func storeKind(db string) string {
	if db == "sqlite" {
		return "SQLite"
	}
	return "MariaDB"
}

// databaseDSN checks --db, a MariaDB server in the driver's form without a
// database (one server, or several: tcp(h1:3311,h2:3312)), and returns
// the DSN of a database on it.
func databaseDSN(db string) (func(name string) string, error) {
	rparen := strings.LastIndexByte(db, ')')
	slash := strings.IndexByte(db[rparen+1:], '/')
	if !strings.Contains(db, "tcp(") || rparen < 0 || slash < 0 {
		return nil, fmt.Errorf("--db %q: want a server in the driver's form, as root@tcp(127.0.0.1:3306)/", db)
	}
	head, tail := db[:rparen+1+slash+1], db[rparen+1+slash+1:]
	if tail != "" && !strings.HasPrefix(tail, "?") {
		return nil, errors.New("--db names a server, not a database: a database per phase is created")
	}
	withDB := func(name string) string { return head + name + tail }
	if _, err := store.ParseDSN(withDB("ringbench")); err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	return withDB, nil
}

// storeMaker returns a function making a fresh migrated store per phase.
func storeMaker(db, dir string) (func(ctx context.Context, phase string) (store.Store, string, func(), error), error) {
	if db == "sqlite" {
		return func(ctx context.Context, phase string) (store.Store, string, func(), error) {
			dsn := "sqlite:" + filepath.Join(dir, phase+".db")
			d, _ := store.ParseDSN(dsn)
			st, _, err := store.Prepare(ctx, d, nil, store.Options{})
			if err != nil {
				return nil, "", nil, err
			}
			return st, dsn, func() { st.Close() }, nil
		}, nil
	}
	withDB, err := databaseDSN(db)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, phase string) (store.Store, string, func(), error) {
		name := fmt.Sprintf("ringbench_%d_%s", os.Getpid(), strings.ReplaceAll(phase, "-", "_"))
		dsn := withDB(name)
		d, err := store.ParseDSN(dsn)
		if err != nil {
			return nil, "", nil, err
		}
		st, _, err := store.Prepare(ctx, d, nil, store.Options{})
		if err != nil {
			return nil, "", nil, err
		}
		cleanup := func() {
			st.Close()
			if server, err := store.OpenPool(context.Background(), dsn); err == nil {
				_, _ = server.Exec("DROP DATABASE IF EXISTS `" + name + "`")
				server.Close()
			}
		}
		return st, dsn, cleanup, nil
	}, nil
}
