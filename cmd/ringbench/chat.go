package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/nodelist"
)

func newChatCmd() *cobra.Command {
	var o chatBenchOpts
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat throughput and delivery latency on a ring of ringnode processes",
		Long: `chat starts a ring of ringnode processes on 127.0.0.1 (a fresh database), logs in
--clients protocol-2 clients spread evenly over the nodes, and has each send direct
messages to random other clients: --rate messages a second each for --duration
(open loop), or, with --window, keeping that many messages sent and not yet
delivered (closed loop: the ring's capacity). Every message carries its send time;
its receiver measures the delivery latency (send to receipt, both on this machine)
and acknowledges it. It prints messages delivered per second and the latency
percentiles, and checks that every message arrived once.

With --pattern, it measures instead ONE conversation on the otherwise idle ring:
user "ping" logged in at the first node and "pong" at the third (the last on a
smaller ring) take turns sending each other direct messages, --messages in all,
after one untimed message each way. "pingpong" sends each message as soon as
the previous one was shown; "typing" first pauses a random 0-1.5 s (the same
pauses every run). Each message is timed from just before its send to its
receiver's ChatMessage event; one not shown within 10 s is an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runChatBench(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.bin, "bin", "", "ringnode binary (default: beside ringbench)")
	f.StringVar(&o.db, "db", "root@tcp(127.0.0.1:3306)/", `MariaDB server (driver DSN without a database), or "sqlite"`)
	f.IntVar(&o.nodes, "nodes", 5, "ring size")
	f.IntVar(&o.clients, "clients", 50, "clients, spread evenly over the nodes")
	f.Float64Var(&o.rate, "rate", 10, "messages a second each client sends (open loop)")
	f.IntVar(&o.window, "window", 0, "closed loop: messages each client keeps in flight (replaces --rate)")
	f.StringVar(&o.arrivals, "arrivals", arrivalsPoisson, `open loop: "poisson" (each client's sends at random, independent moments, as people type) or "lockstep" (every client sends at the same moments: bursts of --clients messages)`)
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long clients send")
	f.StringVar(&o.pattern, "pattern", "", `one conversation on a quiet ring instead of the load: "pingpong" (each message as soon as the previous one was shown) or "typing" (after a random 0-1.5 s pause)`)
	f.IntVar(&o.messages, "messages", 1000, "--pattern: messages of the conversation, warm-up excluded")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "load: write each node's CPU profile of the send phase to this directory (node-N.pprof; go tool pprof -top)")
	return cmd
}

// The open loop's arrival processes.
const (
	arrivalsPoisson  = "poisson"
	arrivalsLockstep = "lockstep"
)

type chatBenchOpts struct {
	bin, db  string
	nodes    int
	clients  int
	rate     float64
	window   int
	arrivals string
	duration time.Duration
	// users prefixes the clients' user names (default "bench").
	users string
	// pattern, if set, measures one conversation of messages instead
	// (patternPingpong or patternTyping).
	pattern  string
	messages int
	// cpuProfile, if set, is where each node's CPU profile of the send
	// phase is written.
	cpuProfile string
}

func runChatBench(cmd *cobra.Command, o chatBenchOpts) error {
	if err := checkPatternFlags(o, cmd.Flags().Changed); err != nil {
		return err
	}
	if o.pattern != "" {
		return runConversationBench(cmd, o)
	}
	if o.nodes < 1 || o.clients < 2 || o.duration <= 0 || (o.window <= 0 && o.rate <= 0) {
		return errors.New("chat: need --nodes ≥ 1, --clients ≥ 2, a positive --duration and --rate or --window")
	}
	if o.arrivals == "" {
		o.arrivals = arrivalsPoisson
	}
	if o.arrivals != arrivalsPoisson && o.arrivals != arrivalsLockstep {
		return fmt.Errorf("chat: --arrivals %q: want %q or %q", o.arrivals, arrivalsPoisson, arrivalsLockstep)
	}
	ctx := cmd.Context()
	out := cmd.ErrOrStderr()
	prof, err := newNodeProfiles(o.cpuProfile, o.nodes)
	if err != nil {
		return err
	}
	_, list, stop, err := startClientRing(ctx, o.bin, o.db, "chat", o.nodes, prof.flags)
	if err != nil {
		return err
	}
	defer stop()
	addr := func(i int) string {
		n := list[i%len(list)]
		return net.JoinHostPort(n.Host, strconv.Itoa(n.ClientPort))
	}
	b := &chatBench{o: o, lat: make([][]time.Duration, o.clients)}
	if err := b.connect(ctx, addr); err != nil {
		return err
	}
	defer b.close()
	fmt.Fprintf(out, "%d clients logged in on %d nodes; sending for %v\n", o.clients, o.nodes, o.duration)
	taken := prof.take(ctx, o.duration)
	if err := b.run(ctx); err != nil {
		return err
	}
	if err := taken(); err != nil {
		return err
	}
	return b.report(cmd)
}

