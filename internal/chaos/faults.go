package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// faultRecord is one measured repair.
type faultRecord struct {
	Kind  Kind   // the fault
	Phase string // what was measured: the fault kind, or a rejoin
	Node  int64  // the victim (0 for the database, the network)
	At    time.Time
	// Repair is from the injection until the token moved on a ring of
	// the live nodes; for a network fault, from its heal.
	Repair time.Duration
	Settle time.Duration // from the injection until two rotations
	Err    string        // the ring did not re-form in time
	Detail string
}

// scheduler injects ring faults one at a time.
type scheduler struct {
	r    *runner
	rng  *rand.Rand
	live []int64 // nodes running and not stopped, as the harness made them

	mu      sync.Mutex
	records []faultRecord
	nets    []netEvent // network faults injected
	unexp   []string   // exits nobody caused
	termBad []string   // SIGTERM exits that were not 0
}

func (s *scheduler) record(f faultRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, f)
}

func (s *scheduler) remove(id int64) {
	s.live = slices.DeleteFunc(s.live, func(x int64) bool { return x == id })
}

func (s *scheduler) add(id int64) {
	if !slices.Contains(s.live, id) {
		s.live = append(s.live, id)
		slices.Sort(s.live)
	}
}

// reconcile restarts nodes that exited on their own (each is a failed
// check, recorded) so that the run can go on.
func (s *scheduler) reconcile() {
	for _, in := range s.r.procs.takeUnexpected() {
		s.mu.Lock()
		s.unexp = append(s.unexp, s.r.exitLine(in))
		s.mu.Unlock()
		if s.r.procs.running(in.ID) == nil {
			if err := s.r.procs.restart(in.ID); err != nil {
				s.r.note("restart of node %d failed: %v", in.ID, err)
				s.remove(in.ID)
			}
		}
	}
}

// settle waits for the ring of the live nodes and records the repair of
// phase, measured from at.
func (s *scheduler) settle(ctx context.Context, kind Kind, phase string, node int64, at time.Time, detail string) error {
	s.reconcile()
	rep, err := s.r.obs.settled(ctx, s.live, s.r.cfg.RepairTimeout)
	s.reconcile()
	f := faultRecord{Kind: kind, Phase: phase, Node: node, At: at, Detail: detail}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.Err = err.Error()
		s.record(f)
		s.r.note("!!! %s: %v", phase, err)
		return fmt.Errorf("%s (node %d): %w", phase, node, err)
	}
	f.Repair, f.Settle = rep.Moving.Sub(at), rep.Settled.Sub(at)
	s.record(f)
	s.r.note("    %s repaired in %s (ring %v, coordinator %d epoch %d, token %v)", phase, ms(f.Repair),
		rep.State.order, rep.State.coord.NodeID, rep.State.coord.Epoch, rep.State.fence)
	return nil
}

func (s *scheduler) between(r [2]time.Duration) time.Duration {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + time.Duration(s.rng.Int64N(int64(r[1]-r[0])))
}

// pick returns a random live node, avoiding those in avoid when it can.
func (s *scheduler) pick(avoid ...int64) int64 {
	cands := slices.DeleteFunc(slices.Clone(s.live), func(x int64) bool { return slices.Contains(avoid, x) })
	if len(cands) == 0 {
		cands = s.live
	}
	return cands[s.rng.IntN(len(cands))]
}

