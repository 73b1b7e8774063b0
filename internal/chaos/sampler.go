package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
)

// sample is one reading of a node process.
type sample struct {
	At         time.Time
	RSSKiB     int64
	Threads    int64
	Goroutines int64 // -1 when the node serves no pprof
}

// sampler reads every running node's memory and goroutines now and then.
type sampler struct {
	p     *procs
	every time.Duration
	http  *http.Client

	mu     sync.Mutex
	series map[*procutil.Proc][]sample
}

func newSampler(p *procs, every time.Duration) *sampler {
	return &sampler{p: p, every: every, http: &http.Client{Timeout: 2 * time.Second},
		series: map[*procutil.Proc][]sample{}}
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		for _, in := range s.p.incarnations() {
			if _, exited := in.Exited(); exited || in.Stopped() {
				continue
			}
			smp, ok := s.read(ctx, in)
			if !ok {
				continue
			}
			s.mu.Lock()
			s.series[in] = append(s.series[in], smp)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read samples one process: VmRSS and Threads from /proc, goroutines from
// the node's pprof when it serves one.
func (s *sampler) read(ctx context.Context, in *procutil.Proc) (sample, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", in.Pid))
	if err != nil {
		return sample{}, false
	}
	smp := sample{At: time.Now(), Goroutines: -1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			smp.RSSKiB = n
		case "Threads":
			smp.Threads = n
		case "State":
			if strings.HasPrefix(f[0], "T") || strings.HasPrefix(f[0], "Z") {
				return sample{}, false // stopped or dead: not a fair reading
			}
		}
	}
	if port := s.p.addrs[in.ID].Metrics; port != 0 {
		if g, ok := s.goroutines(ctx, port); ok {
			smp.Goroutines = g
		}
	}
	return smp, smp.RSSKiB > 0
}

// goroutines reads "goroutine profile: total N" from the node's pprof.
func (s *sampler) goroutines(ctx context.Context, port int) (int64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", port), nil)
	if err != nil {
		return 0, false
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	if err != nil && line == "" {
		return 0, false
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// stability is the verdict on one incarnation's series.
type stability struct {
	Node, Run        int64
	Samples          int
	Span             time.Duration
	RSSFirst         float64 // MiB, average of the first quarter after warm-up
	RSSLast          float64 // MiB, average of the last quarter
	RSSMax           float64
	GorFirst         float64 // goroutines (or threads without pprof)
	GorLast          float64
	GorMax           float64
	GoroutinesExact  bool // from pprof; else threads
	Judged           bool // long enough to judge
	OK               bool
	Why              string
	ThreadsFirstLast [2]float64
}

// Stability thresholds: after a warm-up (the first quarter of the
// incarnation's samples, and at least 10 s), the average of the last
// quarter must not exceed the first quarter's by more than these.
const (
	rssGrowthMax      = 1.5  // ×
	rssSlackMiB       = 16.0 // absolute slack for small baselines
	goroutineGrowth   = 1.5  // ×
	goroutineSlackPer = 3    // goroutines per chat client that may move to the node, plus a constant
	goroutineSlack    = 40
	minJudgedSamples  = 8
)

func judge(node, run int64, ss []sample, clients int) stability {
	st := stability{Node: node, Run: run, Samples: len(ss)}
	if len(ss) == 0 {
		st.OK, st.Why = true, "no samples"
		return st
	}
	st.Span = ss[len(ss)-1].At.Sub(ss[0].At)
	// Goroutines from pprof when most samples have them (a scrape can
	// time out on a busy machine: those samples are left out), else
	// threads from /proc.
	exact := 0
	for _, x := range ss {
		if x.Goroutines >= 0 {
			exact++
		}
	}
	st.GoroutinesExact = 2*exact >= len(ss)
	count := func(x sample) float64 { return float64(x.Threads) }
	if st.GoroutinesExact {
		ss = slices.DeleteFunc(slices.Clone(ss), func(x sample) bool { return x.Goroutines < 0 })
		count = func(x sample) float64 { return float64(x.Goroutines) }
	}
	for _, x := range ss {
		st.RSSMax = max(st.RSSMax, float64(x.RSSKiB)/1024)
		st.GorMax = max(st.GorMax, count(x))
	}
	// Warm-up: a quarter of the samples and at least 10 s.
	skip := len(ss) / 4
	for skip < len(ss) && ss[skip].At.Sub(ss[0].At) < 10*time.Second {
		skip++
	}
	rest := ss[skip:]
	if len(rest) < minJudgedSamples {
		st.OK, st.Why = true, fmt.Sprintf("too short to judge (%d samples after warm-up)", len(rest))
		return st
	}
	q := max(1, len(rest)/4)
	avg := func(xs []sample, f func(sample) float64) float64 {
		var sum float64
		for _, x := range xs {
			sum += f(x)
		}
		return sum / float64(len(xs))
	}
	rss := func(x sample) float64 { return float64(x.RSSKiB) / 1024 }
	thr := func(x sample) float64 { return float64(x.Threads) }
	first, last := rest[:q], rest[len(rest)-q:]
	st.Judged = true
	st.RSSFirst, st.RSSLast = avg(first, rss), avg(last, rss)
	st.GorFirst, st.GorLast = avg(first, count), avg(last, count)
	st.ThreadsFirstLast = [2]float64{avg(first, thr), avg(last, thr)}
	var why []string
	if st.RSSLast > rssGrowthMax*st.RSSFirst+rssSlackMiB {
		why = append(why, fmt.Sprintf("RSS grew %.1f -> %.1f MiB", st.RSSFirst, st.RSSLast))
	}
	if st.GorLast > goroutineGrowth*st.GorFirst+float64(goroutineSlackPer*clients+goroutineSlack) {
		why = append(why, fmt.Sprintf("goroutines grew %.0f -> %.0f", st.GorFirst, st.GorLast))
	}
	st.OK, st.Why = len(why) == 0, strings.Join(why, "; ")
	return st
}

func (s *sampler) verdicts(clients int) []stability {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stability
	for in, ss := range s.series {
		out = append(out, judge(in.ID, int64(in.Run), ss, clients))
	}
	slices.SortFunc(out, func(a, b stability) int {
		if a.Node != b.Node {
			return int(a.Node - b.Node)
		}
		return int(a.Run - b.Run)
	})
	return out
}
