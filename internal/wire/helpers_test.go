package wire_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/wire"
)

// testKey is the cluster key of the tests (and of the fuzz seed corpus).
var testKey = []byte("ringchat-test-key-0123456789abcdef")

// t0 is the fixed time of the tests (and of the fuzz seed corpus).
var t0 = time.UnixMilli(1763712000123)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// seqNonces returns a nonce source counting up from first.
func seqNonces(first uint64) func() uint64 {
	var n atomic.Uint64
	n.Store(first - 1)
	return func() uint64 { return n.Add(1) }
}

// fixedNonce returns a nonce source that always returns n.
func fixedNonce(n uint64) func() uint64 { return func() uint64 { return n } }

// newCodec returns a codec under testKey with the given clock and options.
func newCodec(t testing.TB, clock *fakeClock, opts ...wire.Option) *wire.Codec {
	t.Helper()
	opts = append([]wire.Option{wire.WithClock(clock.Now)}, opts...)
	c, err := wire.NewCodec(testKey, opts...)
	if err != nil {
		t.Fatalf("NewCodec: %v", err)
	}
	return c
}

// encode encodes f or fails the test.
func encode(t testing.TB, c *wire.Codec, f wire.Frame) []byte {
	t.Helper()
	b, err := c.Encode(f)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", f, err)
	}
	return b
}

// sign builds a frame around the header text h with a valid MAC under key,
// for frames that Encode would refuse to make.
func sign(key []byte, h string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(h))
	return []byte(`{"h":` + h + `,"mac":"` + hex.EncodeToString(m.Sum(nil)) + `"}`)
}

// checkStats fails the test unless c's counters equal want.
func checkStats(t testing.TB, c *wire.Codec, want wire.Stats) {
	t.Helper()
	if diff := cmp.Diff(want, c.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
}

// token is a small TOKEN-like frame.
func token() wire.Frame {
	return wire.Frame{
		Type:    "TOKEN",
		Src:     3,
		Epoch:   7,
		Payload: []byte(`{"seq":41,"ring":[1,3,5],"msgs":[{"from":"ann","to":"#ops","text":"hi"}]}`),
	}
}
