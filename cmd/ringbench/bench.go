package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// allOpts are the flags of `ringbench all`.
type allOpts struct {
	bin, db        string
	sizes          []int
	duration       time.Duration // each load phase
	idle           time.Duration
	quietMessages  int // pingpong messages of the quiet phase
	typingMessages int // typing messages of the quiet phase (0 skips)
	lightClients   int
	lightRate      float64
	lightArrivals  string
	heavyClients   int
	heavyWindow    int
	trials         int // fault trials per size
	electionTrials int
	failoverTrials int
	leaseTTL       time.Duration
	baselineBatch  int
	floorRounds    int
	short          bool
	out, img       string
}

func newAllCmd() *cobra.Command {
	var o allOpts
	cmd := &cobra.Command{
		Use:     "all",
		Aliases: []string{"bench"},
		Short:   "Every measurement across ring sizes, with a store baseline; CSV, markdown table and SVG plots",
		Long: `all runs, for each ring size of --sizes, on ringnode processes over a fresh database each:

  idle ring     formation time, token hop time (the nodes' --stats-interval lines),
                token rotation time (their Prometheus histograms, --metrics-addr),
                CPU of all nodes over --idle (/proc/PID/task/*/schedstat), and
                beside it the floor under any hop: a bare TCP echo between two
                processes at the idle ring's pace (--floor-rounds, as tcp-floor);
  quiet ring    on the same ring, still without load, one conversation: "ping"
                at the first node and "pong" at the third take turns sending
                direct messages, each as soon as the previous one was shown
                (--quiet-messages, pingpong), then each after a random 0-1.5 s
                pause (--typing-messages, typing; 0 skips): latency p50/p99/max,
                as chat --pattern;
  light load    --light-clients protocol-2 clients sending --light-rate messages a
                second each (at random moments, --light-arrivals) for --duration:
                delivered per second, latency p50/p99/p99.9;
  heavy load    --heavy-clients clients keeping --heavy-window messages in flight
                each (closed loop) for --duration: the same figures;
  store         the same messages written and read straight against the store, no
  baseline      ring: one transaction per node in turn inserting --baseline-batch
                messages, then selecting and deleting what waits for its users;
  repair        kill -9 of a node, SIGSTOP of a node, kill -9 of the coordinator
                (--trials each, mutex probe on);
  elections     messages and time per voting method in one process over loopback
                (--election-trials), and coordinator kill -9 per method on
                processes (--failover-trials; 0 skips).

It prints the markdown table and, with --out, writes results.csv,
latency_quantiles.csv and results.md there and SVG plots into --img.
--short is the quick version (make bench): sizes 3 and 5, 3 s phases, one trial each,
200 pingpong and 30 typing messages.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.short {
				f := cmd.Flags()
				short := map[string]func(){
					"sizes":           func() { o.sizes = []int{3, 5} },
					"duration":        func() { o.duration = 3 * time.Second },
					"idle":            func() { o.idle = 3 * time.Second },
					"trials":          func() { o.trials = 1 },
					"election-trials": func() { o.electionTrials = 1 },
					"failover-trials": func() { o.failoverTrials = 1 },
					"floor-rounds":    func() { o.floorRounds = 6 },
					"quiet-messages":  func() { o.quietMessages = 200 },
					"typing-messages": func() { o.typingMessages = 30 },
				}
				for name, set := range short {
					if !f.Changed(name) {
						set()
					}
				}
			}
			return runAll(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bin, "bin", "", "ringnode binary (default: beside ringbench)")
	f.StringVar(&o.db, "db", "root@tcp(127.0.0.1:3306)/", `MariaDB server (driver DSN without a database), or "sqlite"`)
	f.IntSliceVar(&o.sizes, "sizes", []int{3, 5, 8, 16}, "ring sizes")
	f.DurationVar(&o.duration, "duration", 15*time.Second, "how long clients send in each load phase")
	f.DurationVar(&o.idle, "idle", 20*time.Second, "how long to measure the idle ring")
	f.IntVar(&o.quietMessages, "quiet-messages", 1000, "messages of the quiet ring's pingpong conversation (as chat --pattern pingpong)")
	f.IntVar(&o.typingMessages, "typing-messages", 200, "messages of the quiet ring's typing conversation, 0-1.5 s apart (as chat --pattern typing; 0 skips)")
	f.IntVar(&o.lightClients, "light-clients", 20, "clients of the light load")
	f.Float64Var(&o.lightRate, "light-rate", 2, "messages a second per client of the light load")
	f.StringVar(&o.lightArrivals, "light-arrivals", arrivalsPoisson, `when the light load's clients send: "poisson" (independently at random) or "lockstep" (all at once)`)
	f.IntVar(&o.heavyClients, "heavy-clients", 50, "clients of the heavy load (and users of the store baseline)")
	f.IntVar(&o.heavyWindow, "heavy-window", 20, "messages in flight per client of the heavy load")
	f.IntVar(&o.trials, "trials", 3, "repetitions of each fault per size")
	f.IntVar(&o.electionTrials, "election-trials", 5, "elections per method, size and mode (0 skips)")
	f.IntVar(&o.failoverTrials, "failover-trials", 3, "coordinator kills per method and size (0 skips)")
	f.DurationVar(&o.leaseTTL, "lease-ttl", time.Second, "the lease method's lease (failover)")
	f.IntVar(&o.baselineBatch, "baseline-batch", 100, "messages inserted per transaction by the store baseline")
	f.IntVar(&o.floorRounds, "floor-rounds", 25, "round trips of the bare TCP echo measured beside each size's idle ring, 800 ms apart (0 skips)")
	f.BoolVar(&o.short, "short", false, "the quick version: sizes 3,5, 3 s phases, 1 trial of each fault and election, 200 pingpong and 30 typing messages (flags given explicitly win)")
	f.StringVar(&o.out, "out", "", "directory for results.csv, latency_quantiles.csv and results.md (none if empty)")
	f.StringVar(&o.img, "img", "", "directory for the SVG plots (default: --out)")
	return cmd
}

// idleFloorGap is the pause between the TCP floor's round trips: a node of
// an idle ring gets the token once a lap (the coordinator's rest).
const idleFloorGap = 800 * time.Millisecond

func runAll(ctx context.Context, stdout, log io.Writer, o allOpts) error {
	if len(o.sizes) == 0 || slices.Min(o.sizes) < 2 {
		return errors.New("all: --sizes needs ring sizes of 2 or more")
	}
	if o.duration <= 0 || o.idle <= 0 || o.lightClients < 2 || o.heavyClients < 2 || o.heavyWindow < 1 || o.lightRate <= 0 {
		return errors.New("all: need positive --duration and --idle, 2+ clients, a positive rate and window")
	}
	if o.quietMessages < 1 || o.typingMessages < 0 {
		return errors.New("all: need --quiet-messages ≥ 1 and --typing-messages ≥ 0")
	}
	if o.img == "" {
		o.img = o.out
	}
	bin, err := ringnodeBinary(o.bin)
	if err != nil {
		return err
	}
	o.bin = bin
	dir, err := os.MkdirTemp("", "ringbench-all")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, err := storeMaker(o.db, dir)
	if err != nil {
		return err
	}
	res := newResults(o)
	res.loadAvg[0] = loadAvg()
	t0 := time.Now()
	for _, n := range o.sizes {
		fmt.Fprintf(log, "== %d nodes (%v so far; load average %s)\n", n, time.Since(t0).Round(time.Second), loadAvg())
		if l, err := strconv.ParseFloat(strings.Split(loadAvg(), ",")[0], 64); err == nil {
			res.set(n, "loadavg_1m_at_start", l, "runnable tasks")
		}
		if o.floorRounds > 0 {
			// The floor under the hop at the idle ring's pace, measured now:
			// how fast this machine wakes two idle processes varies.
			rtts, err := echoFloor(idleFloorGap, o.floorRounds)
			if err != nil {
				return fmt.Errorf("tcp floor: %w", err)
			}
			res.set(n, "tcp_floor_p50_us", float64(rtts[len(rtts)/2].Microseconds()), "µs")
		}
		b := &ringBench{bin: o.bin, dir: dir, nodes: n, trials: o.trials, idle: o.idle, out: log}
		b.newStore = func(ctx context.Context, phase string) (store.Store, string, func(), error) {
			return base(ctx, fmt.Sprintf("%s-n%d", phase, n))
		}
		if err := benchSize(ctx, b, o, res, log); err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
	}
	// Scaling against linear growth from 5 nodes.
	if p5 := res.get(5, "light_p50_ms"); !math.IsNaN(p5) {
		for _, n := range o.sizes {
			if v := res.get(n, "light_p50_ms"); !math.IsNaN(v) {
				res.set(n, "light_p50_vs_linear", v/(p5*float64(n)/5), "ratio")
			}
		}
	}
	res.loadAvg[1] = loadAvg()
	fmt.Fprintf(log, "done in %v\n", time.Since(t0).Round(time.Second))
	fmt.Fprint(stdout, res.markdown())
	if o.out != "" {
		if err := res.write(o.out, o.img); err != nil {
			return err
		}
		fmt.Fprintf(log, "wrote %s and the plots in %s\n", filepath.Join(o.out, "results.md"), o.img)
	}
	return nil
}

// benchSize runs every measurement on a ring of b.nodes nodes. A phase that
// fails is noted in the table and the others go on.
func benchSize(ctx context.Context, b *ringBench, o allOpts, res *results, log io.Writer) error {
	n := b.nodes
	phase := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		if err := fn(); err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(log, "%d nodes, %s: %v\n", n, name, err)
			res.note(n, "%s failed: %v", name, err)
			return
		}
		fmt.Fprintf(log, "%d nodes, %s: %v\n", n, name, time.Since(start).Round(100*time.Millisecond))
	}
	phase("idle and load", func() error { return loadPhases(ctx, b, o, res) })
	phase("store baseline", func() error { return baselinePhase(ctx, b, o, res) })
	phase("repair", func() error {
		ft, err := b.faultTrials(ctx)
		if err != nil {
			return err
		}
		res.setDurations(n, "repair_crash", ft.crash)
		res.setDurations(n, "repair_stall", ft.stall)
		res.setDurations(n, "repair_coordinator", ft.coord)
		res.setDurations(n, "repair_rejoin", ft.rejoin)
		return nil
	})
	if o.electionTrials > 0 {
		phase("elections", func() error {
			for _, m := range []election.Method{election.Ring, election.ChangRoberts, election.Bully} {
				for _, all := range []bool{false, true} {
					er, err := benchElection(ctx, m, n, all, o.electionTrials, 20*time.Millisecond)
					if err != nil {
						return fmt.Errorf("%s: %w", m, err)
					}
					mode := "one"
					if all {
						mode = "all"
					}
					key := fmt.Sprintf("election_%s_%s", m, mode)
					res.set(n, key+"_msgs", er.msgs, "messages")
					res.set(n, key+"_acks", er.acks, "messages")
					res.setDurations(n, key, er.times)
				}
			}
			return nil
		})
	}
	if o.failoverTrials > 0 {
		phase("failover", func() error {
			fb := *b
			fb.trials = o.failoverTrials
			for _, m := range election.Methods {
				first, elected, repaired, err := fb.failover(ctx, m, o.leaseTTL)
				if err != nil {
					return fmt.Errorf("%s: %w", m, err)
				}
				key := "failover_" + string(m)
				res.setDurations(n, key+"_first", first)
				res.setDurations(n, key+"_elected", elected)
				res.setDurations(n, key+"_repaired", repaired)
			}
			return nil
		})
	}
	return ctx.Err()
}

