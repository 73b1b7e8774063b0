package chaos

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/procutil"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/wire"
)

// runner is one run.
type runner struct {
	cfg   Config
	start time.Time
	out   sync.Mutex

	dir    string
	db     *PrivateDB // nil with an external server
	dsn    string
	galera *procutil.Galera // DB "galera"
	// nodeDSN is a node's --db: with Galera, its servers in an order
	// that starts at a server of its own.
	nodeDSN func(id int64) string
	sqlDB   *sql.DB
	st      store.Store
	obs     *observer
	procs   *procs
	work    *workload
	host    *hostile
	samp    *sampler
	pause   *pauseWatch
	sched   *scheduler
	metrics bool
	netemOK bool
	netemNo string
	dbNote  string
	lab     *netLab // network faults, nil when off or not possible here
	netNo   string  // why there are no network faults

	fmu      sync.Mutex
	injected map[Kind]int

	cmu      sync.Mutex
	cleanups []func()

	finalTerm []string // final SIGTERM exits that were not 0
	// counters are the live nodes' own drop counters at the end (from
	// their /metrics), by process id and reason; nil without metrics.
	counters map[int]map[string]float64
}

func (r *runner) note(format string, args ...any) {
	r.out.Lock()
	defer r.out.Unlock()
	fmt.Fprintf(r.cfg.Out, "[%7.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *runner) since(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return fmt.Sprintf("%.1fs", t.Sub(r.start).Seconds())
}

func (r *runner) countFault(k Kind) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	r.injected[k]++
}

