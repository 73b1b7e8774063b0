package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wellFormed decodes the whole document, failing on any XML error.
func wellFormed(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
	}
}

func TestChartSVG(t *testing.T) {
	c := chart{
		title: "latency <p50> & co", xLabel: "nodes", yLabel: "ms", logY: true, xTicks: []float64{3, 5, 8, 16},
		series: []series{
			{name: "p50", x: []float64{3, 5, 8, 16}, y: []float64{10, 15, math.NaN(), 40}, markers: true},
			{name: "p99", x: []float64{3, 5, 8, 16}, y: []float64{50, 80, 120, 300}, dashed: true},
		},
		refs: []refLine{{20, "target"}},
	}
	svg := c.svg()
	wellFormed(t, "chart", svg)
	s := string(svg)
	if !strings.Contains(s, "latency &lt;p50&gt; &amp; co") {
		t.Error("title not escaped")
	}
	if got := strings.Count(s, "<polyline"); got != 2 {
		t.Errorf("%d lines, want 2", got)
	}
	if got := strings.Count(s, "<circle"); got != 3 { // the NaN point is skipped
		t.Errorf("%d markers, want 3", got)
	}
}

func TestAxisTicks(t *testing.T) {
	lo, hi := span([]float64{0.3, 45}, true, false)
	if lo != 0.1 || hi != 100 {
		t.Errorf("log span %v..%v, want 0.1..100", lo, hi)
	}
	a := axis{lo: lo, hi: hi, log: true, p0: 0, p1: 300}
	if got := a.pos(10); math.Abs(got-200) > 1e-9 {
		t.Errorf("pos(10) = %v, want 200", got)
	}
	lo, hi = span([]float64{1234, 8800}, false, true)
	if lo != 0 || hi != 10000 {
		t.Errorf("linear span %v..%v, want 0..10000", lo, hi)
	}
}

func TestParseMetricsAndQuantile(t *testing.T) {
	text := `# HELP ringchat_token_hop_seconds x
# TYPE ringchat_token_hop_seconds histogram
ringchat_token_hop_seconds_bucket{node="1",le="0.0001"} 2
ringchat_token_hop_seconds_bucket{node="1",le="0.0002"} 6
ringchat_token_hop_seconds_bucket{node="1",le="+Inf"} 10
ringchat_token_hop_seconds_count{node="1"} 10
ringchat_frames_rejected_total{node="1",reason="bad \"sig\", old"} 3
ringchat_token_visits_total{node="1"} 7
`
	s := samples{}
	for range 2 { // two nodes with the same figures
		if err := parseMetrics(strings.NewReader(text), s); err != nil {
			t.Fatal(err)
		}
	}
	if got := s["ringchat_token_visits_total"]; got != 14 {
		t.Errorf("visits %v, want 14 (summed over nodes)", got)
	}
	if got := s[`ringchat_frames_rejected_total{reason="bad \"sig\", old"}`]; got != 6 {
		t.Errorf("rejected %v, want 6; samples %v", got, s)
	}
	h := s.histogram("ringchat_token_hop_seconds")
	if len(h) != 3 || histCount(h) != 20 {
		t.Fatalf("histogram %v", h)
	}
	// Buckets 4, 12, 20: rank 10 lies in (0.0001, 0.0002], 6 of its 8 →
	// 0.000175.
	if got := quantile(h, 0.5); math.Abs(got-0.000175) > 1e-12 {
		t.Errorf("p50 %v, want 0.000175", got)
	}
	// p99 is in the +Inf bucket: the highest finite bound.
	if got := quantile(h, 0.99); got != 0.0002 {
		t.Errorf("p99 %v, want 0.0002", got)
	}
	d := s.minus(samples{"ringchat_token_visits_total": 4})
	if d["ringchat_token_visits_total"] != 10 {
		t.Errorf("delta %v", d["ringchat_token_visits_total"])
	}
	if !math.IsNaN(quantile(nil, 0.5)) {
		t.Error("empty histogram should give NaN")
	}
}

func TestResultsWrite(t *testing.T) {
	o := allOpts{db: "sqlite", sizes: []int{3, 5, 16}, duration: time.Second, idle: time.Second, lightClients: 4, lightRate: 2,
		heavyClients: 4, heavyWindow: 2, trials: 1, electionTrials: 1, failoverTrials: 1, leaseTTL: time.Second, baselineBatch: 10}
	r := newResults(o)
	for _, n := range o.sizes {
		r.set(n, "light_p50_ms", float64(n)*3, "ms")
		r.set(n, "heavy_delivered_per_s", 1000*float64(n), "messages/s")
		r.set(n, "idle_hop_p50_us", 250, "µs")
		r.lat[n] = map[string][]time.Duration{"light": {time.Millisecond, 2 * time.Millisecond, 9 * time.Millisecond}}
	}
	r.set(16, "light_p50_vs_linear", 0.9, "ratio")
	md := r.markdown()
	for _, want := range []string{"| 3 nodes | 5 nodes | 16 nodes |", "5 nodes: missed by 50 µs (25% over)", "16 nodes: met", "| 15.0 ms |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	if err := r.write(dir, filepath.Join(dir, "img")); err != nil {
		t.Fatal(err)
	}
	for _, p := range plotFiles {
		b, err := os.ReadFile(filepath.Join(dir, "img", p.file))
		if err != nil {
			t.Fatal(err)
		}
		wellFormed(t, p.file, b)
	}
	doc, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "](img/bench_latency_vs_n.svg)") {
		t.Errorf("results.md does not link the plots:\n%s", doc)
	}
	csvb, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(csvb), "SQLite,16,heavy_delivered_per_s,16000,messages/s") {
		t.Errorf("results.csv:\n%s", csvb)
	}
}
