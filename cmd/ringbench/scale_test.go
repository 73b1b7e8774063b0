package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWaitsPercentiles(t *testing.T) {
	var w waits
	for _, ms := range []int{50, 10, 40, 20, 30} {
		w.add(time.Duration(ms) * time.Millisecond)
	}
	if d, ok := w.pct(0.5); !ok || d != 30*time.Millisecond {
		t.Errorf("p50 of 10..50 ms = %v, %v; want 30ms", d, ok)
	}
	if d, ok := w.pct(0.99); !ok || d != 50*time.Millisecond {
		t.Errorf("p99 of 10..50 ms = %v, %v; want 50ms", d, ok)
	}
	// A miss counts as longer than any wait that ended.
	w.miss()
	if _, ok := w.pct(0.99); ok {
		t.Error("p99 with one miss in six: want a miss")
	}
	if d, ok := w.pct(0.5); !ok || d != 40*time.Millisecond {
		t.Errorf("p50 with one miss in six = %v, %v; want 40ms", d, ok)
	}
	if got := w.fmtPct(0.99, 10*time.Second); got != "> 10s (missed)" {
		t.Errorf("fmtPct of a miss = %q", got)
	}
	var none waits
	if _, ok := none.pct(0.5); ok || none.fmtPct(0.5, time.Second) != "no sample" {
		t.Error("an empty series has no percentile")
	}
}

func TestScaleReportTargets(t *testing.T) {
	fast, slow, missed := &waits{}, &waits{}, &waits{}
	for range 19 { // 20 group messages: their p99 is the slowest
		fast.add(5 * time.Millisecond)
		slow.add(5 * time.Millisecond)
		missed.add(5 * time.Millisecond)
	}
	fast.add(90 * time.Millisecond)
	slow.add(2 * time.Second)
	missed.miss()
	r := &scaleReport{title: "scale"}
	r.latency("fast p99", fast, 0.99, 100*time.Millisecond, time.Second)
	r.latency("slow p99", slow, 0.99, 100*time.Millisecond, time.Second)
	r.latency("missed p99", missed, 0.99, 100*time.Millisecond, time.Second)
	r.latency("empty p99", &waits{}, 0.99, 100*time.Millisecond, time.Second)
	r.figure("size", "3 MiB")
	r.check("visits", "none", "2 failed", false)
	got := r.failed()
	want := []string{"slow p99", "missed p99", "empty p99", "visits"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("failed = %q, want %q", got, want)
	}
	var b bytes.Buffer
	r.write(&b)
	out := b.String()
	for _, s := range []string{
		"| fast p99 | ≤ 100ms | 90ms | ok |",
		"| slow p99 | ≤ 100ms | 2s | **FAILED** |",
		"| missed p99 | ≤ 100ms | > 1s (missed) (1 of 20 missed 1s) | **FAILED** |",
		"| size |  | 3 MiB |  |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("report lacks %q:\n%s", s, out)
		}
	}
}

func TestTableRowsMinus(t *testing.T) {
	before := tableRows{"messages": 10, "recipients": 5, "users": 3}
	after := tableRows{"messages": 11, "recipients": 9004, "users": 3}
	if got := after.minus(before); got != "messages +1, recipients +8999" {
		t.Errorf("minus = %q", got)
	}
	if after.total()-before.total() != 9000 {
		t.Errorf("total delta = %d", after.total()-before.total())
	}
}

func TestScaleOptsValidate(t *testing.T) {
	good := scaleOpts{db: "x", nodes: 5, users: 100, groupSize: 100, online: 10, messages: 1, expired: 1, backlog: 1,
		groupMsgs: 1, retention: 7 * 24 * time.Hour, wait: time.Second, drainWait: time.Second, seeders: 1}
	if err := good.validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for name, mod := range map[string]func(*scaleOpts){
		"sqlite":             func(o *scaleOpts) { o.db = "sqlite" },
		"group over users":   func(o *scaleOpts) { o.groupSize = 101 },
		"online over group":  func(o *scaleOpts) { o.online = 101 },
		"one online":         func(o *scaleOpts) { o.online = 1 },
		"retention too long": func(o *scaleOpts) { o.retention = 9 * 24 * time.Hour },
		"no group messages":  func(o *scaleOpts) { o.groupMsgs = 0 },
		"negative backlog":   func(o *scaleOpts) { o.backlog = -1 },
		"no deadline":        func(o *scaleOpts) { o.wait = 0 },
	} {
		o := good
		mod(&o)
		if o.validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