// loadPhases starts one ring with metrics on and measures it idle, with
// one conversation (quiet), then under light and heavy load.
func loadPhases(ctx context.Context, b *ringBench, o allOpts, res *results) error {
	n := b.nodes
	// The metrics ports stay bound here until their node starts, so that
	// the ring's own port search cannot hand them out again.
	addrs := make([]string, n)
	held := make([]net.Listener, n)
	defer func() {
		for _, l := range held {
			if l != nil {
				l.Close()
			}
		}
	}()
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		held[i], addrs[i] = l, l.Addr().String()
	}
	lb := *b
	lb.nodeFlags = func(id int64) []string {
		if l := held[id-1]; l != nil {
			l.Close()
			held[id-1] = nil
		}
		return []string{"--metrics-addr", addrs[id-1]}
	}
	r, stop, err := lb.startCluster(ctx, "load", []string{"--client-rate", "0", "--max-clients-per-ip", "1000", "--stats-interval", "1s"} /* every client is on 127.0.0.1 */)
	if err != nil {
		return err
	}
	defer stop()
	t0 := time.Now()
	if err := lb.waitRing(ctx, lb.ids(), false, 30*time.Second); err != nil {
		return fmt.Errorf("formation: %w (node logs: %s)", err, dumpLogs(r, fmt.Sprintf("formation-n%d", n)))
	}
	res.set(n, "formation_ms", ms(time.Since(t0)), "ms")
	// Settle: the first token comes after the start-up hand-offs.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return err
	}

	// Idle: no clients. Scrapes stay outside the CPU window.
	s0, err := scrapeAll(ctx, addrs)
	if err != nil {
		return err
	}
	pids := r.pids()
	cpu0, err := totalCPU(pids)
	if err != nil {
		return err
	}
	idleStart := time.Now()
	if err := sleepCtx(ctx, o.idle); err != nil {
		return err
	}
	cpu1, err := totalCPU(pids)
	if err != nil {
		return err
	}
	idleEnd := time.Now()
	res.set(n, "idle_cpu_pct", float64(cpu1-cpu0)/float64(idleEnd.Sub(idleStart))*100, "% of one core")
	s1, err := scrapeAll(ctx, addrs)
	if err != nil {
		return err
	}
	recordToken(res, n, "idle", s1.minus(s0))
	if p50, p99, k := hopStats(r, idleStart, idleEnd); k > 0 {
		res.set(n, "idle_hop_p50_us", p50, "µs")
		res.set(n, "idle_hop_p50_ms", p50/1000, "ms")
		res.set(n, "idle_hop_p99_us", p99, "µs")
		res.set(n, "idle_hop_intervals", float64(k), "count")
	}

	list, err := nodelist.Load(r.nodes)
	if err != nil {
		return err
	}
	addr := func(i int) string {
		return net.JoinHostPort(list[i%len(list)].Host, strconv.Itoa(list[i%len(list)].ClientPort))
	}
	clientAddrs := make([]string, len(list))
	for i := range list {
		clientAddrs[i] = addr(i)
	}
	if err := quietPhase(ctx, b.out, clientAddrs, addrs, o, res, n); err != nil {
		return err
	}
	loads := []struct {
		name string
		opts chatBenchOpts
	}{
		{"light", chatBenchOpts{nodes: n, clients: o.lightClients, rate: o.lightRate, arrivals: o.lightArrivals, duration: o.duration, users: "light"}},
		{"heavy", chatBenchOpts{nodes: n, clients: o.heavyClients, window: o.heavyWindow, duration: o.duration, users: "heavy"}},
	}
	for _, l := range loads {
		cb := &chatBench{o: l.opts, lat: make([][]time.Duration, l.opts.clients)}
		if err := cb.connect(ctx, addr); err != nil {
			cb.close()
			return fmt.Errorf("%s load: %w", l.name, err)
		}
		fmt.Fprintf(b.out, "%d nodes, %s load: %d clients logged in; sending for %v\n", n, l.name, l.opts.clients, o.duration)
		before, err := scrapeAll(ctx, addrs)
		if err != nil {
			cb.close()
			return err
		}
		hopFrom := time.Now()
		runErr := cb.run(ctx)
		hopTo := time.Now()
		after, err := scrapeAll(ctx, addrs)
		cb.close()
		cb.wg.Wait()
		if err != nil {
			return err
		}
		var all []time.Duration
		for _, x := range cb.lat {
			all = append(all, x...)
		}
		slices.Sort(all)
		if res.lat[n] == nil {
			res.lat[n] = map[string][]time.Duration{}
		}
		res.lat[n][l.name] = all
		p := l.name + "_"
		res.set(n, p+"sent", float64(cb.sent.Load()), "messages")
		res.set(n, p+"delivered", float64(len(all)), "messages")
		res.set(n, p+"elapsed_s", cb.elapsed.Seconds(), "s")
		res.set(n, p+"delivered_per_s", float64(len(all))/cb.elapsed.Seconds(), "messages/s")
		res.set(n, p+"p50_ms", ms(pctOf(all, 0.5)), "ms")
		res.set(n, p+"p90_ms", ms(pctOf(all, 0.9)), "ms")
		res.set(n, p+"p99_ms", ms(pctOf(all, 0.99)), "ms")
		res.set(n, p+"p999_ms", ms(pctOf(all, 0.999)), "ms")
		res.set(n, p+"max_ms", ms(pctOf(all, 1)), "ms")
		d := after.minus(before)
		recordToken(res, n, l.name, d)
		if v := d["ringchat_token_visits_total"]; v > 0 {
			res.set(n, p+"stored_per_visit", d["ringchat_messages_stored_total"]/v, "messages")
		}
		if p50, p99, k := hopStats(r, hopFrom, hopTo); k > 0 {
			res.set(n, p+"hop_p50_us", p50, "µs")
			res.set(n, p+"hop_p99_us", p99, "µs")
		}
		if runErr != nil {
			return fmt.Errorf("%s load: %w", l.name, runErr)
		}
		if int64(len(all)) != cb.sent.Load() {
			return fmt.Errorf("%s load: %d sent, %d delivered", l.name, cb.sent.Load(), len(all))
		}
	}
	return nil
}

