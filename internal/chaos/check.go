package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/store"
)

// delivery is one (message, recipient) pair the system owes.
type delivery struct {
	m    *sentMsg
	from string
	to   string
}

// recipientsOf returns who must receive a message from sender: the user,
// or the group's members but the sender (membership is fixed before
// sending starts).
func recipientsOf(members map[string][]string, sender string, to client.Recipient) []string {
	if !to.Group {
		return []string{to.Name}
	}
	return slices.DeleteFunc(slices.Clone(members[to.Name]), func(u string) bool { return u == sender })
}

// userRecords is a copy of one user's records.
type userRecords struct {
	name   string
	sent   []sentMsg
	shown  []shownMsg
	raw    map[string][]rawMsg
	logins int
	waits  []time.Duration
	conns  []connInfo
}

func snapshotUsers(w *workload) map[string]*userRecords {
	out := map[string]*userRecords{}
	for _, u := range w.users {
		u.mu.Lock()
		rec := &userRecords{name: u.name, shown: slices.Clone(u.shown), raw: maps.Clone(u.raw),
			logins: u.logins, waits: slices.Clone(u.loginWaits), conns: slices.Clone(u.conns)}
		for _, m := range u.sent {
			c := *m
			c.Via = slices.Clone(m.Via)
			rec.sent = append(rec.sent, c)
		}
		u.mu.Unlock()
		out[u.name] = rec
	}
	return out
}

// missingDeliveries lists the deliveries owed and not shown yet.
func missingDeliveries(w *workload) []delivery {
	return judgeMessages(snapshotUsers(w), w.members).missing
}

// msgVerdict is what the records say about delivery.
type msgVerdict struct {
	sent, stored, unconfirmed, owed int
	refused                         map[string]int // final refusals by code
	missing                         []delivery     // stored, owed, never shown
	wrong, phantom, refusedShown    []string       // shown to a non-recipient, never sent, refused yet shown
	dup                             []string       // shown twice (one id, or one content under two ids)
	fifo                            []string       // out of order per sender and recipient, or per group
	disorder                        []disorder     // the same, for explanations
	pairs, shown, raw, redelivered  int
	latency                         []lateShow // stored to first shown, per delivery, slowest first
}

// disorder is a message shown after a later one.
type disorder struct {
	user        string
	late, after shownMsg
}

// lateShow is how long one delivery took.
type lateShow struct {
	took time.Duration
	user string
	show shownMsg
}

// judgeMessages checks every user's records: what was stored must have
// been shown to every recipient, once, in order.
func judgeMessages(recs map[string]*userRecords, members map[string][]string) msgVerdict {
	v := msgVerdict{refused: map[string]int{}}
	names := slices.Sorted(maps.Keys(recs))
	byID := map[string]*sentMsg{}
	senderOf := map[string]string{}
	shownTo := map[string]map[string]bool{}
	for _, n := range names {
		for i := range recs[n].sent {
			m := &recs[n].sent[i]
			byID[m.ID], senderOf[m.ID] = m, n
		}
		shownTo[n] = map[string]bool{}
		for _, s := range recs[n].shown {
			shownTo[n][s.ID] = true
		}
	}
	for _, n := range names {
		for i := range recs[n].sent {
			m := &recs[n].sent[i]
			v.sent++
			switch {
			case m.Seq != 0:
				v.stored++
				for _, to := range recipientsOf(members, n, m.To) {
					v.owed++
					if !shownTo[to][m.ID] {
						v.missing = append(v.missing, delivery{m: m, from: n, to: to})
					}
				}
			case m.Refused != "":
				v.refused[m.Refused]++
			default:
				v.unconfirmed++
			}
		}
	}
	for _, n := range names {
		ids := map[string]int{}
		contents := map[string][]string{}
		lastFrom := map[string]shownMsg{}
		lastGroup := map[string]shownMsg{}
		for _, s := range recs[n].shown {
			v.shown++
			ids[s.ID]++
			m, ok := byID[s.ID]
			if !ok {
				v.phantom = append(v.phantom, fmt.Sprintf("%s was shown %s from %s (seq %d), which no client sent", n, s.ID, s.From, s.Seq))
				continue
			}
			from := senderOf[s.ID]
			key := fmt.Sprintf("%s#%d", from, m.N)
			contents[key] = append(contents[key], s.ID)
			if !slices.Contains(recipientsOf(members, from, m.To), n) {
				v.wrong = append(v.wrong, fmt.Sprintf("%s was shown %s (%s to %s), not meant for it", n, s.ID, key, m.To))
			}
			if m.Refused != "" {
				v.refusedShown = append(v.refusedShown, fmt.Sprintf("%s was shown %s (%s), refused with %s", n, s.ID, key, m.Refused))
			}
			if ids[s.ID] > 1 {
				continue // a duplicate: counted below, not an ordering question
			}
			if !m.Stored.IsZero() && !s.At.IsZero() {
				v.latency = append(v.latency, lateShow{took: s.At.Sub(m.Stored), user: n, show: s})
			}
			if p, seen := lastFrom[from]; seen {
				if m.N <= p.N || s.Seq <= p.Seq {
					v.fifo = append(v.fifo, fmt.Sprintf("%s got %s#%d (seq %d) after %s#%d (seq %d)", n, from, m.N, s.Seq, from, p.N, p.Seq))
					v.disorder = append(v.disorder, disorder{user: n, late: s, after: p})
				}
			} else {
				v.pairs++
			}
			lastFrom[from] = s
			if m.To.Group {
				if p, seen := lastGroup[m.To.Name]; seen && s.Seq <= p.Seq {
					v.fifo = append(v.fifo, fmt.Sprintf("%s got group %s's seq %d after seq %d", n, m.To.Name, s.Seq, p.Seq))
					v.disorder = append(v.disorder, disorder{user: n, late: s, after: p})
				}
				lastGroup[m.To.Name] = s
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			if ids[id] > 1 {
				v.dup = append(v.dup, fmt.Sprintf("%s was shown %s %d times", n, id, ids[id]))
			}
		}
		for _, key := range slices.Sorted(maps.Keys(contents)) {
			if list := slices.Compact(slices.Sorted(slices.Values(contents[key]))); len(list) > 1 {
				v.dup = append(v.dup, fmt.Sprintf("%s was shown %s under %d ids %v", n, key, len(list), list))
			}
		}
		for _, rs := range recs[n].raw {
			v.raw += len(rs)
			v.redelivered += max(0, len(rs)-1)
		}
	}
	slices.SortFunc(v.latency, func(a, b lateShow) int { return int(b.took - a.took) })
	return v
}

// Check is one verdict of the report.
type Check struct {
	Name   string
	OK     bool
	Detail []string
}

// Report is the outcome of a run.
type Report struct {
	Seed    uint64
	Replay  string
	Dir     string // the work directory, kept when the run failed
	Checks  []Check
	Figures []string // the run's figures, one per line
	// Injected counts the faults injected, by kind.
	Injected map[Kind]int
	// NetTable is the nft table of the network faults ("" when off);
	// NetDropped the packets its rules dropped.
	NetTable   string
	NetDropped int64
}

// OK reports whether every check passed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

func (r *Report) fig(format string, args ...any) {
	r.Figures = append(r.Figures, fmt.Sprintf(format, args...))
}

// pct returns the p-th percentile (0..1) of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(p * float64(len(ds)-1))
	return ds[i]
}