type chatBench struct {
	o     chatBenchOpts
	conns []*client.Conn
	lat   [][]time.Duration // per receiver

	sent      atomic.Int64
	delivered atomic.Int64
	inflight  []chan struct{} // closed loop: a token per message in flight, per sender
	elapsed   time.Duration
	wg        sync.WaitGroup
}

// dialAll logs n protocol-2 clients in (acknowledging what they get), 32
// at a time: the i-th as name(i) at addr(i). On an error it closes the
// ones it made and returns the first error.
func dialAll(ctx context.Context, n int, addr, name func(int) string) ([]*client.Conn, error) {
	conns := make([]*client.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			c, err := client.DialV2(cctx, []string{addr(i)}, name(i), "", client.Options{AutoAck: true, Timeout: 30 * time.Second})
			if err != nil {
				errs <- fmt.Errorf("log in %s: %w", name(i), err)
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	return conns, nil
}

func (b *chatBench) connect(ctx context.Context, addr func(int) string) error {
	prefix := b.o.users
	if prefix == "" {
		prefix = "bench"
	}
	var err error
	if b.conns, err = dialAll(ctx, b.o.clients, addr, func(i int) string { return fmt.Sprintf("%s%04d", prefix, i) }); err != nil {
		return err
	}
	return warmUp(ctx, b.conns, b.conns, b.o.nodes)
}

// warmUp has every node store and deliver before the clock starts: the
// i-th of the first n senders sends one message to the i-th receiver,
// which waits for it.
func warmUp(ctx context.Context, senders, receivers []*client.Conn, n int) error {
	for i := range min(len(senders), len(receivers), n) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err := senders[i].SendWait(cctx, client.ToUser(receivers[i].User()), "warm-up")
		cancel()
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		for ev := range receivers[i].Events() {
			if m, ok := ev.(client.ChatMessage); ok && m.Content == "warm-up" {
				break
			}
		}
	}
	return nil
}

func (b *chatBench) close() {
	for _, c := range b.conns {
		if c != nil {
			c.Close()
		}
	}
}

// run sends for the duration and waits (up to 30 s) for every message.
func (b *chatBench) run(ctx context.Context) error {
	n := b.o.clients
	b.inflight = make([]chan struct{}, n)
	for i := range n {
		if b.o.window > 0 {
			b.inflight[i] = make(chan struct{}, b.o.window)
		}
		b.wg.Go(func() { b.receive(i) })
	}
	start := time.Now()
	stop := start.Add(b.o.duration)
	var senders sync.WaitGroup
	for i := range n {
		senders.Go(func() { b.send(ctx, i, start, stop) })
	}
	senders.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for b.delivered.Load() < b.sent.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	b.elapsed = time.Since(start)
	if got, want := b.delivered.Load(), b.sent.Load(); got < want {
		return fmt.Errorf("chat: %d of %d messages delivered within 30 s of the end", got, want)
	}
	return nil
}

func (b *chatBench) send(ctx context.Context, i int, start, stop time.Time) {
	c := b.conns[i]
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	next := start
	for k := 0; ; k++ {
		if b.o.window > 0 {
			select {
			case b.inflight[i] <- struct{}{}:
			case <-ctx.Done():
				return
			}
		} else {
			if b.o.arrivals == arrivalsLockstep {
				next = start.Add(time.Duration(float64(k) / b.o.rate * float64(time.Second)))
			} else { // exponential gaps: a Poisson process of the given rate
				next = next.Add(time.Duration(rng.ExpFloat64() / b.o.rate * float64(time.Second)))
			}
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		if time.Now().After(stop) {
			return
		}
		to := rng.IntN(b.o.clients - 1)
		if to >= i {
			to++
		}
		text := fmt.Sprintf("%d %d", i, time.Now().UnixNano())
		if _, err := c.Post(ctx, client.ToUser(b.conns[to].User()), text); err != nil {
			return
		}
		b.sent.Add(1)
	}
}

func (b *chatBench) receive(i int) {
	for ev := range b.conns[i].Events() {
		m, ok := ev.(client.ChatMessage)
		if !ok {
			continue
		}
		from, ns, ok := strings.Cut(m.Content, " ")
		t, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue
		}
		b.lat[i] = append(b.lat[i], time.Since(time.Unix(0, t)))
		b.delivered.Add(1)
		if s, err := strconv.Atoi(from); err == nil && b.o.window > 0 {
			select {
			case <-b.inflight[s]:
			default:
			}
		}
	}
}

func (b *chatBench) report(cmd *cobra.Command) error {
	b.close()
	b.wg.Wait()
	var all []time.Duration
	for _, l := range b.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	load := fmt.Sprintf("%.0f msg/s offered (%d clients × %g/s, %s)", float64(b.o.clients)*b.o.rate, b.o.clients, b.o.rate, b.o.arrivals)
	if b.o.window > 0 {
		load = fmt.Sprintf("closed loop, %d in flight per client", b.o.window)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "| chat (%d nodes, %d clients, %s, %v, %s store) | measured |\n|---|---|\n", b.o.nodes, b.o.clients, load, b.o.duration, storeKind(b.o.db))
	fmt.Fprintf(out, "| messages sent / delivered | %d / %d |\n", b.sent.Load(), len(all))
	fmt.Fprintf(out, "| delivered per second (send phase and drain) | %.0f |\n", float64(len(all))/b.elapsed.Seconds())
	fmt.Fprintf(out, "| delivery latency, send to receipt | p50 %v, p90 %v, p99 %v, max %v |\n",
		pct(0.5).Round(100*time.Microsecond), pct(0.9).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond), pct(1).Round(100*time.Microsecond))
	if int64(len(all)) != b.sent.Load() {
		return fmt.Errorf("chat: %d sent, %d delivered", b.sent.Load(), len(all))
	}
	return nil
}

