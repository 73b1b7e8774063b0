package wire_test

// Edges of the codec's limits and of the replay cache, found by mutation
// testing (scripts/mutation.sh internal/wire): each test states what a peer
// or an operator would notice if the limit moved by one.
//
// Mutants left alive, because no input can tell them from the code:
//   - frame.go checkFrame `bytes.IndexByte(p, '\n') >= 0` -> `> 0`: p was
//     trimmed of white space just before, so a newline is never at index 0.
//   - codec.go generalHeader `err != nil || outer == nil` -> `&&`: JSON that
//     fails to unmarshal into a map leaves the map nil, and a nil map
//     without an error ("null") is refused as ErrMalformed on the next line
//     ("h" missing): the same error either way.
//   - frame.go parseHeader `errors.As(err, &te) && te.Field != ""` -> `||`:
//     the header was checked as a JSON object already, so every error left
//     is an *json.UnmarshalTypeError.
//   - fast.go parseCanonicalHeader `p.i >= len(p.b)` -> `>`: when p.i is
//     len(p.b) the byte before it is the ':' of `,"p":`, so the other half
//     of the condition refuses the header anyway.

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/wire"
)

// A frame of exactly the maximum size is encoded and accepted; one byte
// more is refused by both ends.
func TestMaxSizeIsInclusive(t *testing.T) {
	const max = 512
	clock := newClock(t0)
	c := newCodec(t, clock, wire.WithMaxSize(max), wire.WithNonceSource(seqNonces(1)))
	frame := func(n int) wire.Frame {
		return wire.Frame{Type: "MSG", Src: 1, Payload: []byte(`"` + strings.Repeat("x", n) + `"`)}
	}
	n := max - len(encode(t, c, frame(0)))

	b, err := c.Encode(frame(n))
	if err != nil {
		t.Fatalf("Encode of a %d-byte frame with limit %d: %v", max, max, err)
	}
	if len(b) != max {
		t.Fatalf("frame is %d bytes, want %d", len(b), max)
	}
	if _, _, err := c.Decode(b); err != nil {
		t.Errorf("Decode of a frame of exactly the limit: %v", err)
	}

	if _, err := c.Encode(frame(n + 1)); !errors.Is(err, wire.ErrTooLarge) {
		t.Errorf("Encode of limit+1 bytes: %v, want ErrTooLarge", err)
	}
	big := newCodec(t, clock, wire.WithMaxSize(2*max), wire.WithNonceSource(seqNonces(1000)))
	over := encode(t, big, frame(n+1))
	if _, _, err := c.Decode(over); !errors.Is(err, wire.ErrTooLarge) {
		t.Errorf("Decode of limit+1 bytes: %v, want ErrTooLarge", err)
	}
}

// A newline anywhere in a datagram, the first byte included, makes it
// malformed: on TCP it would be two lines.
func TestDecodeRefusesLeadingNewline(t *testing.T) {
	c := newCodec(t, newClock(t0))
	b := encode(t, c, token())
	if _, _, err := c.Decode(append([]byte("\n"), b...)); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("Decode of a frame after a newline: %v, want ErrMalformed", err)
	}
	// The frame itself was not recorded: it is still accepted.
	if _, _, err := c.Decode(b); err != nil {
		t.Errorf("Decode of the frame alone: %v", err)
	}
}

func TestWriteLineRefusesLeadingNewline(t *testing.T) {
	var buf bytes.Buffer
	if err := wire.WriteLine(&buf, []byte("\n{}")); err == nil {
		t.Error("WriteLine of a line starting with a newline: no error")
	}
	if buf.Len() != 0 {
		t.Errorf("WriteLine wrote %q for a refused line", buf.String())
	}
}

// A client line of exactly max bytes ending in "\r\n" is accepted.
func TestReadTextLineMaxWithCRLF(t *testing.T) {
	tooLong := errors.New("too long")
	const max = 8
	for _, size := range []int{16, 4096} { // in fragments, and in one read
		br := bufio.NewReaderSize(strings.NewReader("12345678\r\n123456789\r\n"), size)
		got, err := wire.ReadTextLine(br, max, tooLong)
		if err != nil || string(got) != "12345678" {
			t.Errorf("buffer %d: %q, %v; want the 8-byte line", size, got, err)
		}
		if _, err := wire.ReadTextLine(br, max, tooLong); err != tooLong {
			t.Errorf("buffer %d: 9-byte line: %v, want tooLong", size, err)
		}
	}
}

