package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
)

// ringBench measures the ring on real processes: formation, idle CPU, hop
// time, and repair after a crash, a stall and a coordinator crash.
type ringBench struct {
	bin    string
	dir    string
	nodes  int
	trials int
	idle   time.Duration
	out    io.Writer
	// newStore makes a fresh, migrated store for one phase and returns its
	// DSN and a cleanup.
	newStore func(ctx context.Context, phase string) (store.Store, string, func(), error)
	// nodeFlags, if set, gives extra flags per node to startCluster's
	// rings (a metrics port).
	nodeFlags func(id int64) []string

	st  store.Store
	dsn string
}

type row struct {
	metric, target, measured string
}

const poll = 2 * time.Millisecond

func (b *ringBench) run(ctx context.Context) ([]row, error) {
	var rows []row
	idle, err := b.idleCluster(ctx)
	if err != nil {
		return nil, err
	}
	rows = append(rows, idle...)
	faults, err := b.faultCluster(ctx)
	if err != nil {
		return nil, err
	}
	return append(rows, faults...), nil
}

// idleCluster: formation time, hop time and idle CPU, without the probe (an
// idle ring touches no store).
func (b *ringBench) idleCluster(ctx context.Context) ([]row, error) {
	r, stop, err := b.startCluster(ctx, "idle", []string{"--stats-interval", "1s"})
	if err != nil {
		return nil, err
	}
	defer stop()
	t0 := time.Now()
	if err := b.waitRing(ctx, b.ids(), false, 30*time.Second); err != nil {
		return nil, fmt.Errorf("formation: %w", err)
	}
	formed := time.Since(t0)
	fmt.Fprintf(b.out, "formed a %d-node ring in %v; measuring idle CPU for %v\n", b.nodes, formed.Round(time.Millisecond), b.idle)
	time.Sleep(2 * time.Second) // settle: the first token comes after the start-up hand-offs
	pids := r.pids()
	before, err := totalCPU(pids)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	time.Sleep(b.idle)
	after, err := totalCPU(pids)
	if err != nil {
		return nil, err
	}
	end := time.Now()
	cpu := float64(after-before) / float64(end.Sub(start)) * 100
	// Only the idle period's intervals: the start-up's hurried rotations
	// would mix warm hops in.
	hop := hopSummary(r, start, end)
	return []row{
		{fmt.Sprintf("%d-node ring formed after the last start", b.nodes), "≤ 2 s", formed.Round(time.Millisecond).String()},
		{"token hop, send to TOKEN_ACK, loopback, idle ring", "median ≤ 200 µs", hop},
		{fmt.Sprintf("idle %d-node ring, CPU of all nodes", b.nodes), "< 1% of one core", fmt.Sprintf("%.2f%% over %v", cpu, b.idle)},
	}, nil
}

// hopSummary condenses the nodes' "token stats" log lines logged in
// [from, to+1 s] for a table row (see hopStats).
func hopSummary(r *procRing, from, to time.Time) string {
	p50, p99, k := hopStats(r, from, to)
	if k == 0 {
		return "no hops logged"
	}
	return fmt.Sprintf("median %.0f µs (p99 up to %.0f µs; %d node intervals)", p50, p99, k)
}

// startCluster makes a fresh store for phase and starts every node with
// flags; stop kills the nodes and removes the store.
func (b *ringBench) startCluster(ctx context.Context, phase string, flags []string) (*procRing, func(), error) {
	st, dsn, cleanup, err := b.newStore(ctx, phase)
	if err != nil {
		return nil, nil, err
	}
	b.st, b.dsn = st, dsn
	r, err := newProcRing(b.bin, b.dir, b.dsn, b.nodes, flags)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	r.nodeFlags = b.nodeFlags
	if err := r.startAll(); err != nil {
		cleanup()
		return nil, nil, err
	}
	return r, func() { r.stopAll(); cleanup() }, nil
}

func totalCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		t, err := cpuTime(pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

func (b *ringBench) ids() []int64 {
	ids := make([]int64, b.nodes)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids
}

// faultCluster: repair times with the mutex probe on (every visit writes,
// so the token's movement shows in the store).
func (b *ringBench) faultCluster(ctx context.Context) ([]row, error) {
	ft, err := b.faultTrials(ctx)
	if err != nil {
		return nil, err
	}
	return []row{
		{"token hop with every visit writing the store (mutex probe)", "median ≤ 200 µs", ft.hop},
		{"crashed node (kill -9) bypassed, token moving again", "≤ 500 ms", spread(ft.crash)},
		{"stalled node (SIGSTOP) bypassed, token moving again", "≤ 1.5 s", spread(ft.stall)},
		{"crashed coordinator replaced, ring repaired, token moving", "≤ 2 s", spread(ft.coord)},
		{"stalled node back in the ring after SIGCONT", "—", spread(ft.rejoin)},
	}, nil
}

// faultTimes are the repair times of faultTrials, one per trial.
type faultTimes struct {
	crash, stall, coord, rejoin []time.Duration
	hop                         string // hopSummary of the probing ring
}

// faultTrials crashes a plain node, stalls it and crashes the coordinator,
// b.trials times, on a ring with the mutex probe on.
func (b *ringBench) faultTrials(ctx context.Context) (faultTimes, error) {
	var ft faultTimes
	r, stop, err := b.startCluster(ctx, "faults", []string{"--mutex-probe", "--stats-interval", "5s"})
	if err != nil {
		return ft, err
	}
	defer stop()
	live := b.ids()
	if err := b.waitRing(ctx, live, true, 30*time.Second); err != nil {
		return ft, fmt.Errorf("formation: %w", err)
	}
	var crash, stall, coord, rejoin []time.Duration
	// plain picks the trial's plain (non-coordinator) victim. It is asked
	// again before each fault: a restarted node with a higher id than the
	// coordinator's takes the role.
	plain := func(trial int) (int64, error) {
		c, err := b.st.Coordinator(ctx)
		if err != nil {
			return 0, err
		}
		victim := live[(trial+1)%len(live)]
		if victim == c.NodeID {
			victim = live[(trial+2)%len(live)]
		}
		return victim, nil
	}
	for trial := range b.trials {
		victim, err := plain(trial)
		if err != nil {
			return ft, err
		}
		// kill -9 of a plain node
		d, err := b.fault(ctx, live, victim, func() { r.kill(victim) })
		if err != nil {
			return ft, fmt.Errorf("crash trial %d: %w", trial, err)
		}
		crash = append(crash, d)
		if err := r.start(victim); err != nil {
			return ft, err
		}
		if err := b.waitRing(ctx, live, true, 30*time.Second); err != nil {
			return ft, fmt.Errorf("restart after crash: %w", err)
		}
		// SIGSTOP of a plain node, then SIGCONT
		if victim, err = plain(trial); err != nil {
			return ft, err
		}
		d, err = b.fault(ctx, live, victim, func() { _ = r.signal(victim, syscall.SIGSTOP) })
		if err != nil {
			return ft, fmt.Errorf("stall trial %d: %w", trial, err)
		}
		stall = append(stall, d)
		t0 := time.Now()
		_ = r.signal(victim, syscall.SIGCONT)
		if err := b.waitRing(ctx, live, true, 30*time.Second); err != nil {
			return ft, fmt.Errorf("rejoin after SIGCONT: %w", err)
		}
		rejoin = append(rejoin, time.Since(t0))
		// kill -9 of the coordinator
		c, err := b.st.Coordinator(ctx)
		if err != nil {
			return ft, err
		}
		d, err = b.fault(ctx, live, c.NodeID, func() { r.kill(c.NodeID) })
		if err != nil {
			return ft, fmt.Errorf("coordinator trial %d: %w", trial, err)
		}
		coord = append(coord, d)
		if err := r.start(c.NodeID); err != nil {
			return ft, err
		}
		if err := b.waitRing(ctx, live, true, 30*time.Second); err != nil {
			return ft, fmt.Errorf("restart after coordinator crash: %w", err)
		}
		fmt.Fprintf(b.out, "trial %d: crash %v, stall %v, rejoin %v, coordinator %v\n", trial+1,
			crash[trial].Round(time.Millisecond), stall[trial].Round(time.Millisecond),
			rejoin[trial].Round(time.Millisecond), coord[trial].Round(time.Millisecond))
	}
	return faultTimes{crash: crash, stall: stall, coord: coord, rejoin: rejoin, hop: hopSummary(r, time.Time{}, time.Now())}, nil
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %v, max %v (%d trials)", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// fault injects a fault on victim and returns how long until the ring of
// the other nodes is whole again and a critical section committed after
// the repair.
func (b *ringBench) fault(ctx context.Context, live []int64, victim int64, inject func()) (time.Duration, error) {
	others := slices.DeleteFunc(slices.Clone(live), func(id int64) bool { return id == victim })
	before, err := b.st.Coordinator(ctx)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	inject()
	deadline := t0.Add(30 * time.Second)
	var repaired bool
	var mark store.Fence
	for time.Now().Before(deadline) {
		if !repaired {
			ok, err := b.ringIs(ctx, others)
			if err != nil {
				return 0, err
			}
			c, err := b.st.Coordinator(ctx)
			if err != nil {
				return 0, err
			}
			if ok && slices.Contains(others, c.NodeID) && (victim != before.NodeID || c.Epoch > before.Epoch) {
				repaired = true
				if mark, err = b.st.Fence(ctx); err != nil {
					return 0, err
				}
			}
		} else {
			f, err := b.st.Fence(ctx)
			if err != nil {
				return 0, err
			}
			if f.Holder != victim && (f.Generation > mark.Generation || f.Seq > mark.Seq) {
				return time.Since(t0), nil
			}
		}
		time.Sleep(poll)
	}
	return 0, errors.New("ring not repaired within 30 s")
}

// ringIs reports whether the store's ring is one cycle of exactly ids.
func (b *ringBench) ringIs(ctx context.Context, ids []int64) (bool, error) {
	nodes, err := b.st.Nodes(ctx)
	if err != nil {
		return false, err
	}
	order, problems := ring.Order(store.Successors(nodes))
	slices.Sort(order)
	want := slices.Clone(ids)
	slices.Sort(want)
	return len(problems) == 0 && slices.Equal(order, want), nil
}

// waitRing waits until the ring is exactly ids with a coordinator among
// them, and (if moving) the token has made a rotation of critical sections.
func (b *ringBench) waitRing(ctx context.Context, ids []int64, moving bool, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var mark *store.Fence
	for time.Now().Before(deadline) {
		ok, err := b.ringIs(ctx, ids)
		if err != nil {
			return err
		}
		c, err := b.st.Coordinator(ctx)
		if err != nil {
			return err
		}
		if ok && slices.Contains(ids, c.NodeID) {
			if !moving {
				return nil
			}
			f, err := b.st.Fence(ctx)
			if err != nil {
				return err
			}
			if mark == nil {
				mark = &f
			} else if f.Generation > mark.Generation || f.Seq >= mark.Seq+int64(len(ids)) {
				return nil
			}
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("ring of %v not formed within %v", ids, limit)
}
