package chaos

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MaxNetGap is the longest a pair of nodes that should deliver may go
// without a delivery during a network fault, and any pair after its heal
// (issue 28).
const MaxNetGap = 2 * time.Second

// afterHeal is how long after a heal the whole ring is watched (cut short
// by the next fault).
const afterHeal = 5 * time.Second

// netEvent is one network fault as injected.
type netEvent struct {
	Kind     Kind
	Victim   int64 // 0 for a split
	Detail   string
	Fault    NetFault // what was dropped (a flap: while the link was down)
	At, Heal time.Time
	Dropped  int64 // packets its rules dropped
}

// openLab makes the run's nft table when cfg.Net asks for network
// faults; where it cannot, it says so loudly and the run goes on without
// them.
func (r *runner) openLab(kinds *[]Kind) *netLayout {
	if !r.cfg.Net {
		r.netNo = "off (make chaos NET=1, ringchaos --net)"
		for _, k := range NetKinds {
			*kinds = slices.DeleteFunc(*kinds, func(x Kind) bool { return x == k })
		}
		return nil
	}
	stores, err := r.storeAddrs()
	if err == nil {
		lay := newLayout(os.Getpid(), r.nodeIDs(), stores)
		var lab *netLab
		if lay.Lab, err = r.cfg.lab(); err == nil {
			lab, err = openNetLab(lay)
		}
		if err == nil {
			r.lab = lab
			r.addCleanup(lab.Close)
			if lay.Lab != nil {
				r.labOn(kinds, lay)
				return &lay
			}
			r.note("network faults ON: nft table inet %s; nodes on 127.0.0.11-%d, each under group %d+ID; store at %s",
				lay.Table, 10+r.cfg.Nodes, lay.GIDBase, strings.Join(stores, ", "))
			return &lay
		}
	}
	r.netNo = "NOT INJECTED: " + err.Error()
	r.note("!!! NETWORK FAULTS CANNOT RUN HERE, THE RUN GOES ON WITHOUT THEM: %v", err)
	for _, k := range NetKinds {
		*kinds = slices.DeleteFunc(*kinds, func(x Kind) bool { return x == k })
	}
	return nil
}