// quietPhase measures one conversation, pingpong then typing, on the ring
// whose nodes' client addresses are clientAddrs (metricsAddrs: their
// metrics). A conversation that fails is noted and the phase goes on.
func quietPhase(ctx context.Context, log io.Writer, clientAddrs, metricsAddrs []string, o allOpts, res *results, n int) error {
	for _, q := range []conversationOpts{
		{pattern: patternPingpong, messages: o.quietMessages, seed: conversationSeed},
		{pattern: patternTyping, messages: o.typingMessages, seed: conversationSeed},
	} {
		if q.messages == 0 {
			continue
		}
		fmt.Fprintf(log, "%d nodes, quiet ring: one conversation, %d messages (%s)\n", n, q.messages, q.pattern)
		before, err := scrapeAll(ctx, metricsAddrs)
		if err != nil {
			return err
		}
		lat, err := converse(ctx, clientAddrs, q)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(log, "%d nodes, quiet ring: %v\n", n, err)
			res.note(n, "quiet ring, %s failed: %v", q.pattern, err)
			continue
		}
		after, err := scrapeAll(ctx, metricsAddrs)
		if err != nil {
			return err
		}
		slices.Sort(lat)
		if res.lat[n] == nil {
			res.lat[n] = map[string][]time.Duration{}
		}
		res.lat[n][q.pattern] = lat
		p := q.pattern + "_"
		res.set(n, p+"messages", float64(len(lat)), "messages")
		res.set(n, p+"p50_ms", ms(pctOf(lat, 0.5)), "ms")
		res.set(n, p+"p90_ms", ms(pctOf(lat, 0.9)), "ms")
		res.set(n, p+"p99_ms", ms(pctOf(lat, 0.99)), "ms")
		res.set(n, p+"max_ms", ms(pctOf(lat, 1)), "ms")
		recordToken(res, n, q.pattern, after.minus(before))
	}
	return nil
}

