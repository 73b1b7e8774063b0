package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// waits is a series of timed waits, each of which either ended (its
// duration) or missed its deadline. A missed wait counts as longer than
// any that ended, so a percentile that falls among the misses is a miss.
type waits struct {
	done   []time.Duration
	missed int
}

func (w *waits) add(d time.Duration) { w.done = append(w.done, d) }
func (w *waits) miss()               { w.missed++ }
func (w *waits) count() int          { return len(w.done) + w.missed }

// max is the longest sample (0 with none).
func (w *waits) max() time.Duration {
	if len(w.done) == 0 {
		return 0
	}
	return slices.Max(w.done)
}

// pct returns the p-quantile (the sample at index p·n, the rule of the
// other subcommands) and false when it falls among the misses or there is
// no sample at all.
func (w *waits) pct(p float64) (time.Duration, bool) {
	n := w.count()
	if n == 0 {
		return 0, false
	}
	i := min(n-1, int(p*float64(n)))
	if i >= len(w.done) {
		return 0, false
	}
	s := slices.Clone(w.done)
	slices.Sort(s)
	return s[i], true
}

// fmtPct formats a percentile of w for the report.
func (w *waits) fmtPct(p float64, deadline time.Duration) string {
	d, ok := w.pct(p)
	switch {
	case w.count() == 0:
		return "no sample"
	case !ok:
		return fmt.Sprintf("> %v (missed)", deadline)
	}
	return fmtDur(d)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Microsecond).String()
}

// scaleRow is one line of the scale report: a figure, its target (empty:
// no target) and whether the target was met.
type scaleRow struct {
	what, target, measured string
	ok                     bool
}

type scaleReport struct {
	title string
	rows  []scaleRow
}

// figure adds a row without a target.
func (r *scaleReport) figure(what, measured string) {
	r.rows = append(r.rows, scaleRow{what: what, measured: measured, ok: true})
}

// check adds a row with a target.
func (r *scaleReport) check(what, target, measured string, ok bool) {
	r.rows = append(r.rows, scaleRow{what: what, target: target, measured: measured, ok: ok})
}

// latency adds a row for a percentile of w with the target "≤ limit": a
// percentile among the misses, or no sample, fails it.
func (r *scaleReport) latency(what string, w *waits, p float64, limit, deadline time.Duration) {
	d, ok := w.pct(p)
	ok = ok && d <= limit
	m := w.fmtPct(p, deadline)
	if w.missed > 0 {
		m += fmt.Sprintf(" (%d of %d missed %v)", w.missed, w.count(), deadline)
	}
	r.check(what, "≤ "+fmtDur(limit), m, ok)
}

// failed lists the rows whose target was missed.
func (r *scaleReport) failed() []string {
	var out []string
	for _, row := range r.rows {
		if row.target != "" && !row.ok {
			out = append(out, row.what)
		}
	}
	return out
}

// write prints the report as a markdown table.
func (r *scaleReport) write(w io.Writer) {
	fmt.Fprintf(w, "| %s | target | measured | |\n|---|---|---|---|\n", r.title)
	for _, row := range r.rows {
		mark := ""
		if row.target != "" {
			mark = "ok"
			if !row.ok {
				mark = "**FAILED**"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.what, row.target, row.measured, mark)
	}
}