func (r *runner) nodeIDs() []int64 {
	out := make([]int64, r.cfg.Nodes)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// storeAddrs are the addresses (IPv4:port) of the database servers the
// nodes use.
func (r *runner) storeAddrs() ([]string, error) {
	if r.galera != nil {
		var out []string
		for i := 1; i <= 3; i++ {
			out = append(out, r.galera.Host(i))
		}
		return out, nil
	}
	c, err := mysql.ParseDSN(r.dsn)
	if err != nil {
		return nil, fmt.Errorf("the store's address: %w", err)
	}
	if c.Net != "tcp" {
		return nil, fmt.Errorf("the store is reached over %s, not TCP: it cannot be cut", c.Net)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return []string{net.JoinHostPort(c.Addr, "3306")}, nil
	}
	return []string{c.Addr}, nil
}

// succOf is v's successor in the store's ring order, or the next id.
func succOf(v int64, order, ids []int64) int64 {
	if i := slices.Index(order, v); i >= 0 && len(order) > 1 {
		return order[(i+1)%len(order)]
	}
	i := slices.Index(ids, v)
	return ids[(i+1)%len(ids)]
}

// planNet chooses a network fault of kind k: its victim and links.
func (s *scheduler) planNet(k Kind, order []int64, coord int64) netEvent {
	ids := s.r.procs.ids()
	v := s.pick()
	if k == NetCutCoord && slices.Contains(s.live, coord) {
		v = coord
	}
	succ := succOf(v, order, ids)
	ev := netEvent{Kind: k, Victim: v}
	switch k {
	case NetCutSuccOneWay:
		ev.Fault.Drop = []Link{{v, succ}}
		ev.Detail = fmt.Sprintf("node %d cannot send to its successor %d (%d to %d still works)", v, succ, succ, v)
	case NetCutSucc, NetFlap:
		ev.Fault.Drop = Both(v, succ)
		ev.Detail = fmt.Sprintf("node %d and its successor %d cut from each other", v, succ)
	case NetCutStore:
		ev.Fault.Drop = Both(v, StoreEnd)
		ev.Detail = fmt.Sprintf("node %d cut from the store only", v)
	case NetCutRing, NetCutCoord:
		for _, j := range ids {
			if j != v {
				ev.Fault.Drop = append(ev.Fault.Drop, Both(v, j)...)
			}
		}
		ev.Detail = fmt.Sprintf("node %d cut from every other node, not from the store", v)
		if k == NetCutCoord {
			if v == coord {
				ev.Detail = fmt.Sprintf("the coordinator, node %d, cut from every other node, not from the store", v)
			} else {
				ev.Detail += fmt.Sprintf(" (the store names node %d coordinator, not live: a random node instead)", coord)
			}
		}
	case NetSplit, NetSplitStore:
		ev.Victim = 0
		ev.Fault.Drop, ev.Detail = s.split(ids, k == NetSplitStore)
	case NetHostDown:
		ev.Fault.Down = []int64{v}
		// The rules say the same as the link down, for the checks.
		for _, j := range append([]int64{StoreEnd}, ids...) {
			if j != v {
				ev.Fault.Drop = append(ev.Fault.Drop, Both(v, j)...)
			}
		}
		ev.Detail = fmt.Sprintf("lab host %d off the network (its link down)", v)
	case NetLoss1, NetLoss5, NetLoss20:
		ev.Fault.LossPct = map[Kind]int{NetLoss1: 1, NetLoss5: 5, NetLoss20: 20}[k]
		for _, j := range append([]int64{StoreEnd}, ids...) {
			if j != v {
				ev.Fault.Drop = append(ev.Fault.Drop, Both(v, j)...)
			}
		}
		ev.Detail = fmt.Sprintf("%d %% of node %d's packets dropped (to and from the nodes and the store)", ev.Fault.LossPct, v)
	}
	return ev
}

// split cuts ids into a side of 2 (two fifths) and the rest; with
// storeOneSide the store is cut from one of them, chosen at random.
func (s *scheduler) split(ids []int64, storeOneSide bool) ([]Link, string) {
	sh := slices.Clone(ids)
	s.rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
	n := max(1, len(sh)*2/5)
	a, b := slices.Sorted(slices.Values(sh[:n])), slices.Sorted(slices.Values(sh[n:]))
	var drop []Link
	for _, x := range a {
		for _, y := range b {
			drop = append(drop, Both(x, y)...)
		}
	}
	detail := fmt.Sprintf("split %v | %v", a, b)
	if !storeOneSide {
		return drop, detail + ", the store reachable from both sides"
	}
	cut, keep := a, b
	if s.rng.IntN(2) == 0 {
		cut, keep = b, a
	}
	for _, x := range cut {
		drop = append(drop, Both(x, StoreEnd)...)
	}
	return drop, detail + fmt.Sprintf(", the store reachable from %v only", keep)
}

// netEpisode injects one network fault, holds it, heals it and waits for
// the whole ring; the repair is measured from the heal.
func (s *scheduler) netEpisode(ctx context.Context, k Kind, st ringState) error {
	r := s.r
	ev := s.planNet(k, st.order, st.coord.NodeID)
	hold := s.between(r.cfg.NetHold)
	if k == NetFlap || slices.Contains([]Kind{NetLoss1, NetLoss5, NetLoss20}, k) {
		hold = r.cfg.NetLong
	}
	how := ""
	if k == NetFlap {
		how = fmt.Sprintf(", flapping every %s", ms(r.cfg.NetFlapEvery))
	}
	r.note("fault %s: %s, for %s%s", k, ev.Detail, ms(hold), how)
	before := r.lab.total()
	ev.At = time.Now()
	if err := r.lab.Apply(ev.Fault); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	if k == NetFlap {
		s.flap(ctx, ev.Fault, ev.At.Add(hold))
	} else {
		wait(ctx, hold)
	}
	total, err := r.lab.Heal()
	if err != nil {
		return fmt.Errorf("%s: heal: %w", k, err)
	}
	ev.Heal, ev.Dropped = time.Now(), total-before
	r.note("    healed after %s; %d packets dropped", ms(ev.Heal.Sub(ev.At)), ev.Dropped)
	s.mu.Lock()
	s.nets = append(s.nets, ev)
	s.mu.Unlock()
	return s.settleNet(ctx, ev)
}

// flap heals and cuts f in turn every NetFlapEvery until end (cut first,
// already applied).
func (s *scheduler) flap(ctx context.Context, f NetFault, end time.Time) {
	down := true
	for ctx.Err() == nil && time.Until(end) > 0 {
		wait(ctx, min(s.r.cfg.NetFlapEvery, time.Until(end)))
		if time.Until(end) <= 0 {
			return
		}
		down = !down
		var err error
		if down {
			err = s.r.lab.Apply(f)
		} else {
			_, err = s.r.lab.Heal()
		}
		if err != nil {
			s.r.note("!!! flap: %v", err)
		}
	}
}

// settleNet waits for the ring of every live node after a heal and
// records the repair: Repair from the heal, Settle from the injection
// (so that the pause check excuses the whole fault).
func (s *scheduler) settleNet(ctx context.Context, ev netEvent) error {
	s.reconcile()
	rep, err := s.r.obs.settled(ctx, s.live, s.r.cfg.RepairTimeout)
	s.reconcile()
	f := faultRecord{Kind: ev.Kind, Phase: string(ev.Kind), Node: ev.Victim, At: ev.At, Detail: ev.Detail}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.Err = err.Error()
		s.record(f)
		s.r.note("!!! %s: after the heal: %v", ev.Kind, err)
		return fmt.Errorf("%s (node %d): %w", ev.Kind, ev.Victim, err)
	}
	f.Repair, f.Settle = rep.Moving.Sub(ev.Heal), rep.Settled.Sub(ev.At)
	s.record(f)
	s.r.note("    %s: whole ring again %s after the heal (ring %v, coordinator %d epoch %d)", ev.Kind, ms(f.Repair),
		rep.State.order, rep.State.coord.NodeID, rep.State.coord.Epoch)
	return nil
}