// limit keeps the first n lines and says how many more there were.
func limit(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("... and %d more", len(lines)-n))
}

// evidence is what the checks judge: copies of the clients' and the
// scheduler's records, and the node logs.
type evidence struct {
	recs    map[string]*userRecords
	names   []string   // the users, sorted
	v       msgVerdict // the messages' verdict
	logs    allLogs
	records []faultRecord // every fault's repair (or its failure)
	unexp   []string      // exits nobody caused
	termBad []string      // SIGTERMs not answered by exit 0
}

func (r *runner) gather() evidence {
	recs := snapshotUsers(r.work)
	ev := evidence{recs: recs, names: slices.Sorted(maps.Keys(recs)), v: judgeMessages(recs, r.work.members),
		logs: r.parseLogs()}
	s := r.sched
	s.mu.Lock()
	ev.records, ev.unexp, ev.termBad = slices.Clone(s.records), slices.Clone(s.unexp), slices.Clone(s.termBad)
	s.mu.Unlock()
	return ev
}

// repairPhases are the phases whose repair times the report gives, in its
// order.
func repairPhases() []string {
	return append(slicesOf(append(slices.Clone(RingKinds), LabKinds...)), PhaseSigcont, PhaseRestart, PhaseGaleraRejoin, string(ClientMove), "restore")
}

// repairTimes are the repair times of the faults repaired, sorted, by
// phase, and the faults that were not repaired.
func (r *runner) repairTimes(records []faultRecord) (byPhase map[string][]time.Duration, failed []string) {
	byPhase = map[string][]time.Duration{}
	for _, f := range records {
		if f.Err != "" {
			failed = append(failed, fmt.Sprintf("%s at +%s (node %d): %s", f.Phase, r.since(f.At), f.Node, f.Err))
			continue
		}
		byPhase[f.Phase] = append(byPhase[f.Phase], f.Repair)
	}
	for _, ds := range byPhase {
		slices.Sort(ds)
	}
	return byPhase, failed
}

// check judges the run: every check in the report's order, then the run's
// figures.
func (r *runner) check(ctx context.Context, phase span, drained bool, faultErr error) *Report {
	ev := r.gather()
	rep := &Report{Seed: r.cfg.Seed, Replay: Replay(r.cfg)}
	rep.Checks = append(rep.Checks,
		r.checkLost(ctx, ev, drained),
		checkDuplicates(ev.v),
		checkAcrossMoves(ev),
		r.checkShownStored(ctx, ev),
		r.checkFIFO(ev),
		r.checkProbe(ctx, ev.logs),
		r.checkCoordinators(ctx, ev.logs),
		r.checkRepairs(ev.records, faultErr))
	pauses, pauseFig := r.checkPauses(ev.records, phase)
	rep.Checks = append(rep.Checks, pauses)
	if pauseFig != "" {
		rep.Figures = append(rep.Figures, pauseFig)
	}
	rep.Checks = append(rep.Checks, r.checkExits(ev), r.checkMemory())
	if r.cfg.Hostile {
		rep.Checks = append(rep.Checks, r.checkHostile(ev.logs))
	}
	var netFigs []string
	if r.lab != nil {
		rep.NetTable = r.lab.layout.Table
		r.sched.mu.Lock()
		for _, e := range r.sched.nets {
			rep.NetDropped += e.Dropped
		}
		r.sched.mu.Unlock()
		var c Check
		c, netFigs = r.checkNet(ev)
		rep.Checks = append(rep.Checks, c)
	}
	rep.Checks = append(rep.Checks, checkWorkload(ev))
	r.runFigures(rep, ev, phase)
	rep.Figures = append(rep.Figures, netFigs...)
	return rep
}