// recordToken records a phase's token figures from the metric deltas.
func recordToken(res *results, n int, phase string, d samples) {
	p := phase + "_"
	rot := d.histogram("ringchat_token_rotation_seconds")
	if histCount(rot) > 0 {
		res.set(n, p+"rotation_p50_ms", quantile(rot, 0.5)*1000, "ms")
		res.set(n, p+"rotation_p99_ms", quantile(rot, 0.99)*1000, "ms")
		res.set(n, p+"rotations", histCount(rot), "count")
		res.set(n, p+"rotation_mean_ms", d["ringchat_token_rotation_seconds_sum"]/histCount(rot)*1000, "ms")
	}
	hop := d.histogram("ringchat_token_hop_seconds")
	if histCount(hop) > 0 {
		res.set(n, p+"hop_hist_p50_us", quantile(hop, 0.5)*1e6, "µs")
		res.set(n, p+"hop_hist_p99_us", quantile(hop, 0.99)*1e6, "µs")
		res.set(n, p+"hops", histCount(hop), "count")
	}
	res.set(n, p+"token_visits", d["ringchat_token_visits_total"], "count")
	res.set(n, p+"regenerations", d["ringchat_token_regenerations_total"], "count")
}

// hopStats condenses the "token stats" log lines logged in [from, to+1 s]
// (an interval's line comes at its end): the median of the node-interval
// medians and the highest p99, in µs, and how many intervals had hops.
func hopStats(r *procRing, from, to time.Time) (p50, p99 float64, intervals int) {
	var p50s []float64
	for _, l := range r.logLines("token stats") {
		ts, _ := l["time"].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from.Add(time.Second)) || at.After(to.Add(time.Second)) {
			continue
		}
		if k, _ := l["hops"].(float64); k > 0 {
			p50s = append(p50s, l["hop_p50_us"].(float64))
			p99 = math.Max(p99, l["hop_p99_us"].(float64))
		}
	}
	if len(p50s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(p50s)
	return p50s[len(p50s)/2], p99, len(p50s)
}