// reach tells, for a fault, which ends can still exchange packets both
// ways (loss cuts nothing outright).
func reach(f NetFault) func(a, b int64) bool {
	cut := map[Link]bool{}
	if f.LossPct == 0 {
		for _, l := range f.Drop {
			cut[l] = true
		}
	}
	return func(a, b int64) bool { return a == b || !cut[Link{a, b}] && !cut[Link{b, a}] }
}

// expectedSides are the groups of nodes of which one must keep delivering
// during fault f: the nodes that reach the store, grouped by who reaches
// whom, the groups of at least two nodes (an isolated node never keeps
// the ring). Every node of a group must deliver to every node of it that
// it reaches; with several groups (a split with the store on both sides),
// one of them must.
func expectedSides(f NetFault, ids []int64) [][]int64 {
	ok := reach(f)
	var withStore []int64
	for _, id := range ids {
		if ok(id, StoreEnd) {
			withStore = append(withStore, id)
		}
	}
	seen := map[int64]bool{}
	var sides [][]int64
	for _, id := range withStore {
		if seen[id] {
			continue
		}
		side := []int64{id}
		seen[id] = true
		for i := 0; i < len(side); i++ {
			for _, j := range withStore {
				if !seen[j] && ok(side[i], j) {
					seen[j] = true
					side = append(side, j)
				}
			}
		}
		if len(side) >= 2 {
			sides = append(sides, slices.Sorted(slices.Values(side)))
		}
	}
	return sides
}

// owedShow is one delivery as the gap measure sees it: owed to the
// recipient's connection on node To from Owed (the later of the
// sender's last send, on node From, and the recipient's login there),
// shown at Shown.
type owedShow struct {
	From, To     int64
	Owed, Shown  time.Time
	Sender, User string
}

// stall is the longest time a pair went without a delivery while one was
// owed.
type stall struct {
	From, To int64
	span
}

// longestStall is the longest time, within window w, in which a pair of
// nodes that pairOK accepts had a delivery owed and none shown. Per pair
// the deliveries are taken in the order shown: each one's stall runs from
// when it was owed (or the pair's previous delivery, if later) until it
// was shown.
func longestStall(ds []owedShow, pairOK func(a, b int64) bool, w span) stall {
	byPair := map[[2]int64][]owedShow{}
	for _, d := range ds {
		if pairOK(d.From, d.To) {
			k := [2]int64{d.From, d.To}
			byPair[k] = append(byPair[k], d)
		}
	}
	var worst stall
	for _, k := range slices.SortedFunc(maps.Keys(byPair), func(a, b [2]int64) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	}) {
		list := byPair[k]
		slices.SortFunc(list, func(a, b owedShow) int { return a.Shown.Compare(b.Shown) })
		var prev time.Time
		for _, d := range list {
			from := d.Owed
			if prev.After(from) {
				from = prev
			}
			sp := span{from, d.Shown}
			if sp.from.Before(w.from) {
				sp.from = w.from
			}
			if sp.to.After(w.to) {
				sp.to = w.to
			}
			if sp.dur() > worst.dur() {
				worst = stall{From: k[0], To: k[1], span: sp}
			}
			if d.Shown.After(prev) {
				prev = d.Shown
			}
		}
	}
	return worst
}

