package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"
)

// Defaults of a Codec's settings.
const (
	// DefaultWindow is the default accepted clock skew and replay window.
	DefaultWindow = 30 * time.Second
	// DefaultMaxSize is the default largest frame, in bytes.
	DefaultMaxSize = 64 << 10
	// DefaultReplayCap is the default number of nonces the replay cache holds.
	DefaultReplayCap = 100_000
	// MinKeyLen is the shortest cluster key accepted, in bytes.
	MinKeyLen = 16
	// minMaxSize is the smallest maximum frame size an Option may set: a
	// frame with an empty payload is about 200 bytes.
	minMaxSize = 256
)

// macHexLen is the length of the "mac" field: hex of a SHA-256 sum.
const macHexLen = 2 * sha256.Size

// Codec encodes and decodes frames under one cluster key. It is safe for
// concurrent use; share one between the TCP and UDP readers of a node so
// that they share the replay cache.
type Codec struct {
	macs      sync.Pool // of hash.Hash: HMAC-SHA256 under the key
	now       func() time.Time
	nonce     func() uint64
	window    time.Duration
	maxSize   int
	replayCap int
	replay    *replayCache
	stats     counters
}

// Option changes a setting of a Codec.
type Option func(*Codec)

// WithClock sets the clock that stamps encoded frames and against which
// received timestamps are checked. The default is time.Now.
func WithClock(now func() time.Time) Option { return func(c *Codec) { c.now = now } }

// WithWindow sets the accepted clock skew, which is also the replay window:
// a frame whose timestamp is further than d from the receiver's clock, in
// either direction, is refused, and nonces are remembered for as long as
// their frame could be accepted. The default is DefaultWindow.
func WithWindow(d time.Duration) Option { return func(c *Codec) { c.window = d } }

// WithMaxSize sets the largest frame, in bytes, that Encode produces and
// Decode accepts. The default is DefaultMaxSize.
func WithMaxSize(n int) Option { return func(c *Codec) { c.maxSize = n } }

// WithReplayCap sets how many nonces the replay cache holds at most; when it
// is full the oldest is dropped. The default is DefaultReplayCap.
func WithReplayCap(n int) Option { return func(c *Codec) { c.replayCap = n } }

// WithNonceSource sets the source of frame nonces, for tests. The default
// reads crypto/rand. Nonces must not repeat within the window.
func WithNonceSource(next func() uint64) Option { return func(c *Codec) { c.nonce = next } }

// NewCodec returns a Codec for the cluster key, which must be at least
// MinKeyLen bytes. The key is copied.
func NewCodec(key []byte, opts ...Option) (*Codec, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("%w: %d bytes, need at least %d", ErrShortKey, len(key), MinKeyLen)
	}
	k := bytes.Clone(key)
	c := &Codec{
		now:       time.Now,
		nonce:     randomNonce,
		window:    DefaultWindow,
		maxSize:   DefaultMaxSize,
		replayCap: DefaultReplayCap,
	}
	c.macs.New = func() any { return hmac.New(sha256.New, k) }
	for _, o := range opts {
		o(c)
	}
	switch {
	case c.now == nil || c.nonce == nil:
		return nil, errors.New("wire: nil clock or nonce source")
	case c.window < time.Millisecond:
		return nil, fmt.Errorf("wire: window %v: want at least 1ms", c.window)
	case c.maxSize < minMaxSize:
		return nil, fmt.Errorf("wire: max frame size %d: want at least %d", c.maxSize, minMaxSize)
	case c.replayCap < 1:
		return nil, fmt.Errorf("wire: replay cache capacity %d: want at least 1", c.replayCap)
	}
	c.replay = newReplayCache(c.replayCap)
	return c, nil
}

// MaxSize returns the largest frame the Codec accepts, in bytes: the limit
// to give NewLineReader.
func (c *Codec) MaxSize() int { return c.maxSize }

func randomNonce() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read crashes the program instead)
	return binary.BigEndian.Uint64(b[:])
}

// sum appends the MAC of h to b.
func (c *Codec) sum(b, h []byte) []byte {
	m := c.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(h)
	b = m.Sum(b)
	c.macs.Put(m)
	return b
}