// A clock at the Unix epoch itself is not "before 1970".
func TestEncodeAtUnixEpoch(t *testing.T) {
	clock := newClock(time.UnixMilli(0))
	c := newCodec(t, clock)
	b, err := c.Encode(token())
	if err != nil {
		t.Fatalf("Encode at 1970-01-01T00:00:00Z: %v", err)
	}
	if _, meta, err := c.Decode(b); err != nil || meta.Time.UnixMilli() != 0 {
		t.Errorf("Decode: %v, %v", meta, err)
	}
	clock.Set(time.UnixMilli(-1))
	if _, err := c.Encode(token()); !errors.Is(err, wire.ErrInvalidFrame) {
		t.Errorf("Encode 1 ms before 1970: %v, want ErrInvalidFrame", err)
	}
}

// Encode allocates the frame once, sized from the frame: even the longest
// type and numbers and a large payload fit without the buffer being
// regrown (which would cost a copy and up to twice the memory per frame).
func TestEncodeSizesItsBuffer(t *testing.T) {
	c := newCodec(t, newClock(t0), wire.WithNonceSource(fixedNonce(math.MaxUint64)))
	long := strings.Repeat("T", wire.MaxTypeLen)
	payload := []byte(`"` + strings.Repeat("p", 1000) + `"`)
	for _, f := range []wire.Frame{
		{Type: "A", Src: 1},
		{Type: long, Src: math.MaxInt64, Dst: math.MaxInt64, Epoch: math.MaxInt64},
		{Type: long, Src: math.MaxInt64, Dst: math.MaxInt64, Epoch: math.MaxInt64, Payload: payload},
		{Type: "A", Src: 1, Payload: payload},
	} {
		b := encode(t, c, f)
		// The estimate allows 20 digits for each of five numbers: at most
		// about 100 bytes too many; a regrown buffer has hundreds spare.
		if spare := cap(b) - len(b); spare > 128 {
			t.Errorf("%d-byte frame (type %d bytes) in a %d-byte buffer: regrown", len(b), len(f.Type), cap(b))
		}
	}
}

// Every refusal counts in Rejected.
func TestStatsRejectedSumsEveryReason(t *testing.T) {
	s := wire.Stats{Encoded: 100, Accepted: 200, TooLarge: 1, Malformed: 2, BadMAC: 4, Stale: 8, Replay: 16, ReplayEvictions: 300}
	if got := s.Rejected(); got != 31 {
		t.Errorf("Rejected() = %d, want 31", got)
	}
}

// An error about a header field names the field, for the operator who reads
// the log.
func TestDecodeErrorNamesTheField(t *testing.T) {
	c := newCodec(t, newClock(t0))
	h := strings.Replace(validHeader, `"src":3`, `"src":"3"`, 1)
	_, _, err := c.Decode(sign(testKey, h))
	if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), `"src"`) {
		t.Errorf("Decode with a string src: %v, want ErrMalformed naming \"src\"", err)
	}
}

// A frame type is quoted whole in an error unless it is longer than the
// 40 bytes an error message shows.
func TestLongTypeQuotedInError(t *testing.T) {
	c := newCodec(t, newClock(t0))
	exact := strings.Repeat("T", 40)
	_, err := c.Encode(wire.Frame{Type: exact, Src: 1})
	if !errors.Is(err, wire.ErrInvalidFrame) || !strings.Contains(err.Error(), `"`+exact+`"`) ||
		strings.Contains(err.Error(), "...") {
		t.Errorf("Encode with a 40-byte type: %v, want the type quoted whole", err)
	}
	_, err = c.Encode(wire.Frame{Type: exact + "U", Src: 1})
	if !errors.Is(err, wire.ErrInvalidFrame) || !strings.Contains(err.Error(), `"`+exact+`"...`) {
		t.Errorf("Encode with a 41-byte type: %v, want the type cut at 40 bytes", err)
	}
}