// checkLost: every message with a STORED receipt was shown to every
// recipient, and nothing was shown to whom it was not for.
func (r *runner) checkLost(ctx context.Context, ev evidence, drained bool) Check {
	v := ev.v
	var lostLines []string
	for _, d := range v.missing {
		lostLines = append(lostLines, r.explainLost(ctx, d, ev.recs))
	}
	ok := len(v.missing) == 0 && len(v.wrong) == 0 && len(v.phantom) == 0 && len(v.refusedShown) == 0
	detail := []string{fmt.Sprintf("%d deliveries owed (stored messages × recipients), %d shown, lost %d; misdelivered %d, phantom %d, refused-yet-delivered %d",
		v.owed, v.owed-len(v.missing), len(v.missing), len(v.wrong), len(v.phantom), len(v.refusedShown))}
	if !drained {
		detail = append(detail, fmt.Sprintf("the drain gave up after %s", r.cfg.DrainTimeout))
	}
	detail = append(detail, limit(lostLines, 12)...)
	detail = append(detail, limit(v.wrong, 5)...)
	detail = append(detail, limit(v.phantom, 5)...)
	detail = append(detail, limit(v.refusedShown, 5)...)
	return Check{Name: "every STORED message reached every recipient (lost = 0)", OK: ok, Detail: detail}
}

// checkDuplicates: no message was shown twice once the client
// deduplicated by id.
func checkDuplicates(v msgVerdict) Check {
	return Check{Name: "no message shown twice after dedup (dup = 0)", OK: len(v.dup) == 0,
		Detail: append([]string{fmt.Sprintf("%d shown, %d duplicates; %d CHAT_MESSAGE lines on the sockets, %d of them repeats the client deduplicated",
			v.shown, len(v.dup), v.raw, v.redelivered)}, limit(v.dup, 10)...)}
}

// checkFIFO: per sender and recipient, and per group, messages were shown
// in the order sent; the first disorders explained.
func (r *runner) checkFIFO(ev evidence) Check {
	v := ev.v
	detail := append([]string{fmt.Sprintf("%d sender-recipient pairs, %d out of order", v.pairs, len(v.fifo))}, limit(v.fifo, 10)...)
	for i, d := range v.disorder {
		if i == 3 {
			break
		}
		detail = append(detail, r.explainDisorder(d, ev.recs, byIDOf(ev.recs))...)
	}
	return Check{Name: "FIFO per sender and recipient, one order per group", OK: len(v.fifo) == 0, Detail: detail}
}

// checkRepairs: after every fault the ring re-formed with the token
// moving; the repair times per phase.
func (r *runner) checkRepairs(records []faultRecord, faultErr error) Check {
	byPhase, failed := r.repairTimes(records)
	detail := []string{}
	if faultErr != nil {
		detail = append(detail, "fault phase ended early: "+faultErr.Error())
	}
	detail = append(detail, failed...)
	for _, p := range repairPhases() {
		if ds := byPhase[p]; len(ds) > 0 {
			detail = append(detail, fmt.Sprintf("%-18s n=%-3d p50 %-7s max %s", p, len(ds), ms(pct(ds, 0.5)), ms(ds[len(ds)-1])))
		}
	}
	return Check{Name: "after every fault the ring re-formed with the token moving", OK: faultErr == nil && len(failed) == 0, Detail: detail}
}

// checkExits: no node exited unless the harness killed it, none
// panicked, and every SIGTERM was answered by exit 0.
func (r *runner) checkExits(ev evidence) Check {
	detail := []string{fmt.Sprintf("%d node processes started", len(r.procs.incarnations()))}
	detail = append(detail, ev.logs.panics...)
	detail = append(detail, ev.unexp...)
	detail = append(detail, ev.termBad...)
	detail = append(detail, r.finalTerm...)
	ok := len(ev.unexp) == 0 && len(ev.termBad) == 0 && len(r.finalTerm) == 0 && len(ev.logs.panics) == 0
	return Check{Name: "no node exited unless killed; SIGTERM exits 0", OK: ok, Detail: limit(detail, 20)}
}

// checkMemory: every node's memory and goroutines (or threads) stayed
// flat over each run long enough to judge.
func (r *runner) checkMemory() Check {
	ok := true
	var detail []string
	judged := 0
	for _, v := range r.samp.verdicts(len(r.work.users)) {
		what := "goroutines"
		if !v.GoroutinesExact {
			what = "threads"
		}
		if !v.Judged {
			detail = append(detail, fmt.Sprintf("node %d run %d: %s over %s, max RSS %.1f MiB, max %s %.0f", v.Node, v.Run, v.Why, ms(v.Span), v.RSSMax, what, v.GorMax))
			continue
		}
		judged++
		line := fmt.Sprintf("node %d run %d over %s: RSS %.1f -> %.1f MiB (max %.1f), %s %.0f -> %.0f (max %.0f)",
			v.Node, v.Run, ms(v.Span), v.RSSFirst, v.RSSLast, v.RSSMax, what, v.GorFirst, v.GorLast, v.GorMax)
		if !v.OK {
			ok = false
			line += ": " + v.Why
		}
		detail = append(detail, line)
	}
	head := fmt.Sprintf("rule: last-quarter average <= %.1f× first-quarter average after warm-up (+%.0f MiB; goroutines +%d + %d per client); %d runs judged",
		rssGrowthMax, rssSlackMiB, goroutineSlack, goroutineSlackPer, judged)
	return Check{Name: "goroutines and memory per node stable", OK: ok && judged > 0, Detail: append([]string{head}, detail...)}
}

// checkWorkload: the workload did something, every client sending and
// being shown messages.
func checkWorkload(ev evidence) Check {
	var idle []string
	for _, n := range ev.names {
		if len(ev.recs[n].sent) == 0 || len(ev.recs[n].shown) == 0 {
			idle = append(idle, fmt.Sprintf("%s sent %d, was shown %d", n, len(ev.recs[n].sent), len(ev.recs[n].shown)))
		}
	}
	return Check{Name: "every client sent and received messages", OK: ev.v.stored > 0 && len(idle) == 0, Detail: limit(idle, 5)}
}

