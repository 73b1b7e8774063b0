package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
)

// The patterns of one conversation on a quiet ring (chat --pattern, and
// the quiet phase of all).
const (
	// patternPingpong sends each message as soon as the previous one was
	// shown.
	patternPingpong = "pingpong"
	// patternTyping pauses 0 to typingPauseMax before each message, as a
	// person typing a reply would.
	patternTyping = "typing"
)

const (
	typingPauseMax = 1500 * time.Millisecond
	// conversationDeadline is how long a timed message may take to be shown.
	conversationDeadline = 10 * time.Second
	// conversationWarmUpDeadline bounds each untimed warm-up message: on a
	// ring just started, the first one may wait for the ring to form.
	conversationWarmUpDeadline = 60 * time.Second
	// conversationSeed seeds the typing pauses: every run pauses alike.
	conversationSeed = 1
)

// The two users of a conversation.
var conversationUsers = [2]string{"ping", "pong"}

type conversationOpts struct {
	pattern  string
	messages int
	seed     uint64
}

func (o conversationOpts) check() error {
	if o.pattern != patternPingpong && o.pattern != patternTyping {
		return fmt.Errorf("--pattern %q: want %q or %q", o.pattern, patternPingpong, patternTyping)
	}
	if o.messages < 1 {
		return fmt.Errorf("--messages %d: want 1 or more", o.messages)
	}
	return nil
}

// conversationNodes returns the indexes, in ring order, of the nodes ping
// and pong log in at on a ring of n nodes: the first and the third (the
// last on a smaller ring).
func conversationNodes(n int) (ping, pong int) {
	return 0, max(0, min(2, n-1))
}

// typingPauses returns the typing pattern's pauses: drawn uniformly from
// 0 to typingPauseMax, the same sequence for the same seed.
func typingPauses(seed uint64) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, 0x7479706e67))
	return func() time.Duration { return time.Duration(rng.Int64N(int64(typingPauseMax) + 1)) }
}