// owedShows lists every stored message's first showing to each
// recipient, with the nodes at both ends.
func owedShows(recs map[string]*userRecords, members map[string][]string) []owedShow {
	var out []owedShow
	for _, sender := range slices.Sorted(maps.Keys(recs)) {
		for _, m := range recs[sender].sent {
			if m.Seq == 0 || len(m.Via) == 0 {
				continue
			}
			for _, to := range recipientsOf(members, sender, m.To) {
				rec := recs[to]
				if rec == nil {
					continue
				}
				i := slices.IndexFunc(rec.shown, func(s shownMsg) bool { return s.ID == m.ID })
				if i < 0 {
					continue // lost: the lost check says so
				}
				s := rec.shown[i]
				owed := m.LastSent
				if s.Conn >= 1 && s.Conn <= len(rec.conns) && rec.conns[s.Conn-1].LoggedIn.After(owed) {
					owed = rec.conns[s.Conn-1].LoggedIn
				}
				out = append(out, owedShow{From: m.Via[len(m.Via)-1], To: s.Node, Owed: owed, Shown: s.At, Sender: sender, User: to})
			}
		}
	}
	return out
}

// netVerdict is one network fault judged.
type netVerdict struct {
	ev           netEvent
	sides        [][]int64
	during       stall // the best side's longest stall
	after        stall
	afterWin     span
	paused       span // the longest ring-wide pause within the fault (with a side expected to deliver)
	pausedAfter  span // and within the window after its heal
	duringOK     bool
	afterOK      bool
	repair       time.Duration
	repairFailed bool
}

