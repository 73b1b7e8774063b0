package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// results collects the figures of `ringbench all`, per ring size.
type results struct {
	store   string // "MariaDB" or "SQLite"
	sizes   []int
	started time.Time
	command string
	loadAvg [2]string // /proc/loadavg at the start and at the end
	opts    allOpts

	vals  map[int]map[string]float64 // size -> metric key -> value
	units map[string]string
	order []string // metric keys in first-recorded order, for the CSV
	notes map[int][]string
	// delivery latencies, sorted, per size and load ("light", "heavy",
	// and the quiet ring's conversations "pingpong" and "typing")
	lat map[int]map[string][]time.Duration
}

func newResults(o allOpts) *results {
	return &results{store: storeKind(o.db), sizes: o.sizes, started: time.Now(), command: strings.Join(append([]string{"ringbench"}, os.Args[1:]...), " "), opts: o,
		vals: map[int]map[string]float64{}, units: map[string]string{}, notes: map[int][]string{},
		lat: map[int]map[string][]time.Duration{}}
}

func (r *results) set(n int, key string, v float64, unit string) {
	if r.vals[n] == nil {
		r.vals[n] = map[string]float64{}
	}
	if _, ok := r.units[key]; !ok {
		r.order = append(r.order, key)
	}
	r.vals[n][key] = v
	r.units[key] = unit
}

// get returns the value, NaN if it was not measured.
func (r *results) get(n int, key string) float64 {
	if v, ok := r.vals[n][key]; ok {
		return v
	}
	return math.NaN()
}

func (r *results) note(n int, format string, args ...any) {
	r.notes[n] = append(r.notes[n], fmt.Sprintf(format, args...))
}

// setDurations records the median and maximum of ds in milliseconds.
func (r *results) setDurations(n int, key string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r.set(n, key+"_median_ms", ms(s[len(s)/2]), "ms")
	r.set(n, key+"_max_ms", ms(s[len(s)-1]), "ms")
	r.set(n, key+"_trials", float64(len(s)), "count")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pctOf is the p-quantile of sorted durations (the chat subcommand's rule:
// the sample at index p·len).
func pctOf(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// writeCSV writes one line per (size, metric): a long table that any
// spreadsheet or plotting tool reads.
func (r *results) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"store", "nodes", "metric", "value", "unit"})
	for _, n := range r.sizes {
		for _, k := range r.order {
			v, ok := r.vals[n][k]
			if !ok {
				continue
			}
			_ = cw.Write([]string{r.store, strconv.Itoa(n), k, strconv.FormatFloat(v, 'g', 6, 64), r.units[k]})
		}
	}
	cw.Flush()
	return cw.Error()
}

// latencyLoads are the phases whose latency distributions are kept.
var latencyLoads = []string{patternPingpong, patternTyping, "light", "heavy"}

