package wire_test

import (
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/wire"
)

// BenchmarkEncodeDecode encodes and decodes a small TOKEN-like frame, with
// the replay cache in its steady state (entries expiring as the clock moves).
func BenchmarkEncodeDecode(b *testing.B) {
	clock := newClock(t0)
	c := newCodec(b, clock, wire.WithNonceSource(seqNonces(1)))
	f := token()
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(time.Millisecond)
		buf, err := c.Encode(f)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeParallel decodes from many goroutines on one codec, as the
// TCP and UDP readers of a node do.
func BenchmarkDecodeParallel(b *testing.B) {
	clock := newClock(t0)
	c := newCodec(b, clock)
	f := token()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf, err := c.Encode(f)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.Decode(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
