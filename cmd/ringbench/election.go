package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/transport"
	"github.com/ringchat/ringchat/internal/wire"
)

func newElectionCmd() *cobra.Command {
	var (
		sizes  []int
		trials int
		tick   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "election",
		Short: "Messages and time per election for each voting method, on loopback UDP",
		Long: `election runs n election state machines in this process, each with its own
UDP and TCP sockets on 127.0.0.1 and the real signed frames, and starts elections:
once from the lowest node (one initiator) and once from every node at the same
moment (all initiating). It counts the election messages sent by all nodes (hop
acknowledgements apart) and the time until every node has learnt the winner. The
winner's claim in the store is modelled by a counter (no database), and its
COORDINATOR broadcast (n-1 datagrams, the ring's own) is not counted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "| method | n | initiators | election messages (mean) | hop acks (mean) | textbook | time to agreement (median, max) |")
			fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
			for _, m := range []election.Method{election.Ring, election.ChangRoberts, election.Bully} {
				for _, n := range sizes {
					for _, all := range []bool{false, true} {
						res, err := benchElection(cmd.Context(), m, n, all, trials, tick)
						if err != nil {
							return fmt.Errorf("%s n=%d: %w", m, n, err)
						}
						who := "one"
						if all {
							who = "all"
						}
						fmt.Fprintf(out, "| %s | %d | %s | %.1f | %.1f | %s | %s |\n", m, n, who, res.msgs, res.acks,
							textbook(m, n, all), spread(res.times))
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().IntSliceVar(&sizes, "n", []int{4, 8, 16}, "ring sizes")
	cmd.Flags().IntVar(&trials, "trials", 5, "elections per size and mode")
	cmd.Flags().DurationVar(&tick, "tick", 20*time.Millisecond, "protocol tick of the machines (timeouts only; hops do not wait for ticks)")
	return cmd
}

// textbook gives the message counts the literature states for one election.
func textbook(m election.Method, n int, all bool) string {
	switch m {
	case election.Ring:
		if all {
			return fmt.Sprintf("n·2(n-1)+n rounds = %d", n*(2*(n-1)+n))
		}
		return fmt.Sprintf("2(n-1) + n announce = %d", 2*(n-1)+n)
	case election.ChangRoberts:
		if all {
			return fmt.Sprintf("O(n log n) avg, worst n(n+1)/2 = %d, + n announce", n*(n+1)/2)
		}
		return fmt.Sprintf("best 2n-1 = %d, worst n(n+1)/2 = %d, + n announce", 2*n-1, n*(n+1)/2)
	default:
		if all {
			return fmt.Sprintf("worst O(n²) ≈ n(n-1) = %d", n*(n-1))
		}
		return fmt.Sprintf("lowest starts: O(n²) ≈ n(n-1) = %d", n*(n-1))
	}
}

type electionResult struct {
	msgs, acks float64
	times      []time.Duration
}

// elNode is one election machine with its sockets, driven by one goroutine.
type elNode struct {
	id    int64
	m     *election.Machine
	tr    *transport.Net
	peers []int64
	start chan struct{}
	tick  time.Duration
	h     *elHarness
}

// elHarness models the store's compare-and-set claim and collects results.
type elHarness struct {
	mu      sync.Mutex
	epoch   int64
	leader  map[int64]int64 // node -> coordinator it adopted
	msgs    int
	acks    int
	changed chan struct{}
}

func (h *elHarness) claim() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epoch++
	return h.epoch
}

func (h *elHarness) observe(node, coord int64) {
	h.mu.Lock()
	h.leader[node] = coord
	h.mu.Unlock()
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *elHarness) count(kind election.Kind) {
	h.mu.Lock()
	if kind == election.KindAck {
		h.acks++
	} else {
		h.msgs++
	}
	h.mu.Unlock()
}

func benchElection(ctx context.Context, m election.Method, n int, all bool, trials int, tick time.Duration) (electionResult, error) {
	var res electionResult
	h := &elHarness{leader: map[int64]int64{}, changed: make(chan struct{}, 1)}
	addrs := map[int64]string{}
	var amu sync.RWMutex
	resolve := func(id int64) (string, bool) {
		amu.RLock()
		defer amu.RUnlock()
		a, ok := addrs[id]
		return a, ok
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	nodes := make([]*elNode, n)
	defer func() {
		cancel()
		for _, nd := range nodes {
			if nd != nil {
				nd.tr.Close()
			}
		}
		wg.Wait()
	}()
	for i, id := range ids {
		codec, err := wire.NewCodec([]byte(wire.DevKey))
		if err != nil {
			return res, err
		}
		cfg := transport.DefaultConfig()
		cfg.ID, cfg.Codec, cfg.Resolve, cfg.Addr = id, codec, resolve, "127.0.0.1:0"
		tr, err := transport.Listen(runCtx, cfg)
		if err != nil {
			return res, err
		}
		amu.Lock()
		addrs[id] = tr.Addr().String()
		amu.Unlock()
		ecfg := election.DefaultConfig(id, m)
		nd := &elNode{id: id, peers: ids, m: election.New(ecfg), tr: tr, start: make(chan struct{}, 1), tick: tick, h: h}
		nd.m.SetPeers(ids)
		nodes[i] = nd
	}
	for _, nd := range nodes {
		wg.Go(func() { nd.run(runCtx) })
	}
	for trial := range trials {
		h.mu.Lock()
		clear(h.leader)
		h.msgs, h.acks = 0, 0
		h.mu.Unlock()
		// Every node starts from "coordinator 1 is gone": the lowest node
		// (or every node) starts the election.
		t0 := time.Now()
		starters := nodes[:1]
		if all {
			starters = nodes
		}
		for _, nd := range starters {
			nd.start <- struct{}{}
		}
		deadline := time.NewTimer(10 * time.Second)
		for !h.agreed(ids) {
			select {
			case <-h.changed:
			case <-deadline.C:
				return res, fmt.Errorf("trial %d: no agreement within 10 s", trial)
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		deadline.Stop()
		res.times = append(res.times, time.Since(t0))
		// Let stragglers (late acks, the announcement's last hops) finish
		// before counting, so that each trial's messages are its own: wait
		// until no message was sent for 10 ticks.
		msgs, acks := h.counts()
		for quietSince := time.Now(); time.Since(quietSince) < 10*tick && ctx.Err() == nil; {
			time.Sleep(tick)
			if m2, a2 := h.counts(); m2 != msgs || a2 != acks {
				msgs, acks, quietSince = m2, a2, time.Now()
			}
		}
		res.msgs += float64(msgs) / float64(trials)
		res.acks += float64(acks) / float64(trials)
		// Rounds a node remembers as recent would shortcut the next
		// trial: wait them out.
		ecfg := election.DefaultConfig(1, m)
		time.Sleep(time.Duration(ecfg.ResultTicks+ecfg.ChallengeTicks) * tick)
	}
	return res, nil
}

func (h *elHarness) agreed(ids []int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	top := ids[len(ids)-1]
	for _, id := range ids {
		if h.leader[id] != top {
			return false
		}
	}
	return true
}

func (h *elHarness) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs, h.acks
}

// run is the node's loop: like the ringnode runtime, it sleeps until the
// machine's next deadline or an input.
func (nd *elNode) run(ctx context.Context) {
	t0 := time.Now()
	clock := func() int64 { return int64(time.Since(t0) / nd.tick) }
	timer := time.NewTimer(0)
	defer timer.Stop()
	events := nd.tr.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			nd.m.AdvanceTo(clock())
		case <-nd.start:
			nd.m.AdvanceTo(clock())
			nd.m.Start()
		case ev, ok := <-events:
			if !ok {
				return
			}
			nd.m.AdvanceTo(clock())
			if ev.Kind != transport.EventFrame {
				break
			}
			msg, err := ring.ParseMsg(ev.Frame.Type, ev.Frame.Src, ev.Frame.Epoch, ev.Frame.Payload, ring.ViaUDP)
			if err != nil {
				break
			}
			nd.m.Heard(msg.From)
			switch msg.Type {
			case ring.MsgElection:
				nd.m.Step(*msg.Election)
			case ring.MsgCoordinator:
				nd.m.Observe(msg.From, msg.Epoch)
				nd.h.observe(nd.id, msg.From)
			}
		}
		nd.drain()
		timer.Reset(node.SleepUntilTick(t0, nd.tick, nd.m.NextDeadline()))
	}
}

func (nd *elNode) drain() {
	for {
		r := nd.m.Ready()
		if r.Empty() {
			return
		}
		for _, em := range r.Msgs {
			e := em
			nd.h.count(e.Kind)
			nd.send(ring.Msg{Type: ring.MsgElection, From: nd.id, To: e.To, Election: &e}, 0)
		}
		for _, rep := range r.Reports {
			nd.h.observe(nd.id, rep.Leader)
		}
		if r.Win {
			epoch := nd.h.claim()
			nd.m.Observe(nd.id, epoch)
			nd.m.Claimed(epoch)
			nd.h.observe(nd.id, nd.id)
			for _, p := range nd.peersExceptSelf() {
				nd.send(ring.Msg{Type: ring.MsgCoordinator, From: nd.id, To: p}, epoch)
			}
		}
	}
}

func (nd *elNode) peersExceptSelf() []int64 {
	return slices.DeleteFunc(slices.Clone(nd.peers), func(id int64) bool { return id == nd.id })
}

func (nd *elNode) send(m ring.Msg, epoch int64) {
	p, err := m.Payload()
	if err != nil {
		return
	}
	_ = nd.tr.Send(m.To, wire.Frame{Type: string(m.Type), Src: nd.id, Epoch: epoch, Payload: p})
}
