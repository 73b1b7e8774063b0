package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// scaleOpts are the flags of `ringbench scale`.
type scaleOpts struct {
	bin, db    string
	nodes      int
	users      int
	groupSize  int
	online     int
	messages   int
	expired    int
	backlog    int
	groupMsgs  int
	retention  time.Duration
	wait       time.Duration // deadline of one group message, one DM
	drainWait  time.Duration // deadline of the backlog's drain
	seeders    int
	dmInterval time.Duration
}

// The scale targets (issue 14).
const (
	scaleDMP99     = 100 * time.Millisecond
	scaleGroupP99  = time.Second
	scaleDrainRate = 5000.0 // messages a second
)

// scaleGroup is the big group's name.
const scaleGroup = "scale-all"

func newScaleCmd() *cobra.Command {
	o := scaleOpts{}
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "A ring with many users, a big group, a big history and a long backlog: no node may be wedged",
		Long: `scale seeds a fresh MariaDB database through the store API, then starts a ring of
ringnode processes over it and measures, with every wait bounded by a deadline:

  users        --users users (u00000...), --messages direct messages between them
               already acknowledged (history), --expired more of them stored eight
               days ago (the store opened with a clock a week and a day behind), so
               that a ring keeping --history-retention (a week) expires them during
               the run;
  group        a group of --group-size of those users, --online of them logged in
               (protocol 2, spread over the nodes); --group-messages messages sent one
               at a time by one online member: send to the last other online member
               shown (p50/p99), and the rows every table gained per group message
               (counted before and after, once the members acknowledged);
  backlog      a user away while --backlog direct messages were stored for it logs in
               (protocol 2, acknowledging): messages a second until it has them all;
  direct       all along, two other users send each other one direct message at a
               time: latency p50/p99;
  visits       failed critical sections (the nodes' metrics) and the nodes' log lines
               about visits over their time budget;
  size         the database's data and index bytes (information_schema).

It prints a table with the targets (DM p99 ≤ 100 ms, group message to every online
member ≤ 1 s p99, backlog ≥ 5,000 msg/s, no failed visit) and fails if one is missed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runScale(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bin, "bin", "", "ringnode binary (default: beside ringbench)")
	f.StringVar(&o.db, "db", "root@tcp(127.0.0.1:3306)/", "MariaDB server (driver DSN without a database)")
	f.IntVar(&o.nodes, "nodes", 5, "ring size")
	f.IntVar(&o.users, "users", 10000, "seeded users")
	f.IntVar(&o.groupSize, "group-size", 10000, "members of the big group (the first users)")
	f.IntVar(&o.online, "online", 1000, "group members logged in during the run, spread over the nodes")
	f.IntVar(&o.messages, "messages", 1000000, "direct messages of history (acknowledged), stored now")
	f.IntVar(&o.expired, "expired", 100000, "direct messages of history (acknowledged) stored eight days ago: they expire during the run")
	f.IntVar(&o.backlog, "backlog", 100000, "direct messages waiting for one user who logs in during the run")
	f.IntVar(&o.groupMsgs, "group-messages", 20, "group messages sent, one at a time")
	f.DurationVar(&o.retention, "history-retention", 7*24*time.Hour, "the nodes' --history-retention (must be under eight days for --expired to expire)")
	f.DurationVar(&o.wait, "wait", 10*time.Second, "deadline for one group message to reach every online member, and for one direct message")
	f.DurationVar(&o.drainWait, "drain-wait", 2*time.Minute, "deadline for the backlog to be drained")
	f.IntVar(&o.seeders, "seeders", 3, "transactions seeding the store at once")
	f.DurationVar(&o.dmInterval, "dm-interval", 100*time.Millisecond, "pause between two direct messages of the latency probe")
	return cmd
}

func (o scaleOpts) validate() error {
	var errs []error
	if o.db == "sqlite" {
		errs = append(errs, errors.New("--db: scale runs on MariaDB (it reads information_schema)"))
	}
	if o.nodes < 1 || o.users < 2 || o.groupSize < 2 || o.groupSize > o.users {
		errs = append(errs, errors.New("need --nodes ≥ 1, --users ≥ 2 and 2 ≤ --group-size ≤ --users"))
	}
	if o.online < 2 || o.online > o.groupSize {
		errs = append(errs, errors.New("need 2 ≤ --online ≤ --group-size (one online member sends)"))
	}
	if o.messages < 0 || o.expired < 0 || o.backlog < 0 || o.groupMsgs < 1 {
		errs = append(errs, errors.New("--messages, --expired and --backlog must not be negative, --group-messages positive"))
	}
	if o.expired > 0 && (o.retention <= 0 || o.retention >= 8*24*time.Hour) {
		errs = append(errs, errors.New("--expired needs a --history-retention between 0 and eight days"))
	}
	if o.wait <= 0 || o.drainWait <= 0 || o.seeders < 1 || o.dmInterval < 0 {
		errs = append(errs, errors.New("--wait, --drain-wait and --seeders must be positive"))
	}
	return errors.Join(errs...)
}

func userName(i int) string { return fmt.Sprintf("u%05d", i) }

// The users of the direct-message probe and of the backlog; not members of
// the group.
const (
	dmUserA     = "dm-a"
	dmUserB     = "dm-b"
	backlogUser = "away"
)

func runScale(ctx context.Context, stdout, log io.Writer, o scaleOpts) error {
	if err := o.validate(); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	bin, err := ringnodeBinary(o.bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ringbench-scale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	newStore, err := storeMaker(o.db, dir)
	if err != nil {
		return err
	}
	st, dsn, cleanup, err := newStore(ctx, "scale")
	if err != nil {
		return err
	}
	defer cleanup()
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer raw.Close()
	t0 := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(log, "[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	rep := &scaleReport{title: fmt.Sprintf("scale (%d nodes, MariaDB; %d users, group of %d with %d online, %d + %d expiring history, backlog %d)",
		o.nodes, o.users, o.groupSize, o.online, o.messages, o.expired, o.backlog)}

	// Seed.
	sd := &seeder{st: st, o: o}
	if err := sd.users(ctx); err != nil {
		return err
	}
	progress("seeded %d users and a group of %d", o.users, o.groupSize)
	seedStart := time.Now()
	// The week that expires is the oldest history, as in a store that
	// grew over time: the lowest sequence numbers, stored eight days ago.
	if o.expired > 0 {
		old, err := store.Open(ctx, dsn, store.Options{Now: func() time.Time { return time.Now().Add(-8 * 24 * time.Hour) }})
		if err != nil {
			return err
		}
		err = sd.history(ctx, old, o.expired, "x", true)
		old.Close()
		if err != nil {
			return err
		}
	}
	if err := sd.history(ctx, st, o.messages, "h", true); err != nil {
		return err
	}
	if err := sd.history(ctx, st, o.backlog, "b", false); err != nil {
		return err
	}
	seeded := time.Since(seedStart)
	progress("seeded %d messages of history, %d expiring, a backlog of %d in %v", o.messages, o.expired, o.backlog, seeded.Round(100*time.Millisecond))
	rep.figure("seeding the store (store API, batches of 1,000, "+strconv.Itoa(o.seeders)+" at once)",
		fmt.Sprintf("%d messages in %v (%.0f/s)", o.messages+o.expired+o.backlog, seeded.Round(100*time.Millisecond),
			float64(o.messages+o.expired+o.backlog)/seeded.Seconds()))
	st.Close()
	// A store holding this much history grew over weeks, and its server
	// flushed it long ago; seeding wrote it in a minute. The ring starts
	// once the server has written its dirty pages and purged the seeding's
	// undo history, so that the run measures the ring, not the seeding's
	// aftermath.
	settled, settleErr := settleStore(ctx, raw, 3*time.Minute)
	sm := fmt.Sprintf("%v", fmtDur(settled))
	if settleErr != nil {
		sm += " (not settled: " + settleErr.Error() + ")"
	}
	rep.figure("the database server's flushing and purge after seeding, waited out", sm)
	progress("store settled after seeding in %v", settled.Round(100*time.Millisecond))

	// The ring, with metrics.
	ring, list, addrs, stop, err := startScaleRing(bin, dir, dsn, o)
	if err != nil {
		return err
	}
	defer stop()
	nodeAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", list[i%len(list)].ClientPort) }
	before, err := scrapeWhenUp(ctx, addrs, 30*time.Second)
	if err != nil {
		return fmt.Errorf("scale: %w (node logs: %s)", err, dumpLogs(ring, "scale"))
	}
	progress("ring of %d nodes started", o.nodes)
	ringStart := time.Now()

	// The direct-message probe runs through everything.
	dm, err := newDMProbe(ctx, nodeAddr(1), nodeAddr(2), o)
	if err != nil {
		return fmt.Errorf("scale: direct-message probe: %w (node logs: %s)", err, dumpLogs(ring, "scale"))
	}
	dmCtx, dmStop := context.WithCancel(ctx)
	dmDone := make(chan struct{})
	go func() { defer close(dmDone); dm.run(dmCtx) }()
	stopDM := sync.OnceFunc(func() { dmStop(); <-dmDone; dm.close() })
	defer stopDM()

	// The online members.
	dm.setPhase(fmt.Sprintf("%d members logging in", o.online))
	g := &groupBench{o: o}
	if err := g.connect(ctx, nodeAddr); err != nil {
		return fmt.Errorf("scale: %w (node logs: %s)", err, dumpLogs(ring, "scale"))
	}
	defer g.close()
	progress("%d group members logged in", o.online)

	// The expiring week goes first (its deletions would count in the rows
	// of the group messages): the time the ring took to prune it.
	if o.expired > 0 {
		dm.setPhase("old history expiring")
		deadline := time.Now().Add(2 * time.Minute)
		for {
			left, err := expiredLeft(ctx, raw, o.retention)
			if err == nil && left == 0 {
				took := time.Since(ringStart)
				rep.figure(fmt.Sprintf("the expiring week (%d messages) pruned, from the ring's start", o.expired), fmtDur(took))
				progress("expired history pruned %v after the ring started", took.Round(100*time.Millisecond))
				break
			}
			if time.Now().After(deadline) || sleepCtx(ctx, 200*time.Millisecond) != nil {
				break // the check below reports what is left
			}
		}
	}

	// Rows: a window with the probe alone gives its rows per message; then
	// the group messages.
	dm.setPhase("quiet")
	rows0, err := countRows(ctx, raw)
	if err != nil {
		return err
	}
	dm0 := dm.sent.Load()
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return err
	}
	rows1, err := countRows(ctx, raw)
	if err != nil {
		return err
	}
	dm1 := dm.sent.Load()
	perDM := 0.0
	if d := dm1 - dm0; d > 0 {
		perDM = float64(rows1.total()-rows0.total()) / float64(d)
	}
	dm.setPhase("group messages")
	g.send(ctx, progress)
	waitQuiet(ctx, raw, 15*time.Second, perDM, dm.sent.Load)
	rows2, err := countRows(ctx, raw)
	if err != nil {
		return err
	}
	dm2 := dm.sent.Load()
	rep.latency(fmt.Sprintf("group message (%d sent), send to the last of %d other online members shown, p50", g.sent, o.online-1), &g.lat, 0.5, scaleGroupP99, o.wait)
	rep.latency("group message, p99", &g.lat, 0.99, scaleGroupP99, o.wait)
	if g.partial != "" {
		rep.figure("group messages that missed their deadline reached", g.partial)
	}
	groupRows := float64(rows2.total()-rows1.total()) - perDM*float64(dm2-dm1)
	rep.figure("rows stored per group message (every table, net, once acknowledged)",
		fmt.Sprintf("%.0f (%s over %d messages; %d direct messages in the window at %.1f rows each taken off)",
			groupRows/float64(g.sent), rows2.minus(rows1), g.sent, dm2-dm1, perDM))

	// The backlog.
	progress("backlog: %s logs in", backlogUser)
	dm.setPhase("backlog draining")
	got, took, drainErr := drainBacklog(ctx, nodeAddr(3), o)
	rate := 0.0
	if took > 0 {
		rate = float64(got) / took.Seconds()
	}
	m := fmt.Sprintf("%.0f msg/s (%d of %d in %v)", rate, got, o.backlog, fmtDur(took))
	if drainErr != nil {
		m += ": " + drainErr.Error()
	}
	rep.check("backlog drained to a returning user", fmt.Sprintf("≥ %.0f msg/s", scaleDrainRate), m,
		drainErr == nil && got == o.backlog && rate >= scaleDrainRate)
	progress("backlog: %s", m)

	// Expired history: none of it may be left once the nodes pruned.
	if o.expired > 0 {
		left, err := expiredLeft(ctx, raw, o.retention)
		m := fmt.Sprintf("%d of %d left", left, o.expired)
		if err != nil {
			m = "unknown: " + err.Error()
		}
		rep.check("history older than the retention, pruned during the run", "none left", m, err == nil && left == 0)
	}

	stopDM()
	rep.latency(fmt.Sprintf("direct message during it all (%d, one at a time), p50", dm.lat.count()), &dm.lat, 0.5, scaleDMP99, o.wait)
	rep.latency("direct message, p99", &dm.lat, 0.99, scaleDMP99, o.wait)
	for _, name := range dm.phases {
		w := dm.byPhase[name]
		p50, p99 := "—", "—"
		if d, ok := w.pct(0.5); ok {
			p50 = fmtDur(d)
		}
		if d, ok := w.pct(0.99); ok {
			p99 = fmtDur(d)
		}
		rep.figure(fmt.Sprintf("direct message while %s (%d)", name, w.count()), fmt.Sprintf("p50 %s, p99 %s, max %s", p50, p99, fmtDur(w.max())))
	}

	after, err := scrapeAll(ctx, addrs)
	failed := "unknown: " + fmt.Sprint(err)
	failedOK := false
	if err == nil {
		d := after.minus(before)
		failedOK = d["ringchat_critical_sections_failed_total"] == 0
		failed = fmt.Sprintf("%.0f failed critical sections (of %.0f visits)", d["ringchat_critical_sections_failed_total"], d["ringchat_token_visits_total"])
		rep.figure("fetches cut at their share of a visit (the visit committed)", fmt.Sprintf("%.0f", d["ringchat_fetches_cut_total"]))
	}
	lines := ring.logLines("chat: visit failed; the next one does less")
	overBudget := len(lines)
	failed += fmt.Sprintf("; %d log lines \"visit failed\"", overBudget)
	rep.check("visit failures on the nodes (metrics, logs)", "none", failed, failedOK && overBudget == 0)
	for i, l := range lines[:min(len(lines), 3)] {
		rep.figure(fmt.Sprintf("visit failure %d of %d", i+1, len(lines)), fmt.Sprintf("%v: %v (took %v ms)", l["time"], l["error"], l["took_ms"]))
	}

	if size, err := storeSize(ctx, raw); err == nil {
		rep.figure("store size (data + indexes, information_schema)", fmt.Sprintf("%.1f MiB", float64(size)/(1<<20)))
	}
	rep.figure("run time (seeding included)", time.Since(t0).Round(time.Second).String())
	rep.write(stdout)
	if bad := rep.failed(); len(bad) > 0 {
		return fmt.Errorf("scale: %d target(s) missed: %s (node logs: %s)", len(bad), strings.Join(bad, "; "), dumpLogs(ring, "scale"))
	}
	return nil
}

// startScaleRing starts the ring with a metrics port per node and the
// retention of the run, and waits for nothing: the clients' logins wait.
func startScaleRing(bin, dir, dsn string, o scaleOpts) (*procRing, []nodelist.Entry, []string, func(), error) {
	addrs := make([]string, o.nodes)
	held := make([]net.Listener, o.nodes)
	release := func() {
		for i, l := range held {
			if l != nil {
				l.Close()
				held[i] = nil
			}
		}
	}
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, nil, nil, nil, err
		}
		held[i], addrs[i] = l, l.Addr().String()
	}
	flags := []string{"--client-rate", "0", "--max-clients-per-ip", "10000" /* every client is on 127.0.0.1 */, "--history-retention", o.retention.String()}
	r, err := newProcRing(bin, dir, dsn, o.nodes, flags)
	if err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	r.nodeFlags = func(id int64) []string {
		if l := held[id-1]; l != nil {
			l.Close()
			held[id-1] = nil
		}
		return []string{"--metrics-addr", addrs[id-1]}
	}
	if err := r.startAll(); err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	list, err := nodelist.Load(r.nodes)
	if err != nil {
		r.stopAll()
		return nil, nil, nil, nil, err
	}
	return r, list, addrs, r.stopAll, nil
}

// scrapeWhenUp scrapes every node once all of them answer.
func scrapeWhenUp(ctx context.Context, addrs []string, limit time.Duration) (samples, error) {
	deadline := time.Now().Add(limit)
	for {
		s, err := scrapeAll(ctx, addrs)
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("metrics not up within %v: %w", limit, err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// seeder fills the store through its API.
type seeder struct {
	st   store.Store
	o    scaleOpts
	ids  []int64 // users by index
	dmA  int64
	dmB  int64
	away int64
}

const seedBatch = 1000

// users creates the users, the probe's and the backlog's, and the group.
func (s *seeder) users(ctx context.Context) error {
	s.ids = make([]int64, s.o.users)
	err := s.parallel(ctx, (s.o.users+seedBatch-1)/seedBatch, func(b int) error {
		return s.st.Update(ctx, func(tx store.Tx) error {
			for i := b * seedBatch; i < min(s.o.users, (b+1)*seedBatch); i++ {
				u, _, err := tx.EnsureUser(userName(i))
				if err != nil {
					return err
				}
				s.ids[i] = u.ID
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("seed users: %w", err)
	}
	var gid int64
	err = s.st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []struct {
			name string
			id   *int64
		}{{dmUserA, &s.dmA}, {dmUserB, &s.dmB}, {backlogUser, &s.away}} {
			u, _, err := tx.EnsureUser(p.name)
			if err != nil {
				return err
			}
			*p.id = u.ID
		}
		g, _, err := tx.EnsureGroup(scaleGroup)
		gid = g.ID
		return err
	})
	if err != nil {
		return fmt.Errorf("seed users: %w", err)
	}
	err = s.parallel(ctx, (s.o.groupSize+seedBatch-1)/seedBatch, func(b int) error {
		return s.st.Update(ctx, func(tx store.Tx) error {
			for i := b * seedBatch; i < min(s.o.groupSize, (b+1)*seedBatch); i++ {
				if _, err := tx.JoinGroup(gid, s.ids[i]); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("seed group: %w", err)
	}
	return nil
}

// history stores n direct messages in batches of seedBatch, every batch
// to one recipient from random senders. With acked they are acknowledged
// in the same transaction (history); else they wait for the backlog's
// user. prefix keeps the ids of each call apart.
func (s *seeder) history(ctx context.Context, st store.Store, n int, prefix string, acked bool) error {
	batches := (n + seedBatch - 1) / seedBatch
	return s.parallel(ctx, batches, func(b int) error {
		rng := rand.New(rand.NewPCG(uint64(b), uint64(prefix[0])))
		to := s.away
		if acked {
			to = s.ids[rng.IntN(len(s.ids))]
		}
		lo, hi := b*seedBatch, min(n, (b+1)*seedBatch)
		ms := make([]store.NewMessage, 0, hi-lo)
		rcpts := make([][]int64, 0, hi-lo)
		sentAt := time.Now()
		if prefix == "x" {
			sentAt = sentAt.Add(-8 * 24 * time.Hour)
		}
		for i := lo; i < hi; i++ {
			ms = append(ms, store.NewMessage{ID: fmt.Sprintf("%s%09d", prefix, i), SenderID: s.ids[rng.IntN(len(s.ids))],
				ToUserID: to, Content: fmt.Sprintf("seeded message %d of the scale benchmark", i), SentAt: sentAt, NodeID: 1})
			rcpts = append(rcpts, []int64{to})
		}
		err := retryDeadlock(ctx, func() error {
			return st.Update(ctx, func(tx store.Tx) error {
				ins, err := tx.InsertMessages(ms, rcpts)
				if err != nil || !acked {
					return err
				}
				seqs := make([]int64, len(ins))
				for i, in := range ins {
					seqs[i] = in.Seq
				}
				_, err = tx.AckSeqs(to, seqs)
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("seed messages %s%d-%d: %w", prefix, lo, hi, err)
		}
		return nil
	})
}

// retryDeadlock runs fn again, a few times, when the server chose its
// transaction as a deadlock's victim (seeding transactions run at once).
func retryDeadlock(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		var me *mysql.MySQLError
		if err == nil || try == 5 || !errors.As(err, &me) || (me.Number != 1213 && me.Number != 1205) {
			return err
		}
		if err := sleepCtx(ctx, time.Duration(try)*20*time.Millisecond); err != nil {
			return err
		}
	}
}

// parallel runs fn(0..n-1) on --seeders goroutines; the first error stops
// the others from starting more.
func (s *seeder) parallel(ctx context.Context, n int, fn func(int) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range min(n, s.o.seeders) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				stop := first != nil
				mu.Unlock()
				if i >= n || stop || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// dmProbe sends one direct message at a time between two users on two
// nodes, alternating the direction, and times each send to receipt.
type dmProbe struct {
	o    scaleOpts
	a, b *client.Conn
	got  [2]chan string // contents received by a and b
	sent atomic.Int64
	lat  waits // written by run only; read after it ends
	wg   sync.WaitGroup
	// phase names what the bench is doing (setPhase); each sample is
	// also kept under it (byPhase, in order of phases; run only).
	phase   atomic.Pointer[string]
	phases  []string
	byPhase map[string]*waits
}

// setPhase names what the samples from now on are taken during.
func (p *dmProbe) setPhase(name string) { p.phase.Store(&name) }

// sample keeps one sample, overall and under the current phase.
func (p *dmProbe) sample(d time.Duration, missed bool) {
	name := "start"
	if ph := p.phase.Load(); ph != nil {
		name = *ph
	}
	w := p.byPhase[name]
	if w == nil {
		if p.byPhase == nil {
			p.byPhase = map[string]*waits{}
		}
		w = &waits{}
		p.byPhase[name] = w
		p.phases = append(p.phases, name)
	}
	for _, t := range []*waits{&p.lat, w} {
		if missed {
			t.miss()
		} else {
			t.add(d)
		}
	}
}

func newDMProbe(ctx context.Context, addrA, addrB string, o scaleOpts) (*dmProbe, error) {
	p := &dmProbe{o: o, got: [2]chan string{make(chan string, 64), make(chan string, 64)}}
	dial := func(addr, user string) (*client.Conn, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return client.DialV2(cctx, []string{addr}, user, "", client.Options{AutoAck: true, Timeout: 30 * time.Second})
	}
	var err error
	if p.a, err = dial(addrA, dmUserA); err != nil {
		return nil, err
	}
	if p.b, err = dial(addrB, dmUserB); err != nil {
		p.a.Close()
		return nil, err
	}
	for i, c := range []*client.Conn{p.a, p.b} {
		p.wg.Go(func() {
			for ev := range c.Events() {
				if m, ok := ev.(client.ChatMessage); ok {
					select {
					case p.got[i] <- m.Content:
					default: // the prober gave up on it
					}
				}
			}
		})
	}
	return p, nil
}

func (p *dmProbe) run(ctx context.Context) {
	conns := [2]*client.Conn{p.a, p.b}
	for k := 0; ctx.Err() == nil; k++ {
		from, to := k%2, 1-k%2
		text := fmt.Sprintf("dm %d", k)
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, p.o.wait)
		_, err := conns[from].Post(sctx, client.ToUser(conns[to].User()), text)
		if err == nil {
			p.sent.Add(1)
			err = awaitContent(sctx, p.got[to], text)
		}
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			p.sample(0, true)
		default:
			p.sample(time.Since(start), false)
		}
		if sleepCtx(ctx, p.o.dmInterval) != nil {
			return
		}
	}
}

// awaitContent waits for text on ch, skipping older contents.
func awaitContent(ctx context.Context, ch <-chan string, text string) error {
	for {
		select {
		case s := <-ch:
			if s == text {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *dmProbe) close() {
	p.a.Close()
	p.b.Close()
	p.wg.Wait()
}

// groupBench is the online members of the big group and the sender.
type groupBench struct {
	o     scaleOpts
	conns []*client.Conn
	wg    sync.WaitGroup

	mu      sync.Mutex
	arrived map[string]int // content → members who have it
	full    chan string    // contents every other online member has

	sent    int
	lat     waits
	partial string
}

func (g *groupBench) connect(ctx context.Context, addr func(int) string) error {
	g.arrived = map[string]int{}
	g.full = make(chan string, 16)
	var err error
	if g.conns, err = dialAll(ctx, g.o.online, addr, userName); err != nil {
		return err
	}
	for i, c := range g.conns {
		if i == 0 {
			g.wg.Go(func() {
				for range c.Events() { // the sender's own events
				}
			})
			continue
		}
		g.wg.Go(func() {
			for ev := range c.Events() {
				if m, ok := ev.(client.ChatMessage); ok && m.To.Group {
					g.mu.Lock()
					g.arrived[m.Content]++
					if g.arrived[m.Content] == g.o.online-1 {
						select {
						case g.full <- m.Content:
						default:
						}
					}
					g.mu.Unlock()
				}
			}
		})
	}
	return nil
}

// send sends the group messages one at a time; each waits (up to --wait)
// until every other online member has it. Two misses in a row end the
// series (the sender's node is taken for wedged).
func (g *groupBench) send(ctx context.Context, progress func(string, ...any)) {
	sender := g.conns[0]
	misses := 0
	var partial []string
	for k := range g.o.groupMsgs {
		text := fmt.Sprintf("group %d", k)
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, g.o.wait)
		_, err := sender.Post(sctx, client.ToGroup(scaleGroup), text)
		if err == nil {
			g.sent++
			err = awaitContent(sctx, g.full, text)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.lat.miss()
			misses++
			g.mu.Lock()
			partial = append(partial, fmt.Sprintf("%s: %d of %d", text, g.arrived[text], g.o.online-1))
			g.mu.Unlock()
			progress("group message %d missed its %v deadline", k, g.o.wait)
			if misses >= 2 {
				partial = append(partial, "series stopped after two misses in a row")
				break
			}
			continue
		}
		misses = 0
		g.lat.add(time.Since(start))
	}
	g.partial = strings.Join(partial, "; ")
}

func (g *groupBench) close() {
	for _, c := range g.conns {
		if c != nil {
			c.Close()
		}
	}
	g.wg.Wait()
}

// drainBacklog logs the backlog's user in and counts its messages until
// it has them all or the deadline passes; it returns how many distinct
// messages arrived and the time from the login's start to the last.
func drainBacklog(ctx context.Context, addr string, o scaleOpts) (int, time.Duration, error) {
	if o.backlog == 0 {
		return 0, 0, nil
	}
	dctx, cancel := context.WithTimeout(ctx, o.drainWait)
	defer cancel()
	start := time.Now()
	c, err := client.DialV2(dctx, []string{addr}, backlogUser, "", client.Options{AutoAck: true, Timeout: 30 * time.Second})
	if err != nil {
		return 0, 0, fmt.Errorf("log in: %w", err)
	}
	defer c.Close()
	seen := make(map[string]struct{}, o.backlog)
	var last time.Time
	for len(seen) < o.backlog {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return len(seen), last.Sub(start), fmt.Errorf("connection ended: %v", c.Err())
			}
			if m, ok := ev.(client.ChatMessage); ok {
				seen[m.ID] = struct{}{}
				last = time.Now()
			}
		case <-dctx.Done():
			took := time.Since(start)
			return len(seen), took, fmt.Errorf("deadline %v passed", o.drainWait)
		}
	}
	return len(seen), last.Sub(start), nil
}

// tableRows are row counts by table.
type tableRows map[string]int64

func (t tableRows) total() int64 {
	var n int64
	for _, v := range t {
		n += v
	}
	return n
}

// minus describes the tables whose count changed since before.
func (t tableRows) minus(before tableRows) string {
	var parts []string
	for name, v := range t {
		if d := v - before[name]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s %+d", name, d))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// countRows counts the rows of every table of the database (exact
// counts, not the estimates of information_schema).
func countRows(ctx context.Context, db *sql.DB) (tableRows, error) {
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'")
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := tableRows{}
	for _, n := range names {
		var k int64
		// Table names come from information_schema, not from input.
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+strings.ReplaceAll(n, "`", "``")+"`").Scan(&k); err != nil {
			return nil, fmt.Errorf("count %s: %w", n, err)
		}
		out[n] = k
	}
	return out, nil
}

// waitQuiet waits (up to limit) until two row counts half a second apart
// differ by no more than the probe's direct messages in between (perDM
// rows each, sent counting them) explain: the online members have
// acknowledged what they were shown.
func waitQuiet(ctx context.Context, db *sql.DB, limit time.Duration, perDM float64, sent func() int64) {
	deadline := time.Now().Add(limit)
	prev, _ := countRows(ctx, db)
	k := sent()
	for time.Now().Before(deadline) && sleepCtx(ctx, 500*time.Millisecond) == nil {
		cur, err := countRows(ctx, db)
		if err != nil {
			return
		}
		k2 := sent()
		if d := float64(cur.total()-prev.total()) - perDM*float64(k2-k); d >= -2 && d <= 2 {
			return
		}
		prev, k = cur, k2
	}
}

// expiredLeft counts the messages stored before the retention's cutoff.
func expiredLeft(ctx context.Context, db *sql.DB, retention time.Duration) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE stored_us < ?", time.Now().Add(-retention).UnixMicro()).Scan(&n)
	return n, err
}

// settleStore waits, up to limit, until the database server has
// checkpointed the seeding's redo log (to where its adaptive flushing
// rests) and purged its undo history.
func settleStore(ctx context.Context, db *sql.DB, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		vals := map[string]int64{}
		rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
			"('Innodb_checkpoint_age', 'Innodb_checkpoint_max_age', 'Innodb_history_list_length')")
		if err != nil {
			return time.Since(start), err
		}
		for rows.Next() {
			var k string
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return time.Since(start), err
			}
			vals[k] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return time.Since(start), err
		}
		age, maxAge, history := vals["Innodb_checkpoint_age"], vals["Innodb_checkpoint_max_age"], vals["Innodb_history_list_length"]
		if age*5 <= maxAge && history < 1000 {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return time.Since(start), fmt.Errorf("checkpoint age %d of %d, undo history %d", age, maxAge, history)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return time.Since(start), err
		}
	}
}

// storeSize is the database's data and index bytes.
func storeSize(ctx context.Context, db *sql.DB) (int64, error) {
	var n sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n)
	return n.Int64, err
}
