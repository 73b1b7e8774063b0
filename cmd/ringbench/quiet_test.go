package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestTypingPauses(t *testing.T) {
	a, b := typingPauses(1), typingPauses(1)
	lo, hi := time.Duration(1<<62), time.Duration(0)
	var sum time.Duration
	const draws = 10000
	for i := range draws {
		d := a()
		if d < 0 || d > typingPauseMax {
			t.Fatalf("pause %d: %v, outside 0..%v", i, d, typingPauseMax)
		}
		if e := b(); e != d {
			t.Fatalf("pause %d: %v and %v from the same seed", i, d, e)
		}
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
	}
	// Uniform: both ends reached, the mean near the middle.
	if lo > 10*time.Millisecond || hi < typingPauseMax-10*time.Millisecond {
		t.Errorf("pauses span %v..%v, want about 0..%v", lo, hi, typingPauseMax)
	}
	if mean := sum / draws; mean < 700*time.Millisecond || mean > 800*time.Millisecond {
		t.Errorf("mean pause %v, want about 750ms", mean)
	}
	c := typingPauses(2)
	same := 0
	a = typingPauses(1)
	for range 100 {
		if a() == c() {
			same++
		}
	}
	if same > 1 {
		t.Errorf("seeds 1 and 2 gave %d equal pauses of 100", same)
	}
}

func TestConversationNodes(t *testing.T) {
	for n, want := range map[int]int{1: 0, 2: 1, 3: 2, 5: 2, 16: 2} {
		if ping, pong := conversationNodes(n); ping != 0 || pong != want {
			t.Errorf("%d nodes: ping at %d, pong at %d; want 0 and %d", n, ping, pong, want)
		}
	}
}