// writeQuantilesCSV writes the latency distributions: 1000 quantiles per
// size and load (the quiet ring's conversations too), for plots made
// elsewhere.
func (r *results) writeQuantilesCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"store", "nodes", "load", "quantile", "latency_ms"})
	for _, n := range r.sizes {
		for _, load := range latencyLoads {
			l := r.lat[n][load]
			if len(l) == 0 {
				continue
			}
			for _, q := range cdfQuantiles() {
				_ = cw.Write([]string{r.store, strconv.Itoa(n), load, strconv.FormatFloat(q, 'f', 4, 64),
					strconv.FormatFloat(ms(pctOf(l, q)), 'f', 3, 64)})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// cdfQuantiles are the points of a latency distribution: dense in the tail.
func cdfQuantiles() []float64 {
	var qs []float64
	for i := 0; i < 900; i++ {
		qs = append(qs, float64(i)/1000)
	}
	for i := 900; i < 990; i += 1 {
		qs = append(qs, float64(i)/1000)
	}
	for i := 9900; i <= 10000; i += 5 {
		qs = append(qs, float64(i)/10000)
	}
	return slices.Compact(qs)
}

// A row of the markdown table.
type tableRow struct {
	label, target string
	key           string
	format        func(float64) string
	// verdict, if set, judges the value at the verdict size (5 nodes, or
	// the largest for scaling rows) and says by how much a miss misses.
	verdict func(v float64) (bool, string)
	atLast  bool // the verdict is taken at the largest size
	section bool // a section heading row
}

func fmtF(prec int, unit string) func(float64) string {
	return func(v float64) string {
		if math.IsNaN(v) {
			return "—"
		}
		s := strconv.FormatFloat(v, 'f', prec, 64)
		if unit != "" {
			s += " " + unit
		}
		return s
	}
}

// fmtMS prints milliseconds with a precision that suits their size.
func fmtMS(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	}
}

func atMost(limit float64, unit string) func(float64) (bool, string) {
	return func(v float64) (bool, string) {
		if v <= limit {
			return true, "met"
		}
		return false, fmt.Sprintf("missed by %s%s (%.0f%% over)", trimFloat(v-limit), unit, (v/limit-1)*100)
	}
}

func atLeast(limit float64, unit string) func(float64) (bool, string) {
	return func(v float64) (bool, string) {
		if v >= limit {
			return true, "met"
		}
		return false, fmt.Sprintf("missed by %s%s (%.0f%% short)", trimFloat(limit-v), unit, (1-v/limit)*100)
	}
}

func trimFloat(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// rows is the markdown table's layout.
func (r *results) rows() []tableRow {
	o := r.opts
	rows := []tableRow{
		{label: "machine load average (1 min) when the size started (2 vCPUs)", target: "—", key: "loadavg_1m_at_start", format: fmtF(2, "")},
		{label: "**Ring, idle**", section: true},
		{label: "ring formed after the last start", target: "≤ 2 s", key: "formation_ms", format: fmtMS},
		{label: "token hop, send to TOKEN_ACK, median (node-interval medians)", target: "≤ 200 µs", key: "idle_hop_p50_us", format: fmtF(0, "µs"), verdict: atMost(200, " µs")},
		{label: "token hop, p99 (highest node-interval p99)", target: "—", key: "idle_hop_p99_us", format: fmtF(0, "µs")},
		{label: "floor: bare 64-byte TCP echo between two processes, 800 ms apart, median (`tcp-floor`)", target: "—", key: "tcp_floor_p50_us", format: fmtF(0, "µs")},
		{label: "token rotation, mean (histogram sum ÷ count)", target: "—", key: "idle_rotation_mean_ms", format: fmtMS},
		{label: fmt.Sprintf("idle ring, CPU of all nodes (%% of one core, over %v)", o.idle), target: "< 1 %", key: "idle_cpu_pct", format: fmtF(2, "%"), verdict: atMost(1, " point")},
	}
	rows = append(rows, r.quietRows()...)
	rows = append(rows, []tableRow{
		{label: fmt.Sprintf("**Light load**: %d clients × %g msg/s (%s), %v", o.lightClients, o.lightRate, o.lightArrivals, o.duration), section: true},
		{label: "messages delivered (each exactly once)", target: "—", key: "light_delivered", format: fmtF(0, "")},
		{label: "delivered messages / s", target: "—", key: "light_delivered_per_s", format: fmtF(0, "")},
		{label: "delivery latency p50", target: "≤ 20 ms", key: "light_p50_ms", format: fmtMS, verdict: atMost(20, " ms")},
		{label: "delivery latency p99", target: "≤ 100 ms", key: "light_p99_ms", format: fmtMS, verdict: atMost(100, " ms")},
		{label: "delivery latency p99.9", target: "—", key: "light_p999_ms", format: fmtMS},
		{label: "token hop, median (node-interval medians)", target: "≤ 200 µs", key: "light_hop_p50_us", format: fmtF(0, "µs"), verdict: atMost(200, " µs")},
		{label: "token rotation, mean (histogram sum ÷ count)", target: "—", key: "light_rotation_mean_ms", format: fmtMS},
		{label: "token rotation, median (histogram buckets, interpolated)", target: "—", key: "light_rotation_p50_ms", format: fmtMS},
		{label: "p50 ÷ (5-node p50 × N/5): growth against linear", target: "≤ 1 at 16 nodes", key: "light_p50_vs_linear", format: fmtF(2, ""), verdict: atMost(1, ""), atLast: true},
		{label: fmt.Sprintf("**Heavy load**: %d clients, %d messages in flight each (closed loop), %v", o.heavyClients, o.heavyWindow, o.duration), section: true},
		{label: "messages delivered (each exactly once)", target: "—", key: "heavy_delivered", format: fmtF(0, "")},
		{label: "delivered messages / s", target: "≥ 5,000", key: "heavy_delivered_per_s", format: fmtF(0, ""), verdict: atLeast(5000, " msg/s")},
		{label: "delivery latency p50", target: "—", key: "heavy_p50_ms", format: fmtMS},
		{label: "delivery latency p99", target: "—", key: "heavy_p99_ms", format: fmtMS},
		{label: "delivery latency p99.9", target: "—", key: "heavy_p999_ms", format: fmtMS},
		{label: "token hop, median (node-interval medians)", target: "—", key: "heavy_hop_p50_us", format: fmtF(0, "µs")},
		{label: "token rotation, mean (histogram sum ÷ count)", target: "—", key: "heavy_rotation_mean_ms", format: fmtMS},
		{label: "token rotation, median (histogram buckets, interpolated)", target: "—", key: "heavy_rotation_p50_ms", format: fmtMS},
		{label: "messages stored per token visit (mean)", target: "—", key: "heavy_stored_per_visit", format: fmtF(1, "")},
		{label: fmt.Sprintf("**Store baseline**: same load, no ring (%d users, %d-message inserts, select + delete per node)", o.heavyClients, o.baselineBatch), section: true},
		{label: "messages inserted, read and deleted / s", target: "—", key: "baseline_per_s", format: fmtF(0, "")},
		{label: "transaction (insert + select + delete), mean", target: "—", key: "baseline_tx_ms", format: fmtMS},
		{label: "ring heavy throughput ÷ store baseline", target: "≥ 0.5", key: "ring_vs_baseline", format: fmtF(2, ""), verdict: atLeast(0.5, "")},
		{label: fmt.Sprintf("**Repair** (mutex probe on; median of %d trials)", o.trials), section: true},
		{label: "crashed node (kill -9) bypassed, token moving", target: "≤ 500 ms", key: "repair_crash_median_ms", format: fmtMS, verdict: atMost(500, " ms")},
		{label: "stalled node (SIGSTOP) bypassed, token moving", target: "≤ 1.5 s", key: "repair_stall_median_ms", format: fmtMS, verdict: atMost(1500, " ms")},
		{label: "crashed coordinator replaced, ring repaired, token moving", target: "≤ 2 s", key: "repair_coordinator_median_ms", format: fmtMS, verdict: atMost(2000, " ms")},
		{label: "stalled node back in the ring after SIGCONT", target: "—", key: "repair_rejoin_median_ms", format: fmtMS},
	}...)
	if o.electionTrials > 0 {
		rows = append(rows, tableRow{label: fmt.Sprintf("**Elections**, in one process over loopback UDP (mean of %d; time: median)", o.electionTrials), section: true})
		for _, m := range []string{"ring", "chang-roberts", "bully"} {
			rows = append(rows,
				tableRow{label: m + ": messages, lowest node starts", target: "—", key: "election_" + m + "_one_msgs", format: fmtF(1, "")},
				tableRow{label: m + ": messages, every node starts", target: "—", key: "election_" + m + "_all_msgs", format: fmtF(1, "")},
				tableRow{label: m + ": time to agreement, lowest node starts", target: "—", key: "election_" + m + "_one_median_ms", format: fmtMS},
			)
		}
	}
	if o.failoverTrials > 0 {
		rows = append(rows, tableRow{label: fmt.Sprintf("**Coordinator kill -9 per method** (ringnode processes; median of %d)", o.failoverTrials), section: true})
		for _, m := range []string{"ring", "chang-roberts", "bully", "lease"} {
			goal, lim := "< 1 s", 1000.0
			if m == "lease" {
				goal, lim = fmt.Sprintf("< %v + 200 ms", o.leaseTTL), ms(o.leaseTTL)+200
			}
			rows = append(rows,
				tableRow{label: m + ": elected coordinator recorded", target: goal, key: "failover_" + m + "_elected_median_ms", format: fmtMS, verdict: atMost(lim, " ms")},
				tableRow{label: m + ": ring repaired, token moving", target: "—", key: "failover_" + m + "_repaired_median_ms", format: fmtMS},
			)
		}
	}
	return rows
}

// quietRows are the quiet ring's rows: one conversation per pattern.
func (r *results) quietRows() []tableRow {
	o := r.opts
	head := fmt.Sprintf("**Quiet ring**, no load: one conversation, ping at the first node, pong at the third, taking turns; pingpong: %d messages, each as soon as the previous one was shown", o.quietMessages)
	patterns := []string{patternPingpong}
	if o.typingMessages > 0 {
		head += fmt.Sprintf("; typing: %d, each after a random 0–%v pause", o.typingMessages, typingPauseMax)
		patterns = append(patterns, patternTyping)
	}
	rows := []tableRow{{label: head, section: true}}
	for _, p := range patterns {
		label := "quiet ring, one conversation (" + p + ") "
		rows = append(rows,
			tableRow{label: label + "p50", target: "≤ 5 ms", key: p + "_p50_ms", format: fmtMS, verdict: atMost(5, " ms")},
			tableRow{label: label + "p99", target: "≤ 25 ms", key: p + "_p99_ms", format: fmtMS, verdict: atMost(25, " ms")},
			tableRow{label: label + "max", target: "≤ 100 ms", key: p + "_max_ms", format: fmtMS, verdict: atMost(100, " ms")},
		)
	}
	return rows
}

// verdictSize is the size targets are judged at (5 nodes), and lastSize
// the largest.
func (r *results) verdictSize() int {
	if slices.Contains(r.sizes, 5) {
		return 5
	}
	return r.sizes[0]
}

func (r *results) lastSize() int { return slices.Max(r.sizes) }

// markdown renders the table.
func (r *results) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| measure (%s store) | target (5 nodes) |", r.store)
	for _, n := range r.sizes {
		fmt.Fprintf(&b, " %d nodes |", n)
	}
	b.WriteString(" verdict |\n|---|---|")
	for range r.sizes {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, row := range r.rows() {
		if row.section {
			fmt.Fprintf(&b, "| %s |  |", row.label)
			for range r.sizes {
				b.WriteString("  |")
			}
			b.WriteString("  |\n")
			continue
		}
		fmt.Fprintf(&b, "| %s | %s |", row.label, row.target)
		for _, n := range r.sizes {
			fmt.Fprintf(&b, " %s |", row.format(r.get(n, row.key)))
		}
		verdict := ""
		if row.verdict != nil {
			n := r.verdictSize()
			if row.atLast {
				n = r.lastSize()
			}
			if v := r.get(n, row.key); !math.IsNaN(v) {
				_, verdict = row.verdict(v)
				verdict = fmt.Sprintf("%d nodes: %s", n, verdict)
			}
		}
		fmt.Fprintf(&b, " %s |\n", verdict)
	}
	for _, n := range r.sizes {
		for _, note := range r.notes[n] {
			fmt.Fprintf(&b, "\n- %d nodes: %s", n, note)
		}
	}
	if len(r.notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// document is results.md: how the figures were made, the table, the plots.
func (r *results) document(imgRel string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# ringbench all: results\n\n")
	fmt.Fprintf(&b, "Made %s by:\n\n```sh\n%s\n```\n\n", r.started.Format("2006-01-02 15:04 MST"), r.command)
	fmt.Fprintf(&b, "Store: %s. Machine load (1, 5, 15 min averages) at the start: %s; at the end: %s.\n\n", r.store, r.loadAvg[0], r.loadAvg[1])
	b.WriteString(r.markdown())
	b.WriteString("\n")
	for _, p := range plotFiles {
		fmt.Fprintf(&b, "![%s](%s)\n\n", p.alt, filepath.ToSlash(filepath.Join(imgRel, p.file)))
	}
	b.WriteString("Data: `results.csv` (one line per ring size and metric) and `latency_quantiles.csv` (the delivery latency distributions, the quiet ring's conversations too).\n")
	return b.String()
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

type plotFile struct{ file, alt string }

var plotFiles = []plotFile{
	{"bench_latency_vs_n.svg", "delivery latency against ring size"},
	{"bench_latency_quiet_vs_n.svg", "one conversation's latency on a quiet ring against ring size"},
	{"bench_throughput_vs_n.svg", "throughput against ring size"},
	{"bench_latency_cdf_light.svg", "delivery latency distribution, light load"},
	{"bench_latency_cdf_heavy.svg", "delivery latency distribution, heavy load"},
	{"bench_token_vs_n.svg", "token hop and rotation time against ring size"},
}

// plots renders the SVG charts, by file name.
func (r *results) plots() map[string][]byte {
	xs := make([]float64, len(r.sizes))
	for i, n := range r.sizes {
		xs[i] = float64(n)
	}
	line := func(name, key string, dashed bool) series {
		s := series{name: name, x: xs, markers: true, dashed: dashed}
		for _, n := range r.sizes {
			s.y = append(s.y, r.get(n, key))
		}
		return s
	}
	out := map[string][]byte{}
	lat := chart{
		title:  fmt.Sprintf("Delivery latency against ring size (%s)", r.store),
		xLabel: "nodes in the ring", yLabel: "send to receipt (ms, log scale)", logY: true, xTicks: xs,
		series: []series{
			line("light p50", "light_p50_ms", false), line("light p99", "light_p99_ms", false), line("light p99.9", "light_p999_ms", false),
			line("heavy p50", "heavy_p50_ms", true), line("heavy p99", "heavy_p99_ms", true), line("heavy p99.9", "heavy_p999_ms", true),
		},
		refs: []refLine{{20, "target p50 (light) 20 ms"}, {100, "target p99 (light) 100 ms"}},
	}
	if v5 := r.get(5, "light_p50_ms"); !math.IsNaN(v5) {
		s := series{name: "light p50 linear from 5", x: xs, dashed: true}
		for _, x := range xs {
			s.y = append(s.y, v5*x/5)
		}
		lat.series = append(lat.series, s)
	}
	out["bench_latency_vs_n.svg"] = lat.svg()
	out["bench_latency_quiet_vs_n.svg"] = chart{
		title:  fmt.Sprintf("One conversation on a quiet ring: latency against ring size (%s)", r.store),
		xLabel: "nodes in the ring", yLabel: "send to shown (ms, log scale)", logY: true, xTicks: xs,
		series: []series{
			line("pingpong p50", "pingpong_p50_ms", false), line("pingpong p99", "pingpong_p99_ms", false), line("pingpong max", "pingpong_max_ms", false),
			line("typing p50", "typing_p50_ms", true), line("typing p99", "typing_p99_ms", true), line("typing max", "typing_max_ms", true),
		},
		refs: []refLine{{5, "target p50 5 ms"}, {25, "target p99 25 ms"}, {100, "target max 100 ms"}},
	}.svg()
	out["bench_throughput_vs_n.svg"] = chart{
		title:  fmt.Sprintf("Delivered messages per second against ring size (%s)", r.store),
		xLabel: "nodes in the ring", yLabel: "messages / s", xTicks: xs, yFromZero: true,
		series: []series{
			line("ring, heavy load", "heavy_delivered_per_s", false),
			line("store baseline (no ring)", "baseline_per_s", true),
		},
		refs: []refLine{{5000, "target 5,000 / s"}},
	}.svg()
	for _, load := range []string{"light", "heavy"} {
		c := chart{
			title:  fmt.Sprintf("Delivery latency distribution, %s load (%s)", load, r.store),
			xLabel: "send to receipt (ms, log scale)", yLabel: "fraction of messages delivered", logX: true, yFromZero: true,
		}
		for _, n := range r.sizes {
			l := r.lat[n][load]
			if len(l) == 0 {
				continue
			}
			s := series{name: fmt.Sprintf("%d nodes", n)}
			for _, q := range cdfQuantiles() {
				s.x = append(s.x, math.Max(ms(pctOf(l, q)), 0.01))
				s.y = append(s.y, q)
			}
			c.series = append(c.series, s)
		}
		if load == "light" {
			c.refs = []refLine{{0.5, "p50"}, {0.99, "p99"}}
		}
		out["bench_latency_cdf_"+load+".svg"] = c.svg()
	}
	out["bench_token_vs_n.svg"] = chart{
		title:  fmt.Sprintf("Token hop (idle) and rotation against ring size (%s)", r.store),
		xLabel: "nodes in the ring", yLabel: "ms (log scale)", logY: true, xTicks: xs,
		series: []series{
			line("hop median, idle", "idle_hop_p50_ms", false),
			line("rotation mean, idle", "idle_rotation_mean_ms", false),
			line("rotation mean, light", "light_rotation_mean_ms", true),
			line("rotation mean, heavy", "heavy_rotation_mean_ms", true),
		},
		refs: []refLine{{0.2, "target hop 200 µs"}},
	}.svg()
	return out
}

// write puts results.csv, latency_quantiles.csv and results.md into
// outDir and the plots into imgDir.
func (r *results) write(outDir, imgDir string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	var csvb, qb bytes.Buffer
	if err := r.writeCSV(&csvb); err != nil {
		return err
	}
	if err := r.writeQuantilesCSV(&qb); err != nil {
		return err
	}
	absOut, _ := filepath.Abs(outDir)
	absImg, _ := filepath.Abs(imgDir)
	rel, err := filepath.Rel(absOut, absImg)
	if err != nil {
		rel = absImg
	}
	files := map[string][]byte{
		filepath.Join(outDir, "results.csv"):           csvb.Bytes(),
		filepath.Join(outDir, "latency_quantiles.csv"): qb.Bytes(),
		filepath.Join(outDir, "results.md"):            []byte(r.document(rel)),
	}
	for name, svg := range r.plots() {
		files[filepath.Join(imgDir, name)] = svg
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
