package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/election"
)

func newFailoverCmd() *cobra.Command {
	var (
		bin, db  string
		nodes    int
		trials   int
		leaseTTL time.Duration
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Coordinator failover per election method, on ringnode processes",
		Long: `failover starts a ring of ringnode processes per election method (with the
mutex probe, so the token's movement shows in the store), kills the coordinator
with -9 and measures: the time until the store records a new coordinator (a newer
epoch held by a live node), the time until the elected coordinator is recorded
(the highest live id for ring, chang-roberts and bully; the new lease holder for
lease), and the time until the ring is repaired and the token moves again. The
killed node is restarted between trials.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, cleanup, err := newBench(cmd, bin, db, nodes, trials)
			if err != nil {
				return err
			}
			defer cleanup()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "| method (%d nodes, %s store) | goal | first new coordinator recorded | elected coordinator recorded | ring repaired, token moving |\n|---|---|---|---|---|\n",
				nodes, storeKind(db))
			for _, m := range election.Methods {
				first, elected, repaired, err := b.failover(cmd.Context(), m, leaseTTL)
				if err != nil {
					return fmt.Errorf("%s: %w", m, err)
				}
				goal := "< 1 s"
				if m == election.Lease {
					goal = fmt.Sprintf("< lease %v + 200 ms", leaseTTL)
				}
				fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", m, goal, spread(first), spread(elected), spread(repaired))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&bin, "bin", "", "ringnode binary (default: beside ringbench)")
	cmd.Flags().StringVar(&db, "db", "root@tcp(127.0.0.1:3306)/", `MariaDB server (driver DSN without a database), or "sqlite"`)
	cmd.Flags().IntVar(&nodes, "nodes", 5, "ring size")
	cmd.Flags().IntVar(&trials, "trials", 5, "coordinator kills per method")
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", time.Second, "the lease method's lease")
	return cmd
}

// failover kills the coordinator trials times on a ring using method m.
func (b *ringBench) failover(ctx context.Context, m election.Method, leaseTTL time.Duration) (first, elected, repaired []time.Duration, err error) {
	r, stop, err := b.startCluster(ctx, "failover-"+string(m),
		[]string{"--mutex-probe", "--election", string(m), "--lease-ttl", leaseTTL.String()})
	if err != nil {
		return nil, nil, nil, err
	}
	defer stop()
	live := b.ids()
	top := live[len(live)-1]
	voting := m != election.Lease
	settle := func() error {
		if err := b.waitRing(ctx, live, true, 30*time.Second); err != nil {
			return err
		}
		if voting {
			return b.waitCoordinator(ctx, func(id int64) bool { return id == top }, 30*time.Second)
		}
		return nil
	}
	if err := settle(); err != nil {
		return nil, nil, nil, fmt.Errorf("formation: %w", err)
	}
	for trial := range b.trials {
		before, err := b.st.Coordinator(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		victim := before.NodeID
		others := slices.DeleteFunc(slices.Clone(live), func(id int64) bool { return id == victim })
		want := func(id int64) bool { return slices.Contains(others, id) }
		if voting {
			next := others[len(others)-1]
			want = func(id int64) bool { return id == next }
		}
		t0 := time.Now()
		var tFirst, tElected time.Duration
		d, err := b.fault(ctx, live, victim, func() {
			r.kill(victim)
			// Poll the coordinator row until the elected one is recorded;
			// fault then waits for the repair and the token.
			for deadline := t0.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(poll) {
				c, err := b.st.Coordinator(ctx)
				if err != nil || c.Epoch <= before.Epoch || !slices.Contains(others, c.NodeID) {
					continue
				}
				if tFirst == 0 {
					tFirst = time.Since(t0)
				}
				if want(c.NodeID) {
					tElected = time.Since(t0)
					return
				}
			}
		})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("trial %d: %w", trial, err)
		}
		if tElected == 0 {
			return nil, nil, nil, fmt.Errorf("trial %d: no elected coordinator within 30 s", trial)
		}
		first, elected, repaired = append(first, tFirst), append(elected, tElected), append(repaired, max(d, tElected))
		fmt.Fprintf(b.out, "%s trial %d: killed coordinator %d: first new %v, elected %v, repaired %v\n", m, trial+1, victim,
			tFirst.Round(time.Millisecond), tElected.Round(time.Millisecond), d.Round(time.Millisecond))
		if err := r.start(victim); err != nil {
			return nil, nil, nil, err
		}
		if err := settle(); err != nil {
			return nil, nil, nil, fmt.Errorf("after restarting %d: %w", victim, err)
		}
	}
	return first, elected, repaired, nil
}

// waitCoordinator waits until the store's coordinator satisfies ok.
func (b *ringBench) waitCoordinator(ctx context.Context, ok func(int64) bool, limit time.Duration) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(poll) {
		c, err := b.st.Coordinator(ctx)
		if err != nil {
			return err
		}
		if ok(c.NodeID) {
			return nil
		}
	}
	return fmt.Errorf("coordinator not as expected within %v", limit)
}
