package wire

import (
	"errors"
	"strings"
	"testing"
)

// Signed headers cut short or misspelled at each point the fast path reads
// are refused as malformed (as the general path refuses them), never
// accepted and never a panic. A key holder can send any of these.
func TestFastPathRefusesCutAndMisspelledHeaders(t *testing.T) {
	const ts = `1763712000000` // fastCodec's clock
	for _, h := range []string{
		`{"t":`,
		`{"t":"TOKEN`,
		`{"t":"TOKEN","src":12`,
		`{"t":"TOKEN","src":1,"ep":0,"ts":` + ts,
		`{"t":"TOKEN","src":1,"ep":0,"ts":` + ts + `,"n":`,
		`{"t":"TOKEN","src":1,"ep":0,"ts":` + ts + `,"n":"0123456789abcdef`,
		`{"t":"TOKEN","src":1,"ep":0,"ts":` + ts + `,"n":"0123456789abcdef","p":`,
		// No closing brace after the payload.
		`{"t":"TOKEN","src":1,"ep":0,"ts":` + ts + `,"n":"0123456789abcdef","p":12`,
		// A string where a key should be.
		`{"t":"TOKEN","src":1,"ep":0,"ts":` + ts + `"0123456789abcdef"}`,
		`"TOKEN","src":1,"ep":0,"ts":` + ts + `,"n":"0123456789abcdef"}`,
	} {
		c := fastCodec(t)
		b := signHeader(h)
		if _, ok := c.fastHeader(b); ok {
			t.Errorf("fast path read %s", h)
		}
		if _, _, err := c.Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%s): %v, want ErrMalformed", h, err)
		}
	}
}

// Inputs shorter than the shortest frame, or just long enough, shaped like
// a frame at both ends: refused without reading outside them.
func TestShortFramesRefused(t *testing.T) {
	c := fastCodec(t)
	shortest := len(outerPrefix) + 2 + len(outerSuffix)
	for n := len(outerPrefix) + 2; n <= shortest+2; n++ {
		b := []byte(outerPrefix + strings.Repeat("x", n-len(outerPrefix)-2) + `"}`)
		if _, _, err := c.Decode(b); err == nil {
			t.Errorf("Decode(%s) accepted", b)
		}
	}
}

// The shortest frame splitCanonical can split has a two-byte header.
func TestSplitCanonicalShortestFrame(t *testing.T) {
	b := signHeader(`{}`)
	h, mac, ok := splitCanonical(b)
	if !ok || string(h) != `{}` || len(mac) != macHexLen {
		t.Errorf("splitCanonical(%s) = %q, %q, %v", b, h, mac, ok)
	}
	if _, _, ok := splitCanonical(b[1:]); ok {
		t.Errorf("splitCanonical without the opening brace: ok")
	}
}