// longestWithin is the longest of spans clipped to window w.
func longestWithin(spans []span, w span) span {
	var best span
	for _, p := range spans {
		c := span{maxTime(p.from, w.from), minTime(p.to, w.to)}
		if c.dur() > best.dur() {
			best = c
		}
	}
	return best
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// judgeNet judges every network fault: during it, the longest stall of
// the best expected side; after its heal (until the next fault, 5 s at
// most), the longest stall of any pair. A stall is measured on messages
// stored: when nothing is stored at all (the token held by a node whose
// COMMIT hung in a cut from the store, every client moving for want of a
// receipt and sending again after the heal) no pair shows one, so a
// ring-wide pause (no node committing a visit, pauses) over MaxNetGap
// within either window fails the fault too.
func judgeNet(evs []netEvent, records []faultRecord, ds []owedShow, ids []int64, pauses []span) []netVerdict {
	var out []netVerdict
	for _, ev := range evs {
		v := netVerdict{ev: ev, sides: expectedSides(ev.Fault, ids), duringOK: true}
		ok := reach(ev.Fault)
		for i, side := range v.sides {
			st := longestStall(ds, func(a, b int64) bool {
				return slices.Contains(side, a) && slices.Contains(side, b) && ok(a, b)
			}, span{ev.At, ev.Heal})
			if i == 0 || st.dur() < v.during.dur() {
				v.during = st
			}
		}
		if len(v.sides) > 0 {
			v.paused = longestWithin(pauses, span{ev.At, ev.Heal})
		}
		v.duringOK = v.during.dur() <= MaxNetGap && v.paused.dur() <= MaxNetGap
		v.afterWin = span{ev.Heal, ev.Heal.Add(afterHeal)}
		for _, f := range records {
			if f.Kind != ClientMove && f.At.After(ev.Heal) && f.At.Before(v.afterWin.to) {
				v.afterWin.to = f.At
			}
			if f.Kind == ev.Kind && f.At.Equal(ev.At) {
				v.repair, v.repairFailed = f.Repair, f.Err != ""
			}
		}
		v.after = longestStall(ds, func(int64, int64) bool { return true }, v.afterWin)
		v.pausedAfter = longestWithin(pauses, v.afterWin)
		v.afterOK = v.after.dur() <= MaxNetGap && v.pausedAfter.dur() <= MaxNetGap
		out = append(out, v)
	}
	return out
}

// checkNet: during every network fault the nodes that should deliver did
// within MaxNetGap, and after its heal every pair did; the figures per
// kind.
func (r *runner) checkNet(ev evidence) (Check, []string) {
	name := fmt.Sprintf("network faults: the nodes that reach the store and each other delivered again within %s of a cut, the whole ring within %s of the heal", ms(MaxNetGap), ms(MaxNetGap))
	r.sched.mu.Lock()
	evs := slices.Clone(r.sched.nets)
	r.sched.mu.Unlock()
	pauses, _, _ := r.pause.result()
	vs := judgeNet(evs, ev.records, owedShows(ev.recs, r.work.members), r.procs.ids(), pauses)
	ok := len(vs) > 0
	var detail []string
	for _, v := range vs {
		line := r.netLine(v)
		if !v.duringOK || !v.afterOK {
			ok = false
			line = "FAIL " + line
		}
		detail = append(detail, line)
	}
	figs := netKindLines(vs)
	detail = append(detail, figs...)
	if len(vs) == 0 {
		detail = append(detail, "no network fault was injected")
	}
	return Check{Name: name, OK: ok, Detail: detail}, figs
}

// netLine describes one judged network fault.
func (r *runner) netLine(v netVerdict) string {
	during := "no side of 2+ nodes reaches the store: none expected to deliver"
	if len(v.sides) > 0 {
		during = fmt.Sprintf("longest gap %s (%s) over sides %v", ms(v.during.dur()), r.stallWhere(v.during), v.sides)
	}
	if v.paused.dur() > 0 {
		during += fmt.Sprintf(", no visit committed for %s (+%s to +%s)", ms(v.paused.dur()), r.since(v.paused.from), r.since(v.paused.to))
	}
	after := ""
	if v.pausedAfter.dur() > 0 {
		after = fmt.Sprintf(", no visit committed for %s (+%s to +%s)", ms(v.pausedAfter.dur()), r.since(v.pausedAfter.from), r.since(v.pausedAfter.to))
	}
	repair := ms(v.repair)
	if v.repairFailed {
		repair = "NOT re-formed"
	}
	return fmt.Sprintf("+%s %s: %s for %s, %d packets dropped; during: %s; after the heal: longest gap %s (%s, window %s)%s; whole ring moving %s after the heal",
		r.since(v.ev.At), v.ev.Kind, v.ev.Detail, ms(v.ev.Heal.Sub(v.ev.At)), v.ev.Dropped, during,
		ms(v.after.dur()), r.stallWhere(v.after), ms(v.afterWin.dur()), after, repair)
}

func (r *runner) stallWhere(s stall) string {
	if s.dur() <= 0 {
		return "none"
	}
	return fmt.Sprintf("node %d to node %d, +%s to +%s", s.From, s.To, r.since(s.from), r.since(s.to))
}

// netKindLines are the per-kind figures: repair (heal to the whole ring
// moving) p50 and max, the longest gap during and after.
func netKindLines(vs []netVerdict) []string {
	var out []string
	for _, k := range append(slices.Clone(NetKinds), LabKinds...) {
		var reps []time.Duration
		var during, after time.Duration
		n, bad := 0, 0
		for _, v := range vs {
			if v.ev.Kind != k {
				continue
			}
			n++
			if !v.repairFailed {
				reps = append(reps, v.repair)
			}
			if !v.duringOK || !v.afterOK {
				bad++
			}
			during, after = max(during, v.during.dur(), v.paused.dur()), max(after, v.after.dur(), v.pausedAfter.dur())
		}
		if n == 0 {
			continue
		}
		slices.Sort(reps)
		out = append(out, fmt.Sprintf("net %-20s n=%-3d repair after heal p50 %-7s max %-7s longest gap during %-7s after heal %-7s %d over %s",
			k, n, ms(pct(reps, 0.5)), ms(pct(reps, 1)), ms(during), ms(after), bad, ms(MaxNetGap)))
	}
	return out
}