// converse measures one conversation on a running ring whose nodes' client
// addresses are addrs, in ring order: protocol-2 clients "ping" and "pong"
// log in at the nodes conversationNodes names and take turns, ping first,
// sending each other direct messages, each once the previous one was shown
// (after a pause with the typing pattern); one message each way warms up
// untimed. It returns, in message order, each message's time from just
// before its send to its ChatMessage event at the receiver. A message not
// shown within conversationDeadline is an error naming it.
func converse(ctx context.Context, addrs []string, o conversationOpts) ([]time.Duration, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errors.New("conversation: no node address")
	}
	pi, po := conversationNodes(len(addrs))
	at := [2]string{addrs[pi], addrs[po]}
	conns, err := dialAll(ctx, 2, func(i int) string { return at[i] }, func(i int) string { return conversationUsers[i] })
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for k := range 2 {
		if _, err := sendShown(ctx, conns[k], conns[1-k], fmt.Sprintf("%s warm-up %d", o.pattern, k+1), conversationWarmUpDeadline); err != nil {
			return nil, fmt.Errorf("%s warm-up message %d: %w", o.pattern, k+1, err)
		}
	}
	var pause func() time.Duration
	if o.pattern == patternTyping {
		pause = typingPauses(o.seed)
	}
	lat := make([]time.Duration, 0, o.messages)
	for k := range o.messages {
		if pause != nil {
			if err := sleepCtx(ctx, pause()); err != nil {
				return nil, err
			}
		}
		d, err := sendShown(ctx, conns[k%2], conns[1-k%2], fmt.Sprintf("%s %d", o.pattern, k+1), conversationDeadline)
		if err != nil {
			return nil, fmt.Errorf("%s message %d of %d: %w", o.pattern, k+1, o.messages, err)
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// sendShown sends text from one client to the other and waits, up to
// limit, until the receiver is shown it. It returns the time from just
// before the send to the receiver's ChatMessage event. Other messages and
// receipts are passed over; an error, a protocol error or the end of either
// connection fails it.
func sendShown(ctx context.Context, from, to *client.Conn, text string, limit time.Duration) (time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	if _, err := from.Post(wctx, client.ToUser(to.User()), text); err != nil {
		return 0, err
	}
	for {
		select {
		case ev, ok := <-to.Events():
			shown := time.Now()
			if m, isChat := ev.(client.ChatMessage); isChat {
				if m.From == from.User() && m.Content == text {
					return shown.Sub(start), nil
				}
				continue
			}
			if err := conversationEventErr(to, ev, ok); err != nil {
				return 0, err
			}
		case ev, ok := <-from.Events():
			if err := conversationEventErr(from, ev, ok); err != nil {
				return 0, err
			}
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return 0, fmt.Errorf("not shown to %s within %v", to.User(), limit)
		}
	}
}

// conversationEventErr says what is wrong with an event that is not the
// awaited message (nil for a receipt or another chat message); ok false is
// the end of c's events.
func conversationEventErr(c *client.Conn, ev client.Event, ok bool) error {
	if !ok {
		return fmt.Errorf("%s's connection ended: %v", c.User(), c.Err())
	}
	switch ev := ev.(type) {
	case client.ErrorMessage:
		return fmt.Errorf("%s got an error: %s (%s)", c.User(), ev.Message, ev.Code)
	case client.ProtocolError:
		return fmt.Errorf("%s got an undecodable line: %v", c.User(), ev.Err)
	case client.Disconnected:
		return fmt.Errorf("%s's connection ended: %v", c.User(), ev.Err)
	}
	return nil
}

// checkPatternFlags checks chat's --pattern and --messages; changed says
// whether a flag was given. A pattern measures one conversation, so the
// flags of the load (--clients, --rate, ...) do not go with it.
func checkPatternFlags(o chatBenchOpts, changed func(name string) bool) error {
	if o.pattern == "" {
		if changed("messages") {
			return errors.New("chat: --messages needs --pattern")
		}
		return nil
	}
	if err := (conversationOpts{pattern: o.pattern, messages: o.messages}).check(); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	var load []string
	for _, name := range []string{"clients", "rate", "window", "arrivals", "duration"} {
		if changed(name) {
			load = append(load, "--"+name)
		}
	}
	if len(load) > 0 {
		return fmt.Errorf("chat: --pattern measures one conversation, without load: drop %s", strings.Join(load, ", "))
	}
	if o.nodes < 1 {
		return errors.New("chat: need --nodes ≥ 1")
	}
	return nil
}

// runConversationBench is chat --pattern: one conversation on a ring of
// its own, otherwise idle.
func runConversationBench(cmd *cobra.Command, o chatBenchOpts) error {
	ctx := cmd.Context()
	_, list, stop, err := startClientRing(ctx, o.bin, o.db, "chat", o.nodes, nil)
	if err != nil {
		return err
	}
	defer stop()
	addrs := make([]string, len(list))
	for i, n := range list {
		addrs[i] = net.JoinHostPort(n.Host, strconv.Itoa(n.ClientPort))
	}
	pi, po := conversationNodes(len(list))
	fmt.Fprintf(cmd.ErrOrStderr(), "%d nodes; %s at node %d and %s at node %d: %d messages (%s)\n",
		o.nodes, conversationUsers[0], list[pi].ID, conversationUsers[1], list[po].ID, o.messages, o.pattern)
	lat, err := converse(ctx, addrs, conversationOpts{pattern: o.pattern, messages: o.messages, seed: conversationSeed})
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	writeConversationTable(cmd.OutOrStdout(), conversationTitle{pattern: o.pattern, nodes: o.nodes, store: storeKind(o.db),
		pingNode: list[pi].ID, pongNode: list[po].ID}, lat)
	return nil
}

type conversationTitle struct {
	pattern            string
	nodes              int
	store              string
	pingNode, pongNode int64
}

// writeConversationTable writes a conversation's latencies (in any order)
// as a markdown table, rounded to 0.1 ms.
func writeConversationTable(w io.Writer, t conversationTitle, lat []time.Duration) {
	s := slices.Sorted(slices.Values(lat))
	pct := func(p float64) time.Duration { return pctOf(s, p).Round(100 * time.Microsecond) }
	how := "each sent as soon as the previous one was shown"
	if t.pattern == patternTyping {
		how = fmt.Sprintf("each sent after a pause of 0–%v once the previous one was shown", typingPauseMax)
	}
	fmt.Fprintf(w, "| chat, quiet ring, one conversation (%s, %d nodes, %s store; ping at node %d, pong at node %d) | measured |\n|---|---|\n",
		t.pattern, t.nodes, t.store, t.pingNode, t.pongNode)
	fmt.Fprintf(w, "| messages, taking turns (%s) | %d |\n", how, len(s))
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"max", 1}} {
		fmt.Fprintf(w, "| latency, send to shown, %s | %v |\n", q.name, pct(q.p))
	}
}