// runFigures adds the run's figures: the set-up and the faults, the
// messages, the slowest deliveries, the logins and the repairs.
func (r *runner) runFigures(rep *Report, ev evidence, phase span) {
	v := ev.v
	rep.fig("seed %d; %d nodes, %d clients at %g msg/s each; fault phase %s; %s", r.cfg.Seed, r.cfg.Nodes, len(r.work.users), r.cfg.Rate, ms(phase.dur()), r.dbNote)
	r.faultFigures(rep)
	var refusedList []string
	refusedN := 0
	for _, c := range slices.Sorted(maps.Keys(v.refused)) {
		refusedList = append(refusedList, fmt.Sprintf("%s %d", c, v.refused[c]))
		refusedN += v.refused[c]
	}
	rep.fig("messages: %d sent, %d STORED, %d refused %v, %d unconfirmed at the end", v.sent, v.stored, refusedN, refusedList, v.unconfirmed)
	rep.fig("deliveries: %d owed, %d shown, lost %d, duplicated %d; %d redeliveries after reconnects deduplicated by id",
		v.owed, v.owed-len(v.missing), len(v.missing), len(v.dup), v.redelivered)
	r.latencyFigures(rep, ev)
	var logins int
	var waits []time.Duration
	for _, n := range ev.names {
		logins += ev.recs[n].logins
		waits = append(waits, ev.recs[n].waits...)
	}
	slices.Sort(waits)
	rep.fig("client logins: %d (%d reconnects; time from a lost connection to the next login p50 %s, max %s)",
		logins, len(waits), ms(pct(waits, 0.5)), ms(pct(waits, 1)))
	byPhase, _ := r.repairTimes(ev.records)
	for _, p := range repairPhases() {
		if ds := byPhase[p]; len(ds) > 0 {
			rep.fig("repair %-18s n=%-3d p50 %-7s max %s", p, len(ds), ms(pct(ds, 0.5)), ms(ds[len(ds)-1]))
		}
	}
}

// faultFigures gives the faults injected by kind (the report keeps the
// counts), and why network delay was not, if it was not.
func (r *runner) faultFigures(rep *Report) {
	r.fmu.Lock()
	rep.Injected = maps.Clone(r.injected)
	var inj []string
	total := 0
	for _, k := range append(slices.Clone(AllKinds), LabKinds...) {
		if n := r.injected[k]; n > 0 {
			inj = append(inj, fmt.Sprintf("%s %d", k, n))
			total += n
		}
	}
	r.fmu.Unlock()
	rep.fig("faults injected: %d (%s)", total, strings.Join(inj, ", "))
	if !r.netemOK {
		rep.fig("net-delay: not injected: %s", r.netemNo)
	}
	if r.lab == nil {
		rep.fig("network faults (nft): %s", r.netNo)
	}
}

// latencyFigures gives the delivery times (STORED to shown), and the
// story of the slowest deliveries over 3 s: when stored, when and on
// which connections shown.
func (r *runner) latencyFigures(rep *Report, ev evidence) {
	n := len(ev.v.latency)
	if n == 0 {
		return
	}
	ds := make([]time.Duration, n)
	for i, l := range ev.v.latency {
		ds[n-1-i] = l.took
	}
	rep.fig("delivery (STORED to shown): p50 %s, p99 %s, max %s", ms(pct(ds, 0.5)), ms(pct(ds, 0.99)), ms(ds[n-1]))
	byID := byIDOf(ev.recs)
	for i, l := range ev.v.latency {
		if i == 3 || l.took < 3*time.Second {
			break
		}
		m := byID[l.show.ID]
		rep.fig("  slow: seq %d (%s#%d) to %s: stored +%s, shown +%s on conn %d (node %d), %s later", l.show.Seq, l.show.From, m.N,
			l.user, r.since(m.Stored), r.since(l.show.At), l.show.Conn, l.show.Node, ms(l.took))
		var on []string
		for _, x := range ev.recs[l.user].raw[l.show.ID] {
			on = append(on, fmt.Sprintf("conn %d at +%s", x.Conn, r.since(x.At)))
		}
		rep.fig("    on the sockets: %s; connections: %s", strings.Join(on, ", "), r.connsLine(ev.recs[l.user], m.Stored.Add(-2*time.Second), l.show.At))
	}
}

func byIDOf(recs map[string]*userRecords) map[string]*sentMsg {
	out := map[string]*sentMsg{}
	for _, r := range recs {
		for i := range r.sent {
			out[r.sent[i].ID] = &r.sent[i]
		}
	}
	return out
}

