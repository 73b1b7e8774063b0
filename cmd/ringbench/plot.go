package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// A small SVG line chart, enough for the benchmark's figures: linear or
// logarithmic axes, lines with or without point markers, a legend and
// horizontal reference lines (targets). No plotting library is needed.

type series struct {
	name    string
	x, y    []float64
	markers bool // draw a dot at every point
	dashed  bool
}

type refLine struct {
	y     float64
	label string
}

type chart struct {
	title, xLabel, yLabel string
	logX, logY            bool
	xTicks                []float64 // explicit x ticks (the ring sizes); else computed
	yFromZero             bool      // a linear y axis starts at 0
	series                []series
	refs                  []refLine
}

const (
	svgW, svgH                        = 800, 460
	padLeft, padRight, padTop, padBot = 78, 230, 44, 58
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// axis maps data values to pixels along one dimension.
type axis struct {
	lo, hi float64
	log    bool
	p0, p1 float64 // pixel positions of lo and hi
}

func (a axis) pos(v float64) float64 {
	if a.log {
		v, lo, hi := math.Log10(v), math.Log10(a.lo), math.Log10(a.hi)
		return a.p0 + (v-lo)/(hi-lo)*(a.p1-a.p0)
	}
	return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0)
}

// ticks returns tick values inside [lo, hi].
func (a axis) ticks() []float64 {
	if a.log {
		var out []float64
		decades := math.Log10(a.hi) - math.Log10(a.lo)
		mult := []float64{1}
		if decades <= 3 {
			mult = []float64{1, 2, 5}
		}
		for e := math.Floor(math.Log10(a.lo)); e <= math.Ceil(math.Log10(a.hi)); e++ {
			for _, m := range mult {
				v := m * math.Pow(10, e)
				if v >= a.lo*(1-1e-9) && v <= a.hi*(1+1e-9) {
					out = append(out, v)
				}
			}
		}
		return out
	}
	step := niceStep((a.hi - a.lo) / 5)
	var out []float64
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// span picks an axis range covering vs.
func span(vs []float64, log, fromZero bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) || (log && v <= 0) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 1) {
		return 1, 10
	}
	if log {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if hi <= lo {
			hi = lo * 10
		}
		return lo, hi
	}
	if fromZero && lo > 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 10000:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// svg renders the chart as a standalone SVG document.
func (c chart) svg() []byte {
	var xs, ys []float64
	for _, s := range c.series {
		xs = append(xs, s.x...)
		ys = append(ys, s.y...)
	}
	for _, r := range c.refs {
		ys = append(ys, r.y)
	}
	xs = append(xs, c.xTicks...)
	xlo, xhi := span(xs, c.logX, false)
	if len(c.xTicks) > 0 && !c.logX {
		xlo, xhi = c.xTicks[0], c.xTicks[len(c.xTicks)-1]
		pad := (xhi - xlo) * 0.05
		if pad == 0 {
			pad = 1
		}
		xlo, xhi = xlo-pad, xhi+pad
	}
	ylo, yhi := span(ys, c.logY, c.yFromZero)
	ax := axis{lo: xlo, hi: xhi, log: c.logX, p0: padLeft, p1: svgW - padRight}
	ay := axis{lo: ylo, hi: yhi, log: c.logY, p0: svgH - padBot, p1: padTop}

	var b bytes.Buffer
	esc := html.EscapeString
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", padLeft, esc(c.title))
	// grid and ticks
	xt := c.xTicks
	if len(xt) == 0 {
		xt = ax.ticks()
	}
	for _, v := range xt {
		x := ax.pos(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`+"\n", x, padTop, x, svgH-padBot)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, svgH-padBot+16, fmtTick(v))
	}
	for _, v := range ay.ticks() {
		y := ay.pos(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>`+"\n", padLeft, y, svgW-padRight, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", padLeft-6, y, fmtTick(v))
	}
	// axes and labels
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n",
		padLeft, padTop, svgW-padLeft-padRight, svgH-padTop-padBot)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (padLeft+svgW-padRight)/2, svgH-14, esc(c.xLabel))
	fmt.Fprintf(&b, `<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>`+"\n",
		(padTop+svgH-padBot)/2, (padTop+svgH-padBot)/2, esc(c.yLabel))
	// reference lines
	for _, r := range c.refs {
		if r.y < ylo || r.y > yhi {
			continue
		}
		y := ay.pos(r.y)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888" stroke-dasharray="2 4"/>`+"\n", padLeft, y, svgW-padRight, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#555" font-size="11" text-anchor="end">%s</text>`+"\n", svgW-padRight-4, y-4, esc(r.label))
	}
	// series (markers drawn over every line)
	var dots bytes.Buffer
	for i, s := range c.series {
		col := palette[i%len(palette)]
		var pts bytes.Buffer
		for k := range s.x {
			if k >= len(s.y) || (c.logX && s.x[k] <= 0) || (c.logY && s.y[k] <= 0) || math.IsNaN(s.y[k]) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", ax.pos(s.x[k]), ay.pos(s.y[k]))
			if s.markers {
				fmt.Fprintf(&dots, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", ax.pos(s.x[k]), ay.pos(s.y[k]), col)
			}
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, bytes.TrimSpace(pts.Bytes()))
		ly := padTop + 10 + i*20
		lx := svgW - padRight + 14
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+22, ly, col, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+28, ly, esc(s.name))
	}
	b.Write(dots.Bytes())
	b.WriteString("</svg>\n")
	return b.Bytes()
}