// run injects faults from a shuffled deck of the enabled kinds (so every
// kind comes up once before any comes up twice) until the deadline; an
// episode begun before it finishes, node restored.
func (s *scheduler) run(ctx context.Context, kinds []Kind, until time.Time) error {
	var deck []Kind
	for {
		wait(ctx, s.between(s.r.cfg.Gap))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(until) {
			return nil
		}
		if len(deck) == 0 {
			deck = slices.Clone(kinds)
			s.rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		k := deck[0]
		deck = deck[1:]
		if err := s.episode(ctx, k); err != nil {
			return err
		}
	}
}

func (s *scheduler) episode(ctx context.Context, k Kind) error {
	r := s.r
	r.countFault(k)
	st, err := r.obs.read(ctx)
	if err != nil {
		st = ringState{}
	}
	hold := s.between(r.cfg.Hold)
	switch k {
	case KillNode, KillCoordinator, KillHolder:
		var victim int64
		var detail string
		switch k {
		case KillNode:
			victim = s.pick(st.coord.NodeID, st.fence.Holder)
		case KillCoordinator:
			victim = st.coord.NodeID
			detail = fmt.Sprintf("coordinator of epoch %d", st.coord.Epoch)
		case KillHolder:
			victim = st.fence.Holder
			detail = fmt.Sprintf("holder of token %v", st.fence)
			if victim == st.coord.NodeID {
				detail += ", also the coordinator"
			}
		}
		if !slices.Contains(s.live, victim) {
			detail = fmt.Sprintf("store names node %d, not live: a random node instead", victim)
			victim = s.pick()
		}
		r.note("fault %s: kill -9 node %d %s", k, victim, detail)
		at := time.Now()
		if err := r.procs.kill(victim); err != nil {
			return err
		}
		s.remove(victim)
		if err := s.settle(ctx, k, string(k), victim, at, detail); err != nil {
			return err
		}
		wait(ctx, hold)
		r.note("restart node %d (down %s)", victim, ms(time.Since(at)))
		at = time.Now()
		if err := r.procs.restart(victim); err != nil {
			return err
		}
		s.add(victim)
		return s.settle(ctx, k, PhaseRestart, victim, at, "after "+string(k))
	case StopCont:
		victim := s.pick()
		r.note("fault %s: SIGSTOP node %d", k, victim)
		at := time.Now()
		if err := r.procs.stop(victim, true); err != nil {
			return err
		}
		s.remove(victim)
		if err := s.settle(ctx, k, string(k), victim, at, "stalled node spliced out"); err != nil {
			_ = r.procs.stop(victim, false)
			return err
		}
		wait(ctx, hold)
		r.note("SIGCONT node %d (stopped %s)", victim, ms(time.Since(at)))
		at = time.Now()
		if err := r.procs.stop(victim, false); err != nil {
			return err
		}
		s.add(victim)
		return s.settle(ctx, k, PhaseSigcont, victim, at, "stalled node rejoins")
	case TermRestart:
		victim := s.pick()
		detail := ""
		if victim == st.coord.NodeID {
			detail = "the coordinator"
		}
		r.note("fault %s: SIGTERM node %d %s", k, victim, detail)
		at := time.Now()
		code, err := r.procs.term(victim, 30*time.Second)
		if err != nil {
			s.mu.Lock()
			s.termBad = append(s.termBad, err.Error())
			s.mu.Unlock()
			r.note("!!! %v: killing it", err)
			if kerr := r.procs.kill(victim); kerr != nil {
				return kerr
			}
		} else if code != 0 {
			s.mu.Lock()
			s.termBad = append(s.termBad, fmt.Sprintf("node %d exited with code %d after SIGTERM at +%s", victim, code, r.since(at)))
			s.mu.Unlock()
			r.note("!!! node %d exited with code %d after SIGTERM", victim, code)
		} else {
			r.note("    node %d left and exited 0 in %s", victim, ms(time.Since(at)))
		}
		s.remove(victim)
		if err := s.settle(ctx, k, string(k), victim, at, detail); err != nil {
			return err
		}
		wait(ctx, hold)
		r.note("restart node %d", victim)
		at = time.Now()
		if err := r.procs.restart(victim); err != nil {
			return err
		}
		s.add(victim)
		return s.settle(ctx, k, PhaseRestart, victim, at, "after sigterm")
	case DBRestart:
		down := max(hold, 500*time.Millisecond)
		r.note("fault %s: kill -9 the private mariadbd, down for %s", k, ms(down))
		at := time.Now()
		r.db.Kill()
		wait(ctx, down)
		if err := r.db.Start(ctx); err != nil {
			return fmt.Errorf("restart the private mariadbd: %w", err)
		}
		r.note("    mariadbd back after %s", ms(time.Since(at)))
		return s.settle(ctx, k, string(k), 0, at, fmt.Sprintf("database down %s", ms(down)))
	case GaleraKill:
		return s.galeraKill(ctx, k, hold)
	case NetCutSuccOneWay, NetCutSucc, NetCutStore, NetCutRing, NetCutCoord, NetSplit, NetSplitStore, NetLoss1, NetLoss5, NetLoss20, NetFlap, NetHostDown:
		return s.netEpisode(ctx, k, st)
	case NetDelay:
		d := 20 * time.Millisecond
		r.note("fault %s: netem delay %s±%s on lo for %s", k, d, d/2, ms(hold))
		at := time.Now()
		undo, err := netemDelay(d)
		if err != nil {
			r.note("!!! netem: %v", err)
			return nil
		}
		r.addCleanup(undo)
		wait(ctx, hold)
		undo()
		return s.settle(ctx, k, string(k), 0, at, fmt.Sprintf("delay %s for %s", d, ms(hold)))
	}
	return fmt.Errorf("unknown fault kind %q", k)
}

// galeraKill kills one Galera server with -9, waits for the ring to move
// again on the others, holds, and starts the server again: it rejoins
// the cluster by state transfer while the ring runs.
func (s *scheduler) galeraKill(ctx context.Context, k Kind, hold time.Duration) error {
	r := s.r
	victim := 1 + s.rng.IntN(procutil.GaleraServers)
	r.note("fault %s: kill -9 Galera server %d (%s), down for at least %s", k, victim, r.galera.Host(victim), ms(hold))
	at := time.Now()
	if err := r.galera.Kill(ctx, victim); err != nil {
		return err
	}
	if err := s.settle(ctx, k, string(k), 0, at, fmt.Sprintf("server %d killed", victim)); err != nil {
		return err
	}
	wait(ctx, hold)
	at = time.Now()
	if err := r.galera.Start(ctx, victim); err != nil {
		return fmt.Errorf("restart Galera server %d: %w", victim, err)
	}
	r.note("    Galera server %d synced again after %s", victim, ms(time.Since(at)))
	return s.settle(ctx, k, PhaseGaleraRejoin, 0, at, fmt.Sprintf("server %d rejoined", victim))
}

// moves makes clients drop their connection and log in at another node at
// random times until the deadline.
func (r *runner) moves(ctx context.Context, rng *rand.Rand, sched *scheduler, until time.Time) {
	for {
		gap := r.cfg.ClientEvery[0]
		if d := r.cfg.ClientEvery[1] - r.cfg.ClientEvery[0]; d > 0 {
			gap += time.Duration(rng.Int64N(int64(d)))
		}
		wait(ctx, gap)
		if ctx.Err() != nil || time.Now().After(until) {
			return
		}
		u := r.work.users[rng.IntN(len(r.work.users))]
		k := kickReq{at: time.Now(), gentle: r.cfg.MoveStyle == "half-close" || r.cfg.MoveStyle == "mixed" && rng.IntN(2) == 0, done: make(chan kickResult, 1)}
		how := "closed"
		if k.gentle {
			how = "half-closed"
		}
		select {
		case u.kick <- k:
		default:
			continue // still moving from the last time
		}
		r.countFault(ClientMove)
		select {
		case res := <-k.done:
			f := faultRecord{Kind: ClientMove, Phase: string(ClientMove), At: k.at, Repair: res.took, Settle: res.took,
				Detail: fmt.Sprintf("%s: node %d -> node %d (%s)", u.name, res.from, res.to, how)}
			if res.err != nil {
				f.Err = res.err.Error()
			}
			sched.record(f)
			r.note("fault %s: %s %s its connection to node %d, logged in again at node %d in %s", ClientMove, u.name, how, res.from, res.to, ms(res.took))
		case <-time.After(r.cfg.RepairTimeout):
			sched.record(faultRecord{Kind: ClientMove, Phase: string(ClientMove), At: k.at,
				Err: fmt.Sprintf("%s did not log in again within %v", u.name, r.cfg.RepairTimeout)})
			r.note("!!! %s did not log in again within %v", u.name, r.cfg.RepairTimeout)
		case <-ctx.Done():
			return
		}
	}
}

// netemUsable reports whether tc netem can delay loopback traffic here,
// and why not. It leaves nothing behind.
func netemUsable() (bool, string) {
	if _, err := exec.LookPath("tc"); err != nil {
		return false, "tc is not installed"
	}
	out, err := exec.Command("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms").CombinedOutput()
	if err != nil {
		return false, "`tc qdisc add dev lo root netem` fails: " + strings.TrimSpace(string(out)) +
			" (the kernel has no sch_netem, or lo already has a root qdisc that is not ours to replace)"
	}
	if out, err := exec.Command("tc", "qdisc", "del", "dev", "lo", "root").CombinedOutput(); err != nil {
		return false, "could not remove the probe qdisc: " + strings.TrimSpace(string(out))
	}
	return true, ""
}

// netemDelay delays every packet on lo by d (jitter d/2) until the
// returned function is called (idempotent).
func netemDelay(d time.Duration) (func(), error) {
	args := []string{"qdisc", "add", "dev", "lo", "root", "netem", "delay", d.String(), (d / 2).String(), "distribution", "normal"}
	if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if out, err := exec.Command("tc", "qdisc", "del", "dev", "lo", "root").CombinedOutput(); err != nil {
				fmt.Printf("ringchaos: REMOVE BY HAND: tc qdisc del dev lo root (%v: %s)\n", err, out)
			}
		})
	}, nil
}

var errInterrupted = errors.New("chaos: interrupted")
