package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// The burst: a fixed number of direct messages sent as fast as the ring
// takes them, from senders on connections of their own to receivers on
// other nodes; delivered per second from the first send to the last
// delivery. Each sender keeps at most --window messages sent and not yet
// STORED; a message refused BUSY (the node's queue is full) is sent again
// once one of its own is stored.

func newBurstCmd() *cobra.Command {
	var o burstOpts
	cmd := &cobra.Command{
		Use:   "burst",
		Short: "A burst of direct messages from many senders: delivered per second, nothing lost or doubled",
		Long: `burst starts a ring of ringnode processes on 127.0.0.1 (a fresh database), logs in
--senders protocol-2 senders and as many receivers, sender i at node i and its
receiver at node i+1, each on a connection of its own, and has every sender send
its share of --messages direct messages to its receiver as fast as the ring stores
them (at most --window sent and not yet STORED per sender; a BUSY refusal is sent
again). It prints the messages stored and delivered per second, from the first
send to the last STORED and the last delivery, the send-to-receipt latency, the
BUSY refusals, and checks that every message arrived exactly once, in order.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBurst(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.bin, "bin", "", "ringnode binary (default: beside ringbench)")
	f.StringVar(&o.db, "db", "root@tcp(127.0.0.1:3306)/", `MariaDB server (driver DSN without a database), or "sqlite"`)
	f.IntVar(&o.nodes, "nodes", 5, "ring size")
	f.IntVar(&o.senders, "senders", 50, "senders (and as many receivers)")
	f.IntVar(&o.messages, "messages", 100000, "direct messages in all, shared evenly by the senders")
	f.IntVar(&o.window, "window", 500, "messages each sender keeps sent and not yet STORED")
	return cmd
}

type burstOpts struct {
	bin, db                          string
	nodes, senders, messages, window int
}

type burst struct {
	o                  burstOpts
	senders, receivers []*client.Conn
	each               int // messages per sender

	start               time.Time
	lastStored, lastGot atomic.Int64 // unix ns
	stored, got, busy   atomic.Int64
	lat                 [][]time.Duration // per receiver
	bad                 []string          // per receiver: the first loss, double or reorder
}

func runBurst(cmd *cobra.Command, o burstOpts) error {
	if o.nodes < 2 || o.senders < 1 || o.messages < o.senders || o.window < 1 {
		return errors.New("burst: need --nodes ≥ 2, --senders ≥ 1, --messages ≥ --senders and a positive --window")
	}
	ctx := cmd.Context()
	_, list, stop, err := startClientRing(ctx, o.bin, o.db, "burst", o.nodes, nil)
	if err != nil {
		return err
	}
	defer stop()
	addr := func(i int) string {
		n := list[i%len(list)]
		return net.JoinHostPort(n.Host, strconv.Itoa(n.ClientPort))
	}
	b := &burst{o: o, each: o.messages / o.senders, lat: make([][]time.Duration, o.senders), bad: make([]string, o.senders)}
	if b.senders, err = dialAll(ctx, o.senders, addr, func(i int) string { return fmt.Sprintf("bsend%04d", i) }); err != nil {
		return err
	}
	defer closeAll(b.senders)
	if b.receivers, err = dialAll(ctx, o.senders, func(i int) string { return addr(i + 1) }, func(i int) string { return fmt.Sprintf("brecv%04d", i) }); err != nil {
		return err
	}
	defer closeAll(b.receivers)
	if err := warmUp(ctx, b.senders, b.receivers, o.nodes); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%d senders and %d receivers logged in on %d nodes; sending %d messages\n", o.senders, o.senders, o.nodes, b.each*o.senders)
	if err := b.run(ctx); err != nil {
		return err
	}
	return b.report(cmd)
}

func closeAll(cs []*client.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// run sends the burst and waits (up to 60 s after the last send) for
// every delivery.
func (b *burst) run(ctx context.Context) error {
	total := int64(b.each * b.o.senders)
	var wg sync.WaitGroup
	for i := range b.receivers {
		wg.Go(func() { b.receive(i) })
	}
	errs := make(chan error, b.o.senders)
	b.start = time.Now()
	var senders sync.WaitGroup
	for i := range b.senders {
		senders.Go(func() {
			if err := b.send(ctx, i); err != nil {
				errs <- fmt.Errorf("sender %d: %w", i, err)
			}
		})
	}
	senders.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for b.got.Load() < total && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	closeAll(b.receivers)
	wg.Wait()
	if got := b.got.Load(); got != total {
		return fmt.Errorf("burst: %d of %d messages delivered within 60 s of the last send", got, total)
	}
	return nil
}

// send sends sender i's share, keeping at most window unstored, and
// returns once every one of them is STORED.
func (b *burst) send(ctx context.Context, i int) error {
	c := b.senders[i]
	to := client.ToUser(b.receivers[i].User())
	text := make(map[string]string, b.o.window)
	next, stored := 0, 0
	post := func(t string) error {
		id, err := c.Post(ctx, to, t)
		text[id] = t
		return err
	}
	for stored < b.each {
		for next < b.each && len(text) < b.o.window {
			if err := post(fmt.Sprintf("%d %d %d", i, next, time.Now().UnixNano())); err != nil {
				return err
			}
			next++
		}
		var ev client.Event
		select {
		case ev = <-c.Events():
		case <-ctx.Done():
			return ctx.Err()
		}
		switch ev := ev.(type) {
		case client.Stored:
			if _, ok := text[ev.ID]; ok {
				delete(text, ev.ID)
				stored++
				b.stored.Add(1)
				b.lastStored.Store(time.Now().UnixNano())
			}
		case client.ErrorMessage:
			t, ok := text[ev.ID]
			if !ok || ev.Code != protocol.CodeBusy {
				return fmt.Errorf("refused: %s %s", ev.Code, ev.Message)
			}
			b.busy.Add(1)
			delete(text, ev.ID)
			if err := post(t); err != nil {
				return err
			}
		case nil:
			return fmt.Errorf("connection ended: %v", c.Err())
		}
	}
	return nil
}

// receive counts receiver i's deliveries, each once and in its sender's
// order (a BUSY message sent again may come after later ones: order is
// checked on what was stored, by the sequence the store gave it).
func (b *burst) receive(i int) {
	var lastSeq int64
	seen := make([]bool, b.each)
	for ev := range b.receivers[i].Events() {
		m, ok := ev.(client.ChatMessage)
		if !ok {
			continue
		}
		parts := strings.Fields(m.Content)
		if len(parts) != 3 {
			continue
		}
		k, err1 := strconv.Atoi(parts[1])
		ns, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 != nil || err2 != nil || k < 0 || k >= b.each {
			continue
		}
		switch {
		case seen[k] && b.bad[i] == "":
			b.bad[i] = fmt.Sprintf("receiver %d got message %d twice", i, k)
		case m.Seq <= lastSeq && b.bad[i] == "":
			b.bad[i] = fmt.Sprintf("receiver %d got seq %d after %d", i, m.Seq, lastSeq)
		}
		lastSeq = max(lastSeq, m.Seq)
		if !seen[k] {
			seen[k] = true
			b.lat[i] = append(b.lat[i], time.Since(time.Unix(0, ns)))
			b.got.Add(1)
			b.lastGot.Store(time.Now().UnixNano())
		}
	}
}

func (b *burst) report(cmd *cobra.Command) error {
	var all []time.Duration
	for _, l := range b.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		return all[min(len(all)-1, int(p*float64(len(all))))].Round(100 * time.Microsecond)
	}
	toStored := time.Unix(0, b.lastStored.Load()).Sub(b.start)
	toGot := time.Unix(0, b.lastGot.Load()).Sub(b.start)
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "| burst (%d nodes, %d senders → %d receivers, window %d, %s store) | measured |\n|---|---|\n", b.o.nodes, b.o.senders, b.o.senders, b.o.window, storeKind(b.o.db))
	fmt.Fprintf(out, "| messages stored / delivered | %d / %d |\n", b.stored.Load(), len(all))
	fmt.Fprintf(out, "| stored per second (first send to last STORED, %v) | %.0f |\n", toStored.Round(time.Millisecond), float64(b.stored.Load())/toStored.Seconds())
	fmt.Fprintf(out, "| delivered per second (first send to last delivery, %v) | %.0f |\n", toGot.Round(time.Millisecond), float64(len(all))/toGot.Seconds())
	fmt.Fprintf(out, "| delivery latency, send to receipt | p50 %v, p90 %v, p99 %v, max %v |\n", pct(0.5), pct(0.9), pct(0.99), pct(1))
	fmt.Fprintf(out, "| BUSY refusals (sent again) | %d |\n", b.busy.Load())
	for _, s := range b.bad {
		if s != "" {
			return errors.New("burst: " + s)
		}
	}
	return nil
}