// baselinePhase runs the store baseline with the heavy load's users.
func baselinePhase(ctx context.Context, b *ringBench, o allOpts, res *results) error {
	st, _, cleanup, err := b.newStore(ctx, "baseline")
	if err != nil {
		return err
	}
	defer cleanup()
	br, err := runBaseline(ctx, st, baselineOpts{nodes: b.nodes, clients: o.heavyClients, batch: o.baselineBatch,
		duration: o.duration, fetchLimit: 2000, perRecipient: 200})
	if err != nil {
		return err
	}
	n := b.nodes
	res.set(n, "baseline_messages", float64(br.messages), "messages")
	res.set(n, "baseline_per_s", br.perSecond, "messages/s")
	res.set(n, "baseline_tx_ms", ms(br.txMean), "ms")
	res.set(n, "baseline_transactions", float64(br.turns), "count")
	if v := res.get(n, "heavy_delivered_per_s"); !math.IsNaN(v) && br.perSecond > 0 {
		res.set(n, "ring_vs_baseline", v/br.perSecond, "ratio")
	}
	fmt.Fprintf(b.out, "%d nodes, store baseline: %d messages, %.0f/s, %v a transaction\n", n, br.messages, br.perSecond, br.txMean.Round(10*time.Microsecond))
	return nil
}

// dumpLogs writes every node's log into one file in the temporary
// directory, for a phase that failed, and returns its path.
func dumpLogs(r *procRing, name string) string {
	f, err := os.CreateTemp("", "ringbench-"+name+"-*.log")
	if err != nil {
		return "not kept: " + err.Error()
	}
	defer f.Close()
	for _, l := range r.runLogs() {
		state := "stopped"
		if l.running {
			state = "running"
		}
		fmt.Fprintf(f, "=== node %d (%s)\n", l.id, state)
		_, _ = f.Write(l.out)
	}
	return f.Name()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