func (r *runner) addCleanup(f func()) {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runner) cleanup() {
	r.cmu.Lock()
	fs := slices.Clone(r.cleanups)
	r.cmu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// Replay is the command that runs cfg again.
func Replay(cfg Config) string {
	s := fmt.Sprintf("make chaos SEED=%d DURATION=%s NODES=%d CLIENTS=%d", cfg.Seed, cfg.Duration, cfg.Nodes, cfg.Clients)
	if cfg.DB != "private" && cfg.Lab == "" { // NET=lab: the lab's store
		s += " DB='" + cfg.DB + "'"
	}
	if cfg.Net && cfg.Lab != "" {
		s += " NET=lab" // the lab's name and subnet: make's NETLAB_NAME and NETLAB_SUBNET
	} else if cfg.Net {
		s += " NET=1"
	}
	var extra []string
	if cfg.Election != string(election.Default) {
		extra = append(extra, "--election "+cfg.Election)
	}
	if !slices.Equal(cfg.Faults, AllKinds) {
		extra = append(extra, "--faults "+kindList(cfg.Faults))
	}
	if cfg.BigGroup != DefaultConfig().BigGroup {
		extra = append(extra, fmt.Sprintf("--big-group %d", cfg.BigGroup))
	}
	if cfg.Rate != DefaultConfig().Rate {
		extra = append(extra, fmt.Sprintf("--rate %g", cfg.Rate))
	}
	if !cfg.Hostile {
		extra = append(extra, "--hostile=false")
	}
	if cfg.Net && cfg.NetLong != DefaultConfig().NetLong {
		extra = append(extra, "--net-long "+cfg.NetLong.String())
	}
	if cfg.MoveStyle != "mixed" {
		extra = append(extra, "--move-style "+cfg.MoveStyle)
	}
	d := DefaultConfig()
	for _, x := range []struct {
		name     string
		got, def [2]time.Duration
	}{{"gap", cfg.Gap, d.Gap}, {"hold", cfg.Hold, d.Hold}, {"client-every", cfg.ClientEvery, d.ClientEvery}, {"net-hold", cfg.NetHold, d.NetHold}} {
		if x.got != x.def {
			extra = append(extra, fmt.Sprintf("--%s-min %s --%s-max %s", x.name, x.got[0], x.name, x.got[1]))
		}
	}
	if len(extra) > 0 {
		s += " ARGS='" + strings.ReplaceAll(strings.Join(extra, " "), ", ", ",") + "'"
	}
	return s
}

// Run runs the suite and returns its report. An error means the run could
// not be carried out (no database, a port in use, interrupted); failed
// checks are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Seed = binary.BigEndian.Uint64(b[:]) >> 16 // short enough to type
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(cfg.Ringnode); err == nil {
		cfg.Ringnode = abs // the nodes run in the work directory
	}
	r := &runner{cfg: cfg, start: time.Now(), injected: map[Kind]int{}}
	defer r.cleanup()
	rep, err := r.run(ctx)
	if rep == nil && cfg.WorkDir == "" && r.dir != "" {
		if ents, rerr := os.ReadDir(r.dir); rerr == nil && len(ents) == 0 {
			_ = os.Remove(r.dir) // nothing in it worth keeping
		}
	}
	if rep != nil {
		rep.Dir = r.dir
		keep := cfg.Keep || !rep.OK() || err != nil
		if !keep && cfg.WorkDir == "" {
			r.addCleanup(func() { _ = os.RemoveAll(r.dir) })
			rep.Dir = ""
		}
	}
	return rep, err
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0x63686173))
	r.note("ringchaos: seed %d, %d nodes, %d clients at %g msg/s, %s of faults; replay: %s",
		cfg.Seed, cfg.Nodes, cfg.Clients, cfg.Rate, cfg.Duration, Replay(cfg))

	var err error
	if r.dir = cfg.WorkDir; r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "ringchaos-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	r.note("work directory (logs, node list, database): %s", r.dir)

	kinds := slices.Clone(cfg.Faults)
	r.netemOK, r.netemNo = false, "not enabled"
	if slices.Contains(kinds, NetDelay) {
		r.netemOK, r.netemNo = netemUsable()
		if !r.netemOK {
			r.note("net-delay: NOT AVAILABLE HERE, skipped: %s", r.netemNo)
		}
	}
	if !r.netemOK {
		kinds = slices.DeleteFunc(kinds, func(k Kind) bool { return k == NetDelay })
	}

	// The database, then the network faults' table (it needs the
	// store's address).
	if err := r.setupDB(ctx, &kinds); err != nil {
		return nil, err
	}
	lay := r.openLab(&kinds)

	// The ring.
	// On lab hosts a node's loopback metrics address is its host's own.
	r.metrics = hasFlag(cfg.Ringnode, "--metrics-addr") && (lay == nil || lay.Lab == nil)
	pprof := r.metrics && hasFlag(cfg.Ringnode, "--pprof") // goroutine counts come from pprof
	perIP := hasFlag(cfg.Ringnode, "--max-clients-per-ip")
	key := "ringchaos-cluster-key-" + hex.EncodeToString(binary.BigEndian.AppendUint64(nil, cfg.Seed))
	flags := map[int64][]string{}
	methods := map[int64]string{}
	for id := int64(1); id <= int64(cfg.Nodes); id++ {
		m := cfg.Election
		if m == "mixed" {
			voting := []election.Method{election.Ring, election.ChangRoberts, election.Bully}
			m = string(voting[rng.IntN(len(voting))])
		}
		methods[id] = m
		flags[id] = []string{"--election", m}
		if pprof {
			flags[id] = append(flags[id], "--pprof")
		}
		if lay != nil && lay.Lab != nil {
			// Off loopback a node asks for passwords; the clients have none.
			flags[id] = append(flags[id], "--auth", "open")
		}
		if perIP {
			// Every client is on 127.0.0.1, and after kills most of them
			// may sit on one node.
			flags[id] = append(flags[id], "--max-clients-per-ip", "1000")
		}
	}
	r.procs, err = newProcs(cfg.Ringnode, r.dir, r.nodeDSN, key, cfg.Nodes, r.metrics, flags, lay, r.note)
	if err != nil {
		return nil, err
	}
	r.procs.logLevel = cfg.NodeLogLevel
	r.addCleanup(r.procs.killAll)
	r.note("ring: %d nodes, elections %v, node list %s, metrics/pprof %v", cfg.Nodes, methods, r.procs.nodes, r.metrics)
	if err := r.procs.start(1); err != nil {
		return nil, err
	}
	if r.st, err = openMigrated(ctx, r.dsn, func() error {
		if ex := r.procs.takeUnexpected(); len(ex) > 0 {
			b, _ := os.ReadFile(ex[0].LogPath)
			return fmt.Errorf("node 1 exited at start: %s", tail(b, 1000))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	r.addCleanup(func() { r.st.Close() })
	r.obs = &observer{st: r.st, poll: 50 * time.Millisecond}
	for _, id := range r.procs.ids()[1:] {
		if err := r.procs.start(id); err != nil {
			return nil, err
		}
	}
	formed := time.Now()
	if _, err := r.obs.settled(ctx, r.procs.ids(), 2*cfg.RepairTimeout); err != nil {
		return nil, fmt.Errorf("the ring did not form: %w (logs in %s)", err, r.dir)
	}
	r.note("ring formed in %s", ms(time.Since(formed)))

	// Observers and the barrage.
	bg, stopBg := context.WithCancel(ctx)
	defer stopBg()
	var bgWG sync.WaitGroup
	r.samp = newSampler(r.procs, cfg.SampleEvery)
	bgWG.Go(func() { r.samp.run(bg) })
	r.pause = newPauseWatch(r.st, 20*time.Millisecond)
	bgWG.Go(func() { r.pause.run(bg) })
	keyBytes, _, err := wire.LoadKey("", key)
	if err != nil {
		return nil, err
	}
	if r.host, err = newHostile(r.procs, r.st, keyBytes, rng.Uint64()); err != nil {
		return nil, err
	}

	// The big group's offline members.
	if cfg.BigGroup > 0 {
		t := time.Now()
		if err := seedBigGroup(ctx, r.st, cfg.BigGroup); err != nil {
			return nil, err
		}
		r.note("group %s: %d offline members seeded in %s", BigGroupName, cfg.BigGroup, ms(time.Since(t)))
	}

	// The clients.
	addrs := make([]string, 0, cfg.Nodes)
	for _, id := range r.procs.ids() {
		addrs = append(addrs, net.JoinHostPort(r.procs.addrs[id].Host, strconv.Itoa(r.procs.addrs[id].Client)))
	}
	r.work = newWorkload(cfg, rng, addrs, r.procs.ids(), r.note)
	cctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	sctx, cancel := context.WithTimeout(cctx, 2*cfg.RepairTimeout)
	err = r.work.setup(sctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("clients could not log in: %w", err)
	}
	groups := make([]string, 0, len(r.work.members))
	for g, m := range r.work.members {
		groups = append(groups, fmt.Sprintf("%s:%d", g, len(m)))
	}
	slices.Sort(groups)
	r.note("%d clients logged in, groups (members) %s", len(r.work.users), strings.Join(groups, " "))

	// The fault phase.
	r.sched = &scheduler{r: r, rng: mrand.New(mrand.NewPCG(rng.Uint64(), rng.Uint64())), live: r.procs.ids()}
	moveRNG := mrand.New(mrand.NewPCG(rng.Uint64(), rng.Uint64()))
	r.work.run(cctx)
	faultStart := time.Now()
	until := faultStart.Add(cfg.Duration)
	var hostWG sync.WaitGroup
	hctx, stopHost := context.WithCancel(bg)
	defer stopHost()
	if cfg.Hostile {
		hostWG.Go(func() { r.host.run(hctx) })
	}
	mctx, stopMoves := context.WithCancel(ctx)
	var moveWG sync.WaitGroup
	if slices.Contains(kinds, ClientMove) {
		moveWG.Go(func() { r.moves(mctx, moveRNG, r.sched, until) })
	}
	ringKinds := slices.DeleteFunc(slices.Clone(kinds), func(k Kind) bool { return k == ClientMove })
	r.note("fault phase: %s, ring faults %s", cfg.Duration, kindList(ringKinds))
	var faultErr error
	if len(ringKinds) > 0 {
		faultErr = r.sched.run(ctx, ringKinds, until)
	} else {
		wait(ctx, time.Until(until))
	}
	moveWG.Wait()
	stopMoves()
	if ctx.Err() != nil {
		return nil, errInterrupted
	}
	if faultErr != nil {
		r.note("!!! fault phase ended early: %v", faultErr)
	}
	faultEnd := time.Now()

	// Bring everything back, stop the barrage and the senders, drain.
	r.restore(ctx)
	stopHost()
	hostWG.Wait()
	r.work.sending.Store(false)
	r.note("fault phase over after %s; senders finish their last message, then the drain (up to %s)",
		ms(faultEnd.Sub(faultStart)), cfg.DrainTimeout)
	drained := r.drain(ctx, cfg.DrainTimeout)
	if ctx.Err() != nil {
		return nil, errInterrupted
	}
	if _, err := r.obs.settled(ctx, r.sched.live, cfg.RepairTimeout); err != nil {
		r.sched.record(faultRecord{Kind: "final", Phase: "final", At: time.Now(), Err: err.Error()})
	}
	stopClients()
	r.work.closeAll()

	// The nodes' own counters, then every node leaves with SIGTERM and
	// must exit 0.
	if r.metrics {
		r.counters = r.scrapeCounters(ctx)
	}
	stopBg()
	bgWG.Wait()
	r.finalStop()
	r.sched.reconcileExitsOnly()

	rep := r.check(ctx, span{faultStart, faultEnd}, drained, faultErr)
	return rep, nil
}

// setupDB starts the private server or creates a database on the given
// one, and drops the database restart fault when it cannot be done.
func (r *runner) setupDB(ctx context.Context, kinds *[]Kind) error {
	name := fmt.Sprintf("ringchaos_%d_%d", r.cfg.Seed%1_000_000, time.Now().Unix()%1_000_000)
	server := r.cfg.DB
	r.nodeDSN = func(int64) string { return r.dsn }
	if server != "galera" {
		dropKind(r, kinds, GaleraKill, "galera-kill: skipped: DB=galera runs a Galera cluster whose servers it kills")
	}
	if server == "galera" {
		return r.setupGalera(ctx, kinds, name)
	}
	if server == "private" {
		db, err := StartPrivateDB(ctx, filepath.Join(r.dir, "mariadb"))
		switch {
		case errors.Is(err, ErrNoMariaDB):
			return fmt.Errorf("%w: install MariaDB (scripts/mariadb.sh install), or give a server with DB=<dsn> (no MariaDB restarts then)", err)
		case err != nil:
			return err
		}
		r.db = db
		r.addCleanup(db.Stop)
		server = db.ServerDSN()
		r.dbNote = fmt.Sprintf("private mariadbd on 127.0.0.1:%d, data in %s", db.Port(), filepath.Join(r.dir, "mariadb"))
	} else {
		// The driver's form may name no database; the URL form must.
		if c, err := mysql.ParseDSN(server); err == nil {
			c.DBName = ""
			server = c.FormatDSN()
		} else if d, err := store.ParseDSN(server); err == nil && d.Dialect == "mysql" {
			c := d.MySQL.Clone()
			c.DBName = ""
			server = c.FormatDSN()
		} else if err != nil {
			return fmt.Errorf("db: %w", err)
		} else {
			return fmt.Errorf("db: %s is not MariaDB", d)
		}
		r.dbNote = "external server " + redact(server) + " (shared: never restarted)"
		dropKind(r, kinds, DBRestart, "mariadb-restart: skipped: the database is an external server, which is not ours to restart (DB=private runs one that is)")
	}
	dsn, err := CreateDatabase(ctx, server, name)
	if err != nil {
		return err
	}
	r.dsn = dsn
	if r.db == nil {
		r.addCleanup(func() {
			if !r.cfg.Keep {
				_ = DropDatabase(context.Background(), dsn)
			}
		})
	}
	cfg, _ := mysql.ParseDSN(dsn)
	cfg.Timeout = 3 * time.Second
	if r.sqlDB, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		return err
	}
	r.addCleanup(func() { r.sqlDB.Close() })
	r.note("database: %s, %s", r.dbNote, name)
	return nil
}

// dropKind removes fault kind k from kinds, saying why, if it is there.
func dropKind(r *runner, kinds *[]Kind, k Kind, why string) {
	if slices.Contains(*kinds, k) {
		r.note("%s", why)
		*kinds = slices.DeleteFunc(*kinds, func(x Kind) bool { return x == k })
	}
}

// setupGalera starts a 3-server Galera cluster of the run's own and
// creates the database on it; the nodes are spread over the servers.
func (r *runner) setupGalera(ctx context.Context, kinds *[]Kind, name string) error {
	dropKind(r, kinds, DBRestart, "mariadb-restart: skipped: DB=galera kills one server of the cluster instead (galera-kill)")
	if missing := procutil.GaleraMissing(); missing != "" {
		return fmt.Errorf("db galera: %s", missing)
	}
	g, err := procutil.NewGalera(r.cfg.GaleraScript)
	if err != nil {
		return err
	}
	r.galera = g
	r.addCleanup(func() {
		if r.cfg.Keep {
			r.note("galera cluster kept running in %s (GALERA_DIR=%s GALERA_PORT=%d GALERA_GCOMM_PORT=%d %s down)",
				g.Dir, g.Dir, g.Port, g.GComm, g.Script)
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Down(dctx); err != nil {
			r.note("!!! galera down: %v", err)
		}
	})
	r.note("starting a 3-server Galera cluster on 127.0.0.1:%d-%d", g.Port, g.Port+procutil.GaleraServers-1)
	if err := g.Up(ctx); err != nil {
		return err
	}
	if _, err := CreateDatabase(ctx, "root@tcp("+g.Host(1)+")/", name); err != nil {
		return err
	}
	r.dsn = g.DSN(name, 1)
	r.nodeDSN = func(id int64) string { return g.DSN(name, int(id-1)%procutil.GaleraServers+1) }
	r.dbNote = fmt.Sprintf("Galera cluster of %d servers on 127.0.0.1:%d-%d, data in %s", procutil.GaleraServers,
		g.Port, g.Port+procutil.GaleraServers-1, g.Dir)
	if r.sqlDB, err = store.OpenPool(ctx, r.dsn); err != nil {
		return err
	}
	r.addCleanup(func() { r.sqlDB.Close() })
	r.note("database: %s, %s", r.dbNote, name)
	return nil
}

func redact(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(dsn)"
	}
	if c.Passwd != "" {
		c.Passwd = "xxxxx"
	}
	return c.FormatDSN()
}

// hasFlag reports whether `bin run --help` lists flag.
func hasFlag(bin, flag string) bool {
	out, _ := exec.Command(bin, "run", "--help").CombinedOutput()
	return strings.Contains(string(out), flag)
}

// openMigrated opens the store once the first node has migrated it;
// alive reports a node that died meanwhile.
func openMigrated(ctx context.Context, dsn string, alive func() error) (store.Store, error) {
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if err := alive(); err != nil {
			return nil, err
		}
		s, err := store.Open(ctx, dsn, store.Options{})
		if err == nil {
			v, err := store.AppliedMigrations(ctx, s)
			if err == nil && len(v) > 0 {
				return s, nil
			}
			s.Close()
			if last = err; err == nil {
				last = errors.New("no schema yet")
			}
		} else {
			last = err
		}
		wait(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("the store was not migrated within 90s: %v", last)
}

// restore brings every node back after the fault phase: stopped ones
// continue, dead ones start, the database runs.
func (r *runner) restore(ctx context.Context) {
	if r.db != nil {
		r.db.mu.Lock()
		down := r.db.cmd == nil
		r.db.mu.Unlock()
		if down {
			if err := r.db.Start(ctx); err != nil {
				r.note("!!! restart the private mariadbd: %v", err)
			}
		}
	}
	s := r.sched
	s.reconcile()
	changed := false
	for _, id := range r.procs.ids() {
		in := r.procs.running(id)
		switch {
		case in == nil:
			r.note("restore: start node %d", id)
			if err := r.procs.restart(id); err != nil {
				r.note("!!! %v", err)
				continue
			}
			changed = true
		case in.Stopped():
			r.note("restore: SIGCONT node %d", id)
			_ = r.procs.stop(id, false)
			changed = true
		}
		s.add(id)
	}
	if changed {
		_ = s.settle(ctx, "restore", "restore", 0, time.Now(), "end of the fault phase")
	}
}

// drain waits until every sender's last message is stored or refused and
// every stored message has reached every recipient, or the timeout. It
// reports whether everything arrived.
func (r *runner) drain(ctx context.Context, within time.Duration) bool {
	deadline := time.Now().Add(within)
	lastPrint, lastGone := time.Time{}, time.Now()
	for {
		flying := r.work.inFlight()
		missing := len(missingDeliveries(r.work))
		if flying == 0 && missing == 0 {
			r.note("drain: every stored message reached every recipient")
			return true
		}
		if time.Since(lastPrint) > 5*time.Second {
			r.note("drain: %d messages in flight, %d deliveries outstanding", flying, missing)
			lastPrint = time.Now()
		}
		if time.Now().After(deadline) {
			r.note("!!! drain: gave up after %s: %d messages in flight, %d deliveries outstanding", within, flying, missing)
			return false
		}
		// Deliveries whose recipient row is gone (acknowledged) will never
		// come: no need to wait for them.
		if flying == 0 && missing > 0 && time.Since(lastGone) > 2*time.Second {
			lastGone = time.Now()
			if gone := r.goneForGood(ctx); gone == missing {
				r.note("!!! drain: the %d outstanding deliveries are acknowledged in the store: they will never come", missing)
				return false
			}
		}
		wait(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return false
		}
	}
}

// finalStop sends SIGTERM to every node at once (as Ctrl-C on a cluster)
// and records exits other than 0.
func (r *runner) finalStop() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, id := range r.procs.ids() {
		if r.procs.running(id) == nil {
			continue
		}
		wg.Go(func() {
			code, err := r.procs.term(id, 60*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				r.finalTerm = append(r.finalTerm, err.Error())
				_ = r.procs.kill(id)
			case code != 0:
				r.finalTerm = append(r.finalTerm, fmt.Sprintf("node %d exited with code %d after the final SIGTERM", id, code))
			}
		})
	}
	wg.Wait()
	r.note("every node stopped (SIGTERM)")
}

// reconcileExitsOnly records exits nobody caused without restarting.
func (s *scheduler) reconcileExitsOnly() {
	for _, in := range s.r.procs.takeUnexpected() {
		s.mu.Lock()
		s.unexp = append(s.unexp, s.r.exitLine(in))
		s.mu.Unlock()
	}
}

// scrapeCounters reads ringchat_frames_rejected_total of every running
// node from its /metrics.
func (r *runner) scrapeCounters(ctx context.Context) map[int]map[string]float64 {
	out := map[int]map[string]float64{}
	re := regexp.MustCompile(`^ringchat_frames_rejected_total\{[^}]*reason="([^"]+)"[^}]*\} (\S+)$`)
	hc := &http.Client{Timeout: 3 * time.Second}
	for _, id := range r.procs.ids() {
		in := r.procs.running(id)
		if in == nil {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", r.procs.addrs[id].Metrics), nil)
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			r.note("metrics of node %d: %v", id, err)
			continue
		}
		m := map[string]float64{}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if g := re.FindStringSubmatch(sc.Text()); g != nil {
				v, _ := strconv.ParseFloat(g[2], 64)
				m[g[1]] += v
			}
		}
		resp.Body.Close()
		out[in.Pid] = m
	}
	return out
}

// goneForGood counts the outstanding deliveries whose recipient row the
// store no longer has.
func (r *runner) goneForGood(ctx context.Context) int {
	n := 0
	for _, d := range missingDeliveries(r.work) {
		if strings.HasPrefix(r.recipientRow(ctx, d.to, d.m.Seq), "no recipient row") {
			n++
		}
	}
	return n
}