// Encode validates f, stamps it with the clock and a fresh nonce, and
// returns the signed frame, without a trailing newline. Errors wrap
// ErrInvalidFrame, or ErrTooLarge if the frame would exceed the maximum size.
func (c *Codec) Encode(f Frame) ([]byte, error) {
	p, err := checkFrame(f)
	if err != nil {
		return nil, err
	}
	ts := c.now().UnixMilli()
	if ts < 0 {
		return nil, fmt.Errorf("%w: clock %d ms is before 1970", ErrInvalidFrame, ts)
	}
	size := len(`{"h":,"mac":""}`) + len(f.Type) + 5*20 + 46 + len(p) + macHexLen
	b := make([]byte, 0, size)
	b = append(b, `{"h":`...)
	b = appendHeader(b, f.Type, f.Src, f.Dst, f.Epoch, ts, c.nonce(), p)
	var sum [sha256.Size]byte
	mac := c.sum(sum[:0], b[len(`{"h":`):])
	b = append(b, `,"mac":"`...)
	b = hex.AppendEncode(b, mac)
	b = append(b, `"}`...)
	if len(b) > c.maxSize {
		return nil, fmt.Errorf("%w: %d bytes encoded, limit %d", ErrTooLarge, len(b), c.maxSize)
	}
	c.stats.encoded.Add(1)
	return b, nil
}

// Decode checks one received frame (a TCP line without its newline, or a
// UDP datagram) and returns its content and metadata. On error the frame
// must be dropped; the error wraps ErrTooLarge, ErrMalformed, ErrBadMAC,
// ErrStale or ErrReplay, and the matching counter of Stats is incremented.
// The returned Frame does not alias b.
func (c *Codec) Decode(b []byte) (Frame, Meta, error) {
	f, m, err := c.decode(b)
	c.stats.count(err)
	return f, m, err
}

func (c *Codec) decode(b []byte) (Frame, Meta, error) {
	if len(b) > c.maxSize {
		return Frame{}, Meta{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), c.maxSize)
	}
	if bytes.IndexByte(b, '\n') >= 0 {
		return Frame{}, Meta{}, fmt.Errorf("%w: contains a newline", ErrMalformed)
	}
	hd, ok := c.fastHeader(b)
	if !ok {
		var err error
		if hd, err = c.generalHeader(b); err != nil {
			return Frame{}, Meta{}, err
		}
	}
	now := max(c.now().UnixMilli(), 0)
	win := c.window.Milliseconds()
	if d := now - hd.ts; d > win || -d > win { // no overflow: now and ts are both >= 0
		return Frame{}, Meta{}, fmt.Errorf("%w: ts is %d ms from the local clock, window %d ms", ErrStale, d, win)
	}
	if !c.replay.add(replayKey{hd.frame.Src, hd.nonce}, hd.ts+win, now, &c.stats) {
		return Frame{}, Meta{}, fmt.Errorf("%w: src %d nonce %016x", ErrReplay, hd.frame.Src, hd.nonce)
	}
	return hd.frame, Meta{Time: time.UnixMilli(hd.ts), Nonce: hd.nonce}, nil
}

// fastHeader authenticates and reads a frame spelled exactly as Encode
// spells it (see fast.go); false sends the frame to generalHeader.
func (c *Codec) fastHeader(b []byte) (header, bool) {
	h, mac, ok := splitCanonical(b)
	if !ok || !validMACHex(mac) {
		return header{}, false
	}
	var got, sum [sha256.Size]byte
	if _, err := hex.Decode(got[:], mac); err != nil || !hmac.Equal(got[:], c.sum(sum[:0], h)) {
		return header{}, false
	}
	var r rawHeader
	if !parseCanonicalHeader(h, &r) {
		return header{}, false
	}
	hd, err := checkHeader(r)
	return hd, err == nil
}

// generalHeader authenticates and reads a frame of any spelling: a JSON
// object whose "h" is the header object and whose "mac" its MAC.
func (c *Codec) generalHeader(b []byte) (header, error) {
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(b, &outer); err != nil || outer == nil {
		return header{}, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	h := outer["h"]
	if len(h) == 0 || h[0] != '{' {
		return header{}, fmt.Errorf("%w: \"h\" missing or not an object", ErrMalformed)
	}
	var got [sha256.Size]byte
	if !decodeMAC(got[:], outer["mac"]) {
		return header{}, fmt.Errorf("%w: \"mac\" missing or not a string of %d lowercase hex digits", ErrMalformed, macHexLen)
	}
	var sum [sha256.Size]byte
	if !hmac.Equal(got[:], c.sum(sum[:0], h)) {
		return header{}, fmt.Errorf("%w: does not match the header", ErrBadMAC)
	}
	// Authenticated: only now look inside the header.
	return parseHeader(h)
}

// validMACHex reports whether s is exactly macHexLen lowercase hex digits.
func validMACHex(s []byte) bool {
	if len(s) != macHexLen {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeMAC decodes the JSON string raw, which must be exactly macHexLen
// lowercase hex digits between quotes (no escapes: one spelling only), into
// dst.
func decodeMAC(dst []byte, raw json.RawMessage) bool {
	if len(raw) != macHexLen+2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	s := raw[1 : len(raw)-1]
	if !validMACHex(s) {
		return false
	}
	_, err := hex.Decode(dst, s)
	return err == nil
}
