package wire

import (
	"errors"
	"testing"
	"time"
)

type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }

func TestReplayCacheExpires(t *testing.T) {
	clock := &stepClock{time.UnixMilli(1_700_000_000_000)}
	n := uint64(0)
	c, err := NewCodec([]byte("0123456789abcdef"), WithClock(clock.now),
		WithNonceSource(func() uint64 { n++; return n }))
	if err != nil {
		t.Fatal(err)
	}
	// Ten minutes of traffic, 100 frames a second: the cache holds only
	// about one window's worth.
	for i := range 60_000 {
		b, err := c.Encode(Frame{Type: "TOKEN", Src: 1 + int64(i%5)})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Decode(b); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		clock.t = clock.t.Add(10 * time.Millisecond)
	}
	if got, max := c.replay.len(), 3001+100; got > max {
		t.Errorf("cache holds %d nonces, want at most %d", got, max)
	}
	if q := len(c.replay.queue); q > 2*3100+1024 {
		t.Errorf("cache queue is %d long", q)
	}
	if s := c.Stats(); s.ReplayEvictions != 0 {
		t.Errorf("%d evictions, want 0", s.ReplayEvictions)
	}
}

func TestReplayCacheCap(t *testing.T) {
	clock := &stepClock{time.UnixMilli(1_700_000_000_000)}
	n := uint64(0)
	c, err := NewCodec([]byte("0123456789abcdef"), WithClock(clock.now), WithReplayCap(100),
		WithNonceSource(func() uint64 { n++; return n }))
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for i := range 250 {
		b, err := c.Encode(Frame{Type: "TOKEN", Src: 1})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		}
		if _, _, err := c.Decode(b); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got := c.replay.len(); got > 100 {
			t.Fatalf("cache holds %d nonces, cap 100", got)
		}
	}
	if s := c.Stats(); s.ReplayEvictions != 150 {
		t.Errorf("%d evictions, want 150", s.ReplayEvictions)
	}
	// The documented cost of a full cache: an evicted nonce is forgotten
	// early. Once the window has passed the frame is refused anyway.
	clock.t = clock.t.Add(DefaultWindow + time.Millisecond)
	if _, _, err := c.Decode(first); !errors.Is(err, ErrStale) {
		t.Errorf("Decode(first) after the window: %v, want ErrStale", err)
	}
}