func TestCheckPatternFlags(t *testing.T) {
	changed := func(names ...string) func(string) bool {
		return func(name string) bool {
			for _, n := range names {
				if n == name {
					return true
				}
			}
			return false
		}
	}
	ok := chatBenchOpts{nodes: 3, clients: 50, rate: 10, messages: 1000}
	for _, c := range []struct {
		name    string
		pattern string
		nodes   int
		msgs    int
		changed []string
		want    string // "" for no error, else part of it
	}{
		{name: "load as before", msgs: 1000},
		{name: "load with --messages", msgs: 10, changed: []string{"messages"}, want: "--messages needs --pattern"},
		{name: "pingpong", pattern: "pingpong", msgs: 1000},
		{name: "typing", pattern: "typing", msgs: 5, changed: []string{"messages", "nodes", "db"}},
		{name: "unknown pattern", pattern: "burst", msgs: 1000, want: `--pattern "burst": want "pingpong" or "typing"`},
		{name: "no messages", pattern: "pingpong", msgs: 0, changed: []string{"messages"}, want: "--messages 0: want 1 or more"},
		{name: "negative messages", pattern: "typing", msgs: -3, changed: []string{"messages"}, want: "--messages -3"},
		{name: "load flags", pattern: "pingpong", msgs: 1000, changed: []string{"clients", "window"}, want: "without load: drop --clients, --window"},
		{name: "no node", pattern: "pingpong", nodes: -1, msgs: 1000, changed: []string{"nodes"}, want: "--nodes ≥ 1"},
	} {
		o := ok
		o.pattern, o.messages = c.pattern, c.msgs
		if c.nodes != 0 {
			o.nodes = c.nodes
		}
		err := checkPatternFlags(o, changed(c.changed...))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
}

func TestConversationTable(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- { // 1.01 ms .. 100.01 ms, in any order
		lat = append(lat, time.Duration(i)*time.Millisecond+12*time.Microsecond)
	}
	var b bytes.Buffer
	writeConversationTable(&b, conversationTitle{pattern: "typing", nodes: 5, store: "MariaDB", pingNode: 1, pongNode: 3}, lat)
	got := b.String()
	for _, want := range []string{
		"| chat, quiet ring, one conversation (typing, 5 nodes, MariaDB store; ping at node 1, pong at node 3) | measured |\n|---|---|\n",
		"| messages, taking turns (each sent after a pause of 0–1.5s once the previous one was shown) | 100 |\n",
		"| latency, send to shown, p50 | 51ms |\n",
		"| latency, send to shown, p90 | 91ms |\n",
		"| latency, send to shown, p99 | 100ms |\n",
		"| latency, send to shown, max | 100ms |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	writeConversationTable(&b, conversationTitle{pattern: "pingpong", nodes: 3}, []time.Duration{1234567 * time.Nanosecond})
	if got := b.String(); !strings.Contains(got, "| latency, send to shown, max | 1.2ms |") || !strings.Contains(got, "as soon as the previous one was shown") {
		t.Errorf("one message:\n%s", got)
	}
}

func TestQuietRows(t *testing.T) {
	o := allOpts{db: "sqlite", sizes: []int{3, 5}, duration: time.Second, idle: time.Second, quietMessages: 200, typingMessages: 30,
		lightClients: 4, lightRate: 2, heavyClients: 4, heavyWindow: 2, trials: 1, leaseTTL: time.Second, baselineBatch: 10}
	r := newResults(o)
	for _, n := range o.sizes {
		r.set(n, "pingpong_messages", 200, "messages")
		r.set(n, "pingpong_p50_ms", 4, "ms")
		r.set(n, "pingpong_p99_ms", 30, "ms")
		r.set(n, "pingpong_max_ms", 90, "ms")
		r.set(n, "typing_p50_ms", 6, "ms")
		r.set(n, "typing_p99_ms", 20, "ms")
		r.set(n, "typing_max_ms", 150, "ms")
		r.lat[n] = map[string][]time.Duration{"pingpong": {time.Millisecond, 3 * time.Millisecond}}
	}
	md := r.markdown()
	for _, want := range []string{
		"| **Quiet ring**, no load: one conversation, ping at the first node, pong at the third, taking turns; pingpong: 200 messages, each as soon as the previous one was shown; typing: 30, each after a random 0–1.5s pause |",
		"| quiet ring, one conversation (pingpong) p50 | ≤ 5 ms | 4.00 ms | 4.00 ms | 5 nodes: met |",
		"| quiet ring, one conversation (pingpong) p99 | ≤ 25 ms | 30.0 ms | 30.0 ms | 5 nodes: missed by 5 ms (20% over) |",
		"| quiet ring, one conversation (pingpong) max | ≤ 100 ms | 90.0 ms | 90.0 ms | 5 nodes: met |",
		"| quiet ring, one conversation (typing) p50 | ≤ 5 ms | 6.00 ms | 6.00 ms | 5 nodes: missed by 1 ms (20% over) |",
		"| quiet ring, one conversation (typing) p99 | ≤ 25 ms | 20.0 ms | 20.0 ms | 5 nodes: met |",
		"| quiet ring, one conversation (typing) max | ≤ 100 ms | 150 ms | 150 ms | 5 nodes: missed by 50 ms (50% over) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// The quiet rows come after the idle ring's and before the light load's.
	idle, quiet, light := strings.Index(md, "idle ring, CPU"), strings.Index(md, "**Quiet ring**"), strings.Index(md, "**Light load**")
	if idle < 0 || quiet < idle || light < quiet {
		t.Errorf("quiet rows out of place (idle %d, quiet %d, light %d)", idle, quiet, light)
	}
	var csvb, qb bytes.Buffer
	if err := r.writeCSV(&csvb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csvb.String(), "SQLite,5,pingpong_p99_ms,30,ms") || !strings.Contains(csvb.String(), "SQLite,3,typing_max_ms,150,ms") {
		t.Errorf("results.csv:\n%s", csvb.String())
	}
	if err := r.writeQuantilesCSV(&qb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(qb.String(), "SQLite,5,pingpong,0.5000,3.000") {
		t.Errorf("latency_quantiles.csv lacks the pingpong distribution")
	}
	svg := string(r.plots()["bench_latency_quiet_vs_n.svg"])
	wellFormed(t, "quiet plot", []byte(svg))
	if !strings.Contains(svg, "typing max") || strings.Count(svg, "<polyline") != 6 {
		t.Errorf("quiet plot: want 6 lines, typing max among them")
	}

	// --typing-messages 0: no typing rows.
	o.typingMessages = 0
	r.opts = o
	md = r.markdown()
	if strings.Contains(md, "(typing)") || strings.Contains(md, "typing:") {
		t.Errorf("typing skipped, yet in the table:\n%s", md)
	}
	if !strings.Contains(md, "(pingpong) max") {
		t.Errorf("pingpong rows missing:\n%s", md)
	}
}
