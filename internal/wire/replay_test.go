package wire_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/wire"
)

func TestReplayRefused(t *testing.T) {
	clock := newClock(t0)
	c := newCodec(t, clock)
	b := encode(t, c, token())
	if _, _, err := c.Decode(b); err != nil {
		t.Fatalf("first Decode: %v", err)
	}
	clock.Advance(wire.DefaultWindow) // still inside the window
	if _, _, err := c.Decode(b); !errors.Is(err, wire.ErrReplay) {
		t.Fatalf("second Decode: %v, want ErrReplay", err)
	}
	checkStats(t, c, wire.Stats{Encoded: 1, Accepted: 1, Replay: 1})
}

func TestReplayAfterWindowIsStale(t *testing.T) {
	clock := newClock(t0)
	c := newCodec(t, clock)
	b := encode(t, c, token())
	if _, _, err := c.Decode(b); err != nil {
		t.Fatalf("first Decode: %v", err)
	}
	clock.Advance(wire.DefaultWindow + time.Millisecond)
	if _, _, err := c.Decode(b); !errors.Is(err, wire.ErrStale) {
		t.Fatalf("Decode after the window: %v, want ErrStale", err)
	}
	checkStats(t, c, wire.Stats{Encoded: 1, Accepted: 1, Stale: 1})
}

// Nonces are per sender: two senders may draw the same one.
func TestSameNonceFromTwoSenders(t *testing.T) {
	clock := newClock(t0)
	c := newCodec(t, clock, wire.WithNonceSource(fixedNonce(77)))
	for src := int64(1); src <= 2; src++ {
		if _, _, err := c.Decode(encode(t, c, wire.Frame{Type: "TOKEN", Src: src})); err != nil {
			t.Errorf("src %d: %v", src, err)
		}
	}
	if _, _, err := c.Decode(encode(t, c, wire.Frame{Type: "OTHER", Src: 2})); !errors.Is(err, wire.ErrReplay) {
		t.Errorf("same src and nonce, different frame: %v, want ErrReplay", err)
	}
}

// A frame with a bad MAC carrying the src and nonce of a later legitimate
// frame must not get that frame refused.
func TestForgedFramesDoNotPoisonReplayCache(t *testing.T) {
	clock := newClock(t0)
	const nonce = 0x1234567890abcdef
	legit := newCodec(t, clock, wire.WithNonceSource(fixedNonce(nonce)))
	forger, err := wire.NewCodec([]byte("the forger does not know the key"),
		wire.WithClock(clock.Now), wire.WithNonceSource(fixedNonce(nonce)))
	if err != nil {
		t.Fatal(err)
	}
	receiver := newCodec(t, clock)

	f := token()
	forged := encode(t, forger, f)
	real := encode(t, legit, f)
	// The same frame under the legitimate MAC but with a header changed.
	tampered := sign([]byte("not the key either, but long enough"), string(real[len(`{"h":`):len(real)-len(`,"mac":"`)-64-2]))

	for _, b := range [][]byte{forged, tampered, forged} {
		if _, _, err := receiver.Decode(b); !errors.Is(err, wire.ErrBadMAC) {
			t.Fatalf("Decode(forged %s): %v, want ErrBadMAC", b, err)
		}
	}
	got, meta, err := receiver.Decode(real)
	if err != nil {
		t.Fatalf("legitimate frame refused after forgeries: %v", err)
	}
	if meta.Nonce != nonce || got.Src != f.Src {
		t.Errorf("Decode = %+v, %+v", got, meta)
	}
	checkStats(t, receiver, wire.Stats{BadMAC: 3, Accepted: 1})
}

// Frames refused for other reasons do not record their nonce either.
func TestRefusedFramesDoNotRecordNonce(t *testing.T) {
	clock := newClock(t0)
	sender := newCodec(t, clock, wire.WithNonceSource(fixedNonce(5)))
	receiver := newCodec(t, clock)
	early := encode(t, sender, token())
	clock.Advance(wire.DefaultWindow + time.Second) // early is now stale...
	if _, _, err := receiver.Decode(early); !errors.Is(err, wire.ErrStale) {
		t.Fatalf("Decode(early): %v, want ErrStale", err)
	}
	// ...and a fresh frame that happens to reuse its nonce is accepted.
	if _, _, err := receiver.Decode(encode(t, sender, token())); err != nil {
		t.Fatalf("Decode(fresh): %v", err)
	}
}

func TestConcurrentDecode(t *testing.T) {
	clock := newClock(t0)
	const senders, perSender = 16, 200
	codecs := make([]*wire.Codec, senders)
	frames := make([][][]byte, senders)
	for s := range senders {
		codecs[s] = newCodec(t, clock)
	}
	// Encoding concurrently on one codec per sender, and on a shared one.
	shared := newCodec(t, clock)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				f := wire.Frame{Type: "MSG", Src: int64(s + 1), Epoch: int64(i),
					Payload: fmt.Appendf(nil, `{"i":%d}`, i)}
				c := codecs[s]
				if i%2 == 0 {
					c = shared
				}
				b, err := c.Encode(f)
				if err != nil {
					t.Errorf("Encode: %v", err)
					return
				}
				frames[s] = append(frames[s], b)
			}
		})
	}
	wg.Wait()

	receiver := newCodec(t, clock)
	// Every frame is decoded by two goroutines at once: exactly one wins.
	var mu sync.Mutex
	accepted := map[string]int{}
	for s := range senders {
		for range 2 {
			wg.Go(func() {
				for i, b := range frames[s] {
					f, _, err := receiver.Decode(b)
					if err != nil {
						if !errors.Is(err, wire.ErrReplay) {
							t.Errorf("Decode: %v", err)
						}
						continue
					}
					if f.Src != int64(s+1) || f.Epoch != int64(i) {
						t.Errorf("Decode = %+v, want src %d epoch %d", f, s+1, i)
					}
					mu.Lock()
					accepted[string(b)]++
					mu.Unlock()
				}
			})
		}
		wg.Go(func() { _ = receiver.Stats() })
	}
	wg.Wait()

	n := senders * perSender
	if len(accepted) != n {
		t.Errorf("%d distinct frames accepted, want %d", len(accepted), n)
	}
	for b, k := range accepted {
		if k != 1 {
			t.Errorf("frame accepted %d times: %s", k, b)
		}
	}
	checkStats(t, receiver, wire.Stats{Accepted: uint64(n), Replay: uint64(n)})
}