// connsLine describes a user's connections around a time.
func (r *runner) connsLine(rec *userRecords, from, to time.Time) string {
	var parts []string
	for _, c := range rec.conns {
		if !c.Ended.IsZero() && c.Ended.Before(from) || c.Opened.After(to) {
			continue
		}
		p := fmt.Sprintf("conn %d node %d opened +%s", c.N, c.Node, r.since(c.Opened))
		if c.LoggedIn.IsZero() {
			p += " login failed"
		} else {
			p += " logged in +" + r.since(c.LoggedIn)
		}
		if !c.Ended.IsZero() {
			how := "ended"
			if c.Closed {
				how = "closed by the client: " + c.Why + ","
			}
			p += fmt.Sprintf(" %s +%s", how, r.since(c.Ended))
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// explainDisorder describes a message shown after a later one.
func (r *runner) explainDisorder(d disorder, recs map[string]*userRecords, byID map[string]*sentMsg) []string {
	rec := recs[d.user]
	m := byID[d.late.ID]
	lines := []string{fmt.Sprintf("  %s: seq %d (%s) was stored at +%s, shown at +%s on conn %d (node %d); seq %d had been shown at +%s on conn %d (node %d)",
		d.user, d.late.Seq, d.late.ID, r.since(m.Stored), r.since(d.late.At), d.late.Conn, d.late.Node,
		d.after.Seq, r.since(d.after.At), d.after.Conn, d.after.Node)}
	var on []string
	for _, x := range rec.raw[d.late.ID] {
		on = append(on, fmt.Sprintf("conn %d at +%s", x.Conn, r.since(x.At)))
	}
	lines = append(lines, fmt.Sprintf("    seq %d on %s's sockets: %s", d.late.Seq, d.user, strings.Join(on, ", ")))
	lines = append(lines, "    connections: "+r.connsLine(rec, m.Stored.Add(-2*time.Second), d.late.At))
	return lines
}

func slicesOf(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// explainLost describes a lost delivery with what the sockets and the
// store say about it.
func (r *runner) explainLost(ctx context.Context, d delivery, recs map[string]*userRecords) string {
	var b strings.Builder
	fmt.Fprintf(&b, "LOST %s (%s#%d, seq %d, stored +%s via nodes %v) to %s", d.m.ID, d.from, d.m.N, d.m.Seq, r.since(d.m.Stored), d.m.Via, d.to)
	if raw := recs[d.to].raw[d.m.ID]; len(raw) > 0 {
		var on []string
		for _, x := range raw {
			on = append(on, fmt.Sprintf("conn %d at +%s", x.Conn, r.since(x.At)))
		}
		fmt.Fprintf(&b, "; on the recipient's socket %d times (%s) but never handed to it by the client library", len(raw), strings.Join(on, ", "))
	} else {
		b.WriteString("; never on the recipient's socket")
	}
	row := r.recipientRow(ctx, d.to, d.m.Seq)
	fmt.Fprintf(&b, "; store: %s; %s's connections: %s", row, d.to, r.connsLine(recs[d.to], d.m.Stored.Add(-2*time.Second), time.Now()))
	return b.String()
}

// recipientRow says what the store has for (user, seq): where the
// message stands against the user's inbox cursor.
func (r *runner) recipientRow(ctx context.Context, user string, seq int64) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var acked, sent, sentUS int64
	var side, mine int
	err := r.sqlDB.QueryRowContext(ctx, `SELECT c.acked_seq, c.sent_seq, c.sent_us,
		(SELECT COUNT(*) FROM inbox_acks a WHERE a.user_id = c.user_id AND a.msg_seq = ?),
		(SELECT COUNT(*) FROM messages m WHERE m.msg_seq = ? AND m.to_user_id = c.user_id)
		FROM inbox_cursors c JOIN users u ON u.user_id = c.user_id WHERE u.name = ?`, seq, seq, user).
		Scan(&acked, &sent, &sentUS, &side, &mine)
	switch {
	case err != nil && strings.Contains(err.Error(), "no rows"):
		return "no inbox cursor"
	case err != nil:
		return "unreadable: " + err.Error()
	case mine == 0:
		var n int
		_ = r.sqlDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE msg_seq = ?`, seq).Scan(&n)
		if n == 0 {
			return "no such message"
		}
		return "not a direct message to them (a group message, or never owed)"
	case seq <= acked || side > 0:
		return "acknowledged"
	case seq > sent:
		return "pending, never handed out"
	}
	return fmt.Sprintf("handed to a connection at +%s (the cursor's newest mark), not acknowledged", r.since(time.UnixMicro(sentUS)))
}

// allLogs is the parsed logs of every incarnation.
type allLogs struct {
	byNode map[int64][]nodeLog
	panics []string
	// storeFailed: when each process's store operations failed (by pid).
	storeFailed map[int][]time.Time
}

func (r *runner) parseLogs() allLogs {
	out := allLogs{byNode: map[int64][]nodeLog{}, storeFailed: map[int][]time.Time{}}
	for _, in := range r.procs.incarnations() {
		l, err := parseNodeLog(in.LogPath)
		if err != nil {
			out.panics = append(out.panics, fmt.Sprintf("node %d run %d: log unreadable: %v", in.ID, in.Run, err))
		}
		for _, p := range l.Panics {
			out.panics = append(out.panics, fmt.Sprintf("node %d run %d: %s (%s)", in.ID, in.Run, p, in.LogPath))
		}
		out.byNode[in.ID] = append(out.byNode[in.ID], l)
		out.storeFailed[in.Pid] = l.StoreFailed
	}
	return out
}

// probeCount is the mutex probe's counter against its logged increments.
type probeCount struct {
	distinct  int   // distinct values logged as committed
	dups      int   // values logged as committed more than once
	over      int   // values logged as committed outside 1..counter
	missing   int64 // values in 1..counter with no line, committed or unknown
	unknownIn int   // values logged with an unanswered COMMIT that the counter covers and no committed line names
}

// countProbe compares counter with the values logged as committed and
// those logged with their COMMIT unanswered (the store may have taken
// them: such a value with no committed line is not missing; one that did
// not commit is written again by the next holder, and is then logged as
// committed, so it is never counted twice).
func countProbe(counter int64, values, unknown []int64) probeCount {
	values = slices.Sorted(slices.Values(values))
	uniq := slices.Compact(slices.Clone(values))
	pc := probeCount{distinct: len(uniq), dups: len(values) - len(uniq)}
	for _, v := range uniq {
		if v < 1 || v > counter {
			pc.over++
		}
	}
	pc.missing = counter - int64(len(uniq)-pc.over)
	seen := map[int64]bool{}
	for _, v := range unknown {
		if _, committed := slices.BinarySearch(uniq, v); v >= 1 && v <= counter && !seen[v] && !committed {
			seen[v] = true
			pc.unknownIn++
		}
	}
	pc.missing -= int64(pc.unknownIn)
	return pc
}

// checkProbe: the mutex probe's counter equals its logged increments, no
// value logged twice (critical sections never overlapped).
func (r *runner) checkProbe(ctx context.Context, logs allLogs) Check {
	var counter int64
	err := r.st.Update(ctx, func(tx store.Tx) error {
		var err error
		counter, err = tx.ProbeCounter()
		return err
	})
	if err != nil {
		return Check{Name: "mutex probe: counter = logged increments", OK: false, Detail: []string{"probe counter unreadable: " + err.Error()}}
	}
	var values, unknown []int64
	for _, ls := range logs.byNode {
		for _, l := range ls {
			values = append(values, l.ProbeValues...)
			unknown = append(unknown, l.ProbeUnknown...)
		}
	}
	pc := countProbe(counter, values, unknown)
	// A node killed between its commit and its log line, or a database
	// killed after a commit and before its answer, leaves an increment no
	// log line names: at most one per kill -9.
	kills := 0
	for _, in := range r.procs.incarnations() {
		if r.procs.expected(in) == "kill" {
			kills++
		}
	}
	r.fmu.Lock()
	kills += r.injected[DBRestart] + r.injected[GaleraKill]
	r.fmu.Unlock()
	dups := pc.dups
	ok := dups == 0 && pc.over == 0 && pc.missing >= 0 && pc.missing <= int64(kills) && counter > 0
	detail := []string{fmt.Sprintf("counter %d, %d logged increments (%d distinct), %d written twice, %d beyond the counter, %d without a log line (allowed: %d, one per kill -9), %d logged with their COMMIT unanswered (%d of them in the store)",
		counter, len(values), pc.distinct, dups, pc.over, pc.missing, kills, len(unknown), pc.unknownIn)}
	if dups > 0 {
		detail = append(detail, "two critical sections read the same value: they overlapped")
	}
	return Check{Name: "mutex probe: counter = logged increments (critical sections never overlapped)", OK: ok, Detail: detail}
}

// checkCoordinators: never two coordinators for one epoch, by the store's
// history and by the node logs.
func (r *runner) checkCoordinators(ctx context.Context, logs allLogs) Check {
	hist, err := r.st.CoordinatorHistory(ctx)
	if err != nil {
		return Check{Name: "one coordinator per epoch", OK: false, Detail: []string{"history unreadable: " + err.Error()}}
	}
	byEpoch := map[int64][]int64{}
	for _, h := range hist {
		byEpoch[h.Epoch] = append(byEpoch[h.Epoch], h.NodeID)
	}
	var bad []string
	for e, ns := range byEpoch {
		if len(ns) > 1 {
			bad = append(bad, fmt.Sprintf("epoch %d claimed by nodes %v in the store", e, ns))
		}
	}
	acted := map[int64]map[int64]bool{}
	for id, ls := range logs.byNode {
		for _, l := range ls {
			for _, e := range l.Coordinator {
				if acted[e] == nil {
					acted[e] = map[int64]bool{}
				}
				acted[e][id] = true
			}
		}
	}
	for e, ns := range acted {
		ids := slices.Sorted(maps.Keys(ns))
		if len(ids) > 1 {
			bad = append(bad, fmt.Sprintf("epoch %d: nodes %v each logged taking the coordinator role", e, ids))
		}
		if h, ok := byEpoch[e]; !ok || h[0] != ids[0] {
			bad = append(bad, fmt.Sprintf("epoch %d: node %v logged taking the role, the store's history says %v", e, ids, h))
		}
	}
	slices.Sort(bad)
	nodes := map[int64]int{}
	for _, h := range hist {
		nodes[h.NodeID]++
	}
	return Check{Name: "never two coordinators for one epoch (store history and node logs)", OK: len(bad) == 0,
		Detail: append([]string{fmt.Sprintf("%d epochs claimed (by node: %v), %d taken up in the logs", len(hist), nodes, len(acted))}, limit(bad, 10)...)}
}

// reasonOf is the node's drop reason for a barrage kind ("path:reason").
func reasonOf(kind string) string {
	_, r, _ := strings.Cut(kind, ":")
	return r
}

// checkHostile: every node dropped and counted the hostile input it was
// sent (TCP, UDP, client port), by its log and by its own counters.
func (r *runner) checkHostile(logs allLogs) Check {
	h := r.host
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad, detail []string
	frames := []string{hTCPMalformed, hTCPBadMAC, hTCPMisdirected, hTCPReplay, hTCPStale, hTCPTooLarge, hTCPNoHello,
		hUDPMalformed, hUDPBadMAC, hUDPReplay, hUDPStale}
	reasons := []string{"malformed", "bad_mac", "misdirected", "replay", "stale", "too_large", "no_hello"}
	for _, id := range r.procs.ids() {
		if h.cycles[id] == 0 {
			bad = append(bad, fmt.Sprintf("node %d: never attacked (always down?)", id))
			continue
		}
		sum := func(f func(nodeLog) int) int {
			n := 0
			for _, l := range logs.byNode[id] {
				n += f(l)
			}
			return n
		}
		// Every kind sent over a path was logged on that path at least
		// once: the transport logs the first drop of a reason each second
		// with the path it came by.
		for _, k := range frames {
			if sent := h.sent[id][k]; sent > 0 && sum(func(l nodeLog) int { return l.DropLines[k] }) == 0 {
				bad = append(bad, fmt.Sprintf("node %d: %s: %d sent, no drop logged", id, k, sent))
			}
		}
		var parts []string
		for _, reason := range reasons {
			tcp, udp := h.sent[id]["inbound:"+reason], h.sent[id]["udp:"+reason]
			if tcp+udp == 0 {
				continue
			}
			got := sum(func(l nodeLog) int { return l.Drops[reason] })
			parts = append(parts, fmt.Sprintf("%s %d+%d/%d", reason, tcp, udp, got))
		}
		unusable := sum(func(l nodeLog) int { return l.FramesBad })
		parts = append(parts, fmt.Sprintf("unusable %d/%d", h.sent[id][hUDPUnusable], unusable))
		if h.sent[id][hUDPUnusable] > 0 && unusable == 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d authenticated unusable frames sent, none counted", id, h.sent[id][hUDPUnusable]))
		}
		if n, excused := r.takenStrangerTokens(id); n > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d of %d TOKENs from a node that is not its predecessor taken (acknowledged, not stale), besides %d while its store was in trouble",
				id, n, h.sent[id][hTCPNotPred], excused))
			bad = append(bad, r.takenStrangerDetail(id)...)
		}
		for _, k := range []string{hClientBad, hClientLong, hClientFlood, hTCPNotPred} {
			sent := h.sent[id][k]
			if sent == 0 {
				continue
			}
			ok := h.answered[id][k]
			parts = append(parts, fmt.Sprintf("%s %d/%d", k, ok, sent))
			if ok == 0 {
				bad = append(bad, fmt.Sprintf("node %d: %s never answered as expected (%s)", id, k, h.lastFail[id][k]))
			}
		}
		if h.sent[id][hClientFlood] > 0 && sum(func(l nodeLog) int { return l.FloodClosed }) == 0 {
			bad = append(bad, fmt.Sprintf("node %d: no \"closing a flooding client\" in its log", id))
		}
		var codes []string
		for _, c := range slices.Sorted(maps.Keys(h.codes[id])) {
			codes = append(codes, fmt.Sprintf("%s %d", c, h.codes[id][c]))
		}
		detail = append(detail, fmt.Sprintf("node %d (%d cycles): %s; client port answered: %s",
			id, h.cycles[id], strings.Join(parts, ", "), strings.Join(codes, ", ")))
	}
	if r.counters != nil {
		// The forged tokens are counted by the ring, not the transport.
		cbad, cdetail := r.hostileCounters(append(slices.Clone(reasons), reasonOf(hTCPForgedToken)), logs.storeFailed)
		bad, detail = append(bad, cbad...), append(detail, cdetail...)
	}
	head := "per node, frames sent over TCP+UDP / drops counted in its log (the log undercounts a reason's last second); client probes answered as expected / sent"
	return Check{Name: "hostile input dropped and counted by every node (TCP, UDP, client port)", OK: len(bad) == 0,
		Detail: append(append([]string{head}, limit(bad, 20)...), detail...)}
}

// hostileCounters holds the live nodes' own counters against what the
// last run of each was sent: every frame counted. The caller holds r.host.mu.
func (r *runner) hostileCounters(reasons []string, storeFailed map[int][]time.Time) (bad, detail []string) {
	h := r.host
	for _, id := range r.procs.ids() {
		in := r.procs.last(id)
		c, ok := r.counters[in.Pid]
		if !ok {
			continue
		}
		want := map[string]int{}
		for k, n := range h.byPid[in.Pid] {
			want[reasonOf(k)] += n
		}
		// A TOKEN that came while the node could not read its store (a
		// fault, or a read of its own that failed) went on unchecked (and
		// uncounted), as the ring needs.
		for _, kind := range []string{hTCPForgedToken, hTCPNotPred} {
			want[reasonOf(kind)] -= r.excusedProbes(in.Pid, kind, storeFailed[in.Pid])
		}
		var parts []string
		for _, reason := range append(reasons, "unusable") {
			if want[reason] == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %d/%.0f", reason, want[reason], c[reason]))
			if !isTokenReason(reason) && c[reason] < float64(want[reason]) {
				bad = append(bad, fmt.Sprintf("node %d run %d: %d %s frames sent, its counter says %.0f", id, in.Run, want[reason], reason, c[reason]))
			}
		}
		if sent, got := refusedTokens(want, c); got < float64(sent) {
			bad = append(bad, fmt.Sprintf("node %d run %d: %d TOKENs sent in another node's name, its forged_token, not_predecessor and unjudged_token counters say %.0f", id, in.Run, sent, got))
		}
		detail = append(detail, fmt.Sprintf("node %d run %d, its own counters (sent/counted): %s", id, in.Run, strings.Join(parts, ", ")))
	}
	return bad, detail
}

// isTokenReason reports whether reason counts a refused TOKEN sent in
// another node's name (judged together by refusedTokens).
func isTokenReason(reason string) bool {
	return reason == reasonOf(hTCPForgedToken) || reason == reasonOf(hTCPNotPred)
}

// refusedTokens returns the TOKENs sent in another node's name and those
// the node counted as refused. A TOKEN in the predecessor's name and one
// in a stranger's are judged together: with the ring changing, the node
// may name the stranger its predecessor (the token is refused as forged)
// or the store's new predecessor may not be the one the barrage read
// (refused as not_predecessor); and while one waits for the store's word
// on its sender, the other, sent just after it, replaces it (the first is
// dropped without being taken: unjudged_token). Either way it is refused
// and counted.
//
// The real predecessor may also dial in again between the TOKEN's line
// and the node's reading of it: the transport drops a frame of a link
// already replaced before the ring sees it (replaced_link). And while the
// real predecessor's link is up, the barrage's HELLO, which proves no
// store secret, is refused before its TOKEN is read (unproven_hello).
func refusedTokens(want map[string]int, c map[string]float64) (int, float64) {
	forged, notPred := reasonOf(hTCPForgedToken), reasonOf(hTCPNotPred)
	return want[forged] + want[notPred], c[forged] + c[notPred] + c[reasonUnjudged] + c[reasonReplaced] + c[reasonUnproven]
}

// reasonUnjudged is the counter of a TOKEN waiting for the store's word
// on its sender that was dropped unjudged; reasonReplaced the transport's
// of a frame read from a link just replaced; reasonUnproven the
// transport's of a HELLO refused because it proved no store secret while
// the predecessor's link was up.
const (
	reasonUnjudged = "unjudged_token"
	reasonReplaced = "replaced_link"
	reasonUnproven = "unproven_hello"
)

// checkPauses judges the longest time in which no node committed a visit
// during the fault phase, outside the faults' repairs; fig is the report's
// figure of it ("" when the fence was not watched).
func (r *runner) checkPauses(records []faultRecord, phase span) (c Check, fig string) {
	name := fmt.Sprintf("no ring-wide pause over %s outside the faults' repairs (no node committing a visit)", ms(MaxPause))
	if r.pause == nil {
		return Check{Name: name, OK: false, Detail: []string{"the store's fence was not watched"}}, ""
	}
	pauses, polls, failed := r.pause.result()
	free, longest, ok := longestPause(pauses, repairWindows(records, phase.to), phase)
	detail := []string{fmt.Sprintf("fence row polled every %s: %d polls, %d failed (the database down)", ms(r.pause.every), polls, failed)}
	if longest.dur() > 0 {
		detail = append(detail, "longest pause, repairs included: "+r.describe(longest))
	}
	if ok {
		detail = append(detail, "longest pause outside the repairs: "+r.describe(free))
	} else {
		detail = append(detail, fmt.Sprintf("no pause of %s or more outside the repairs", ms(keep)))
	}
	c = Check{Name: name, OK: polls-failed > 0 && (!ok || free.dur() <= MaxPause), Detail: detail}
	if ok {
		fig = fmt.Sprintf("longest ring-wide pause (no node committed a visit) outside the repairs: %s (target <= %s)", r.describe(free), ms(MaxPause))
	} else {
		fig = fmt.Sprintf("longest ring-wide pause (no node committed a visit) outside the repairs: under %s (target <= %s)", ms(keep), ms(MaxPause))
	}
	return c, fig
}

// storeTrouble reports whether at falls in or near a fault that can keep
// a node from reading its store (the database restarted or killed, a node
// cut from the store, packet loss): from a second before it until
// storeAftermath after it settled (or healed).
func (r *runner) storeTrouble(at time.Time) bool {
	if r.sched == nil {
		return false
	}
	r.sched.mu.Lock()
	defer r.sched.mu.Unlock()
	near := func(from, to time.Time) bool {
		return !at.Before(from.Add(-time.Second)) && at.Before(to.Add(storeAftermath))
	}
	for _, f := range r.sched.records {
		if (f.Kind == DBRestart || f.Kind == GaleraKill) && near(f.At, f.At.Add(max(f.Settle, f.Repair))) {
			return true
		}
	}
	for _, ev := range r.sched.nets {
		switch ev.Kind {
		case NetCutStore, NetSplitStore, NetLoss1, NetLoss5, NetLoss20:
			if heal := ev.Heal; near(ev.At, heal) || (heal.IsZero() && near(ev.At, time.Now())) {
				return true
			}
		}
	}
	return false
}

// takenStrangerTokens counts node id's acknowledgements that took a
// stranger's token: outside store trouble (a failure), and within it.
// The caller holds r.host.mu.
func (r *runner) takenStrangerTokens(id int64) (taken, excused int) {
	for _, p := range r.host.probes {
		if p.ID != id || p.Kind != hTCPNotPred || !p.Taken {
			continue
		}
		if r.storeTrouble(p.At) {
			excused++
		} else {
			taken++
		}
	}
	return taken, excused
}

// takenStrangerDetail says when each stranger's token node id took outside
// store trouble was sent, and what the node answered. The caller holds
// r.host.mu.
func (r *runner) takenStrangerDetail(id int64) []string {
	var out []string
	for _, p := range r.host.probes {
		if p.ID == id && p.Kind == hTCPNotPred && p.Taken && !r.storeTrouble(p.At) {
			out = append(out, fmt.Sprintf("  sent at %.1fs (%s), answered %s", p.At.Sub(r.start).Seconds(),
				p.At.UTC().Format("15:04:05.000"), strings.Join(p.Answers, ", ")))
		}
	}
	return out
}

// excusedProbes counts the probes of kind sent to process pid that no
// refusal counter need name: a stranger's token the node answered with a
// stale TOKEN_ACK of its own stamp (the ring had made the stranger its
// predecessor meanwhile, and the token, lacking the generation's proof,
// was judged and refused as stale), a token whose link the node closed as
// replaced before acknowledging it (tokenProbe.Unread: the real
// predecessor dialled in again and the TOKEN may never have been read),
// and those sent while its store was in trouble: a fault, or one of the process's store operations
// failing (at a time in failed) from a second before the probe to 5 s
// after (a read the probe's check waited on, or its own). The caller
// holds r.host.mu.
func (r *runner) excusedProbes(pid int, kind string, failed []time.Time) int {
	n := 0
	for _, p := range r.host.probes {
		if p.Pid != pid || p.Kind != kind {
			continue
		}
		near := slices.ContainsFunc(failed, func(f time.Time) bool {
			return !f.Before(p.At.Add(-time.Second)) && f.Before(p.At.Add(5*time.Second))
		})
		if near || r.storeTrouble(p.At) || p.Stale || p.Unread {
			n++
		}
	}
	return n
}
