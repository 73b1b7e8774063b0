package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// samples are Prometheus text-format samples summed over the nodes: the
// key is the metric name and its labels other than "node", sorted
// (name{a="x",b="y"}).
type samples map[string]float64

// scrapeAll reads /metrics of every address and sums the samples.
func scrapeAll(ctx context.Context, addrs []string) (samples, error) {
	out := samples{}
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, a := range addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		err = parseMetrics(resp.Body, out)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
	}
	return out, nil
}

// parseMetrics adds the samples of one text-format exposition to into.
func parseMetrics(r io.Reader, into samples) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest, err := splitSample(line)
		if err != nil {
			return err
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return fmt.Errorf("value in %q: %w", line, err)
		}
		delete(labels, "node")
		into[sampleKey(name, labels)] += v
	}
	return sc.Err()
}

// splitSample splits `name{l="v",...} value` into its parts.
func splitSample(line string) (string, map[string]string, string, error) {
	labels := map[string]string{}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", nil, "", fmt.Errorf("bad sample %q", line)
	}
	name := line[:i]
	if line[i] == ' ' {
		return name, labels, line[i:], nil
	}
	s := line[i+1:]
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return name, labels, s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq < 0 {
			return "", nil, "", fmt.Errorf("bad labels in %q", line)
		}
		key := s[:eq]
		s = s[eq+2:]
		var val strings.Builder
		k := 0
		for ; k < len(s) && s[k] != '"'; k++ {
			if s[k] == '\\' && k+1 < len(s) {
				k++
				switch s[k] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[k])
				}
				continue
			}
			val.WriteByte(s[k])
		}
		if k >= len(s) {
			return "", nil, "", fmt.Errorf("unterminated label in %q", line)
		}
		labels[key] = val.String()
		s = s[k+1:]
	}
}

func sampleKey(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// minus returns s - before, key by key (a phase's share of counters that
// only grow).
func (s samples) minus(before samples) samples {
	out := samples{}
	for k, v := range s {
		out[k] = v - before[k]
	}
	return out
}

type bucket struct {
	le    float64 // upper bound (+Inf for the last)
	count float64 // cumulative
}

// histogram returns the cumulative buckets of a histogram, by bound.
func (s samples) histogram(name string) []bucket {
	prefix := name + `_bucket{le="`
	var out []bucket
	for k, v := range s {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(k[len(prefix):], `"}`), 64)
		if err != nil {
			continue
		}
		out = append(out, bucket{le, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// quantile estimates the q-quantile of a cumulative histogram as
// Prometheus's histogram_quantile does: linear within the bucket (from 0
// for the first); in the +Inf bucket, the highest finite bound. NaN when
// the histogram is empty.
func quantile(bs []bucket, q float64) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	rank := q * total
	lower, prev := 0.0, 0.0
	for i, b := range bs {
		if b.count >= rank && b.count > prev {
			if math.IsInf(b.le, 1) {
				if i > 0 {
					return bs[i-1].le
				}
				return math.NaN()
			}
			return lower + (b.le-lower)*(rank-prev)/(b.count-prev)
		}
		lower, prev = b.le, b.count
	}
	return lower
}

// histCount is the number of observations of a histogram.
func histCount(bs []bucket) float64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].count
}
