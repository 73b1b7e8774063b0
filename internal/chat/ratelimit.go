package chat

// runs on: one connection's reader goroutine, which owns its bucket.

import "time"

// bucket is a token bucket: rate tokens a second up to burst. Each line a
// client sends takes one token. Not safe for concurrent use: each
// connection's reader owns its own.
type bucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64, burst int, now time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// allow takes a token if there is one.
func (b *bucket) allow(now time.Time) bool {
	if b.rate <= 0 {
		return true // unlimited
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