// Frames whose timestamps differ give replay entries that expire out of
// order. A nonce whose frame can no longer be accepted may be used again
// even while an entry in front of it in the queue is still live.
func TestReplayNonceReusableAfterExpiryBehindLiveEntry(t *testing.T) {
	win := wire.DefaultWindow
	recvClock := newClock(t0)
	receiver := newCodec(t, recvClock)
	sendAt := func(d time.Duration, nonce uint64) []byte {
		c := newCodec(t, newClock(t0.Add(d)), wire.WithNonceSource(fixedNonce(nonce)))
		return encode(t, c, token())
	}
	// A: from a clock a full window ahead: remembered until t0+2*win.
	if _, _, err := receiver.Decode(sendAt(win, 1)); err != nil {
		t.Fatalf("A: %v", err)
	}
	// B: a full window behind: remembered until t0.
	if _, _, err := receiver.Decode(sendAt(-win, 5)); err != nil {
		t.Fatalf("B: %v", err)
	}
	recvClock.Advance(time.Millisecond)
	// C reuses B's nonce once B could no longer be accepted.
	if _, _, err := receiver.Decode(sendAt(time.Millisecond, 5)); err != nil {
		t.Errorf("C, B's nonce after B expired: %v, want accepted", err)
	}
}

// The cache holds cap live nonces: entries that expired and were dropped
// from the front do not count against it.
func TestReplayCapCountsOnlyLiveEntries(t *testing.T) {
	const capacity = 10
	win := wire.DefaultWindow
	recvClock := newClock(t0)
	receiver := newCodec(t, recvClock, wire.WithReplayCap(capacity))
	frames := map[uint64][]byte{}
	send := func(d time.Duration, nonce uint64) {
		t.Helper()
		c := newCodec(t, newClock(t0.Add(d)), wire.WithNonceSource(fixedNonce(nonce)))
		b := encode(t, c, token())
		if _, _, err := receiver.Decode(b); err != nil {
			t.Fatalf("nonce %d: %v", nonce, err)
		}
		frames[nonce] = b
	}
	for n := uint64(1); n <= 3; n++ {
		send(-win, n) // remembered until t0
	}
	for n := uint64(4); n <= capacity; n++ {
		send(0, n) // remembered until t0+win
	}
	recvClock.Advance(time.Millisecond) // nonces 1-3 expire
	for n := uint64(capacity + 1); n <= capacity+3; n++ {
		send(time.Millisecond, n)
	}
	// Ten live nonces, 4 to 13: all still refused as replays.
	for n := uint64(4); n <= capacity+3; n++ {
		if _, _, err := receiver.Decode(frames[n]); !errors.Is(err, wire.ErrReplay) {
			t.Errorf("replay of nonce %d: %v, want ErrReplay", n, err)
		}
	}
	if s := receiver.Stats(); s.ReplayEvictions != 0 {
		t.Errorf("%d evictions with %d live nonces and cap %d", s.ReplayEvictions, capacity, capacity)
	}
}

// An entry dropped from a full cache at the last millisecond of its window
// is counted as an eviction: its frame could still be replayed, and is.
func TestReplayEvictionAtWindowEdgeCounted(t *testing.T) {
	win := wire.DefaultWindow
	receiver := newCodec(t, newClock(t0), wire.WithReplayCap(1))
	sendAt := func(d time.Duration, nonce uint64) []byte {
		c := newCodec(t, newClock(t0.Add(d)), wire.WithNonceSource(fixedNonce(nonce)))
		return encode(t, c, token())
	}
	a := sendAt(-win, 1) // still acceptable at t0, remembered until t0
	if _, _, err := receiver.Decode(a); err != nil {
		t.Fatalf("A: %v", err)
	}
	if _, _, err := receiver.Decode(sendAt(0, 2)); err != nil {
		t.Fatalf("B: %v", err)
	}
	if s := receiver.Stats(); s.ReplayEvictions != 1 {
		t.Errorf("ReplayEvictions = %d, want 1: A was evicted while it could still be replayed", s.ReplayEvictions)
	}
	if _, _, err := receiver.Decode(a); err != nil {
		t.Errorf("replay of the evicted A: %v (the documented cost of a full cache is that it is accepted)", err)
	}
}