// startClientRing starts a ring of n ringnode processes for client
// benchmarks on a fresh database named after name (no client rate limit:
// benchmark clients send faster than people) and returns it with its node
// list; stop stops the nodes and removes the database and the files.
func startClientRing(ctx context.Context, bin, db, name string, n int, nodeFlags func(id int64) []string) (r *procRing, list []nodelist.Entry, stop func(), err error) {
	var undo []func()
	undoAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	stop = undoAll
	defer func() {
		if err != nil {
			undoAll() // stop itself is nil in an error return
		}
	}()
	if bin, err = ringnodeBinary(bin); err != nil {
		return nil, nil, nil, err
	}
	dir, err := os.MkdirTemp("", "ringbench-"+name)
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	newStore, err := storeMaker(db, dir)
	if err != nil {
		return nil, nil, nil, err
	}
	st, dsn, cleanup, err := newStore(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, cleanup)
	st.Close()
	if r, err = newProcRing(bin, dir, dsn, n, []string{"--client-rate", "0", "--max-clients-per-ip", "1000"} /* every client is on 127.0.0.1 */); err != nil {
		return nil, nil, nil, err
	}
	r.nodeFlags = nodeFlags
	undo = append(undo, r.stopAll)
	if err = r.startAll(); err != nil {
		return nil, nil, nil, err
	}
	if list, err = nodelist.Load(r.nodes); err != nil {
		return nil, nil, nil, err
	}
	return r, list, stop, nil
}
