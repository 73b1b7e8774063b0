package wire_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/wire"
)

// statsFor returns the Stats of a codec that refused one frame with err.
func statsFor(err error) wire.Stats {
	switch err {
	case wire.ErrTooLarge:
		return wire.Stats{TooLarge: 1}
	case wire.ErrMalformed:
		return wire.Stats{Malformed: 1}
	case wire.ErrBadMAC:
		return wire.Stats{BadMAC: 1}
	case wire.ErrStale:
		return wire.Stats{Stale: 1}
	case wire.ErrReplay:
		return wire.Stats{Replay: 1}
	}
	return wire.Stats{Accepted: 1}
}

// validHeader is a header with every field right, to be varied.
const validHeader = `{"t":"TOKEN","src":3,"ep":7,"ts":1763712000123,"n":"00000000000000aa","p":{"seq":1}}`

func TestDecodeRejects(t *testing.T) {
	clock := newClock(t0)
	sender := newCodec(t, clock, wire.WithNonceSource(fixedNonce(0xaa)))
	good := encode(t, sender, token())
	goodHeader := string(good[len(`{"h":`):strings.Index(string(good), `,"mac":`)])
	goodMAC := string(good[len(good)-2-64 : len(good)-2])

	flipH := []byte(string(good))
	flipH[strings.Index(string(good), `"src":3`)+len(`"src":`)] ^= 1 // 3 -> 2
	macBytes, _ := hex.DecodeString(goodMAC)
	macBytes[5] ^= 0x10
	flipMAC := strings.Replace(string(good), goodMAC, hex.EncodeToString(macBytes), 1)

	otherKey, _ := wire.NewCodec([]byte("some-other-cluster-key-entirely"), wire.WithClock(clock.Now))
	wrongKey := encode(t, otherKey, token())

	bigSender := newCodec(t, clock, wire.WithMaxSize(1<<20))
	oversize := encode(t, bigSender, wire.Frame{Type: "MSG", Src: 1, Payload: []byte(`"` + strings.Repeat("x", wire.DefaultMaxSize) + `"`)})

	window := wire.DefaultWindow
	at := func(d time.Duration) []byte {
		c := newCodec(t, newClock(t0.Add(d)))
		return encode(t, c, token())
	}
	// hdr returns validHeader with old replaced by new, signed.
	hdr := func(old, new string) []byte {
		if !strings.Contains(validHeader, old) {
			t.Fatalf("%q not in validHeader", old)
		}
		return sign(testKey, strings.Replace(validHeader, old, new, 1))
	}

	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"flipped bit in h", flipH, wire.ErrBadMAC},
		{"flipped bit in mac", []byte(flipMAC), wire.ErrBadMAC},
		{"wrong key", wrongKey, wire.ErrBadMAC},
		{"h re-spaced", []byte(strings.Replace(string(good), `"src":3`, `"src": 3`, 1)), wire.ErrBadMAC},
		{"h from another frame", []byte(strings.Replace(string(good), goodHeader, validHeader, 1)), wire.ErrBadMAC},

		{"empty", nil, wire.ErrMalformed},
		{"truncated by one", good[:len(good)-1], wire.ErrMalformed},
		{"truncated by half", good[:len(good)/2], wire.ErrMalformed},
		{"truncated to one byte", good[:1], wire.ErrMalformed},
		{"not JSON", []byte("HELLO ring"), wire.ErrMalformed},
		{"binary", []byte{0, 0xff, 0xfe, '{'}, wire.ErrMalformed},
		{"JSON null", []byte("null"), wire.ErrMalformed},
		{"JSON array", []byte(`[` + string(good) + `]`), wire.ErrMalformed},
		{"JSON string", []byte(`"hi"`), wire.ErrMalformed},
		{"trailing garbage", append([]byte(string(good)), 'x'), wire.ErrMalformed},
		{"trailing object", append([]byte(string(good)), "{}"...), wire.ErrMalformed},
		{"two frames", append([]byte(string(good)), good...), wire.ErrMalformed},
		{"newline inside", []byte(strings.Replace(string(good), `,"mac"`, "\n,\"mac\"", 1)), wire.ErrMalformed},
		{"trailing newline", append([]byte(string(good)), '\n'), wire.ErrMalformed},
		{"newline in header", sign(testKey, strings.Replace(validHeader, `{"seq":1}`, "{\n\"seq\":1}", 1)), wire.ErrMalformed},

		{"missing mac", []byte(`{"h":` + goodHeader + `}`), wire.ErrMalformed},
		{"mac null", []byte(`{"h":` + goodHeader + `,"mac":null}`), wire.ErrMalformed},
		{"mac number", []byte(`{"h":` + goodHeader + `,"mac":12}`), wire.ErrMalformed},
		{"mac short", []byte(strings.Replace(string(good), goodMAC, goodMAC[:62], 1)), wire.ErrMalformed},
		{"mac long", []byte(strings.Replace(string(good), goodMAC, goodMAC+"00", 1)), wire.ErrMalformed},
		{"mac not hex", []byte(strings.Replace(string(good), goodMAC, "zz"+goodMAC[2:], 1)), wire.ErrMalformed},
		{"mac escaped", []byte(strings.Replace(string(good), `"mac":"`+goodMAC[:1], `"mac":"\u00`+hexOf(goodMAC[0]), 1)), wire.ErrMalformed},
		{"mac uppercase", []byte(strings.Replace(string(good), goodMAC, strings.ToUpper(goodMAC), 1)), wire.ErrMalformed},
		{"key MAC uppercase", []byte(strings.Replace(string(good), `"mac"`, `"MAC"`, 1)), wire.ErrMalformed},
		{"missing h", []byte(`{"mac":"` + goodMAC + `"}`), wire.ErrMalformed},
		{"key H uppercase", []byte(strings.Replace(string(good), `"h"`, `"H"`, 1)), wire.ErrMalformed},
		{"h null", sign(testKey, "null"), wire.ErrMalformed},
		{"h string", sign(testKey, `"TOKEN"`), wire.ErrMalformed},
		{"h array", sign(testKey, `[1,2]`), wire.ErrMalformed},

		{"type missing", hdr(`"t":"TOKEN",`, ``), wire.ErrMalformed},
		{"type null", hdr(`"TOKEN"`, `null`), wire.ErrMalformed},
		{"type number", hdr(`"TOKEN"`, `7`), wire.ErrMalformed},
		{"type empty", hdr(`"TOKEN"`, `""`), wire.ErrMalformed},
		{"type with space", hdr(`"TOKEN"`, `"TOKEN ACK"`), wire.ErrMalformed},
		{"type control char", hdr(`"TOKEN"`, `"TOK\u0000EN"`), wire.ErrMalformed},
		{"type too long", hdr(`"TOKEN"`, `"`+strings.Repeat("T", 33)+`"`), wire.ErrMalformed},
		{"type key duplicated", hdr(`"t":"TOKEN",`, `"t":"TOKEN","T":""`), wire.ErrMalformed},
		{"src missing", hdr(`"src":3,`, ``), wire.ErrMalformed},
		{"src null", hdr(`"src":3`, `"src":null`), wire.ErrMalformed},
		{"src string", hdr(`"src":3`, `"src":"3"`), wire.ErrMalformed},
		{"src float", hdr(`"src":3`, `"src":3.5`), wire.ErrMalformed},
		{"src exponent", hdr(`"src":3`, `"src":3e0`), wire.ErrMalformed},
		{"src zero", hdr(`"src":3`, `"src":0`), wire.ErrMalformed},
		{"src negative", hdr(`"src":3`, `"src":-3`), wire.ErrMalformed},
		{"src overflow", hdr(`"src":3`, `"src":9223372036854775808`), wire.ErrMalformed},
		{"src object", hdr(`"src":3`, `"src":{}`), wire.ErrMalformed},
		{"ep missing", hdr(`"ep":7,`, ``), wire.ErrMalformed},
		{"ep null", hdr(`"ep":7`, `"ep":null`), wire.ErrMalformed},
		{"ep negative", hdr(`"ep":7`, `"ep":-1`), wire.ErrMalformed},
		{"ep bool", hdr(`"ep":7`, `"ep":true`), wire.ErrMalformed},
		{"ts missing", hdr(`"ts":1763712000123,`, ``), wire.ErrMalformed},
		{"ts string", hdr(`"ts":1763712000123`, `"ts":"1763712000123"`), wire.ErrMalformed},
		{"ts float", hdr(`"ts":1763712000123`, `"ts":1763712000.123`), wire.ErrMalformed},
		{"ts negative", hdr(`"ts":1763712000123`, `"ts":-9223372036854775808`), wire.ErrMalformed},
		{"nonce missing", hdr(`,"n":"00000000000000aa"`, ``), wire.ErrMalformed},
		{"nonce number", hdr(`"00000000000000aa"`, `170`), wire.ErrMalformed},
		{"nonce short", hdr(`"00000000000000aa"`, `"aa"`), wire.ErrMalformed},
		{"nonce long", hdr(`"00000000000000aa"`, `"0000000000000000aa"`), wire.ErrMalformed},
		{"nonce uppercase", hdr(`"00000000000000aa"`, `"00000000000000AA"`), wire.ErrMalformed},
		{"nonce not hex", hdr(`"00000000000000aa"`, `"00000000000000ag"`), wire.ErrMalformed},

		{"ts too old", at(-window - time.Millisecond), wire.ErrStale},
		{"ts far too old", at(-24 * time.Hour), wire.ErrStale},
		{"ts zero", hdr(`"ts":1763712000123`, `"ts":0`), wire.ErrStale},
		{"ts too far ahead", at(window + time.Millisecond), wire.ErrStale},
		{"ts max", hdr(`"ts":1763712000123`, `"ts":9223372036854775807`), wire.ErrStale},

		{"oversize", oversize, wire.ErrTooLarge},
		{"oversize garbage", []byte(strings.Repeat("{", wire.DefaultMaxSize+1)), wire.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCodec(t, clock)
			f, _, err := c.Decode(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode(%.200q) = %+v, %v; want %v", tc.in, f, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Errorf("error %q lacks the \"wire: \" prefix", err)
			}
			checkStats(t, c, statsFor(tc.want))
			if c.Stats().Rejected() != 1 {
				t.Errorf("Rejected() = %d, want 1", c.Stats().Rejected())
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	clock := newClock(t0)
	sender := newCodec(t, clock, wire.WithNonceSource(fixedNonce(0xaa)))
	good := string(encode(t, sender, token()))
	goodHeader := good[len(`{"h":`):strings.Index(good, `,"mac":`)]
	goodMAC := good[len(good)-2-64 : len(good)-2]
	window := wire.DefaultWindow
	at := func(d time.Duration) []byte {
		return encode(t, newCodec(t, newClock(t0.Add(d))), token())
	}
	hdr := func(old, new string) []byte { return sign(testKey, strings.Replace(validHeader, old, new, 1)) }

	for name, in := range map[string][]byte{
		"as encoded":             []byte(good),
		"extra top-level fields": []byte(`{"v":1,"h":` + goodHeader + `,"mac":"` + goodMAC + `","x":{"y":[null]}}`),
		"mac before h":           []byte(`{"mac":"` + goodMAC + `","h":` + goodHeader + `}`),
		"white space around":     []byte(" \t\r" + strings.Replace(good, `,"mac":`, ` , "mac" : `, 1) + " \r"),
		"ts window old":          at(-window),
		"ts window ahead":        at(window),
		"extra header fields":    hdr(`"ep":7`, `"ep":7,"future":{"a":[1]}`),
		"header re-ordered":      sign(testKey, `{"p":{"seq":1},"n":"00000000000000aa","ts":1763712000123,"ep":7,"src":3,"t":"TOKEN"}`),
		"header spaced":          sign(testKey, strings.ReplaceAll(validHeader, `,`, ` , `)),
		"type escaped":           hdr(`"TOKEN"`, `"\u0054OKEN"`),
		"negative zero epoch":    hdr(`"ep":7`, `"ep":-0`),
	} {
		t.Run(name, func(t *testing.T) {
			c := newCodec(t, clock)
			f, meta, err := c.Decode(in)
			if err != nil {
				t.Fatalf("Decode(%s): %v", in, err)
			}
			if f.Type != "TOKEN" || f.Src != 3 || meta.Nonce == 0 {
				t.Errorf("Decode = %+v, %+v", f, meta)
			}
			checkStats(t, c, wire.Stats{Accepted: 1})
		})
	}
}

// TestNoBitFlipIsAccepted flips every bit of a frame in turn: no result may
// be accepted, not even one that spells the same frame another way.
func TestNoBitFlipIsAccepted(t *testing.T) {
	clock := newClock(t0)
	good := encode(t, newCodec(t, clock), token())
	for i := range len(good) * 8 {
		b := []byte(string(good))
		b[i/8] ^= 1 << (i % 8)
		c := newCodec(t, clock)
		if f, _, err := c.Decode(b); err == nil {
			t.Errorf("flipping bit %d of byte %d (%q) gave an accepted frame %+v", i%8, i/8, good[i/8], f)
		}
		if s := c.Stats(); s.Rejected() != 1 || s.Accepted != 0 {
			t.Errorf("bit %d: stats %+v", i, s)
		}
	}
}

// hexOf returns the two hex digits of c, for \u00XX escapes.
func hexOf(c byte) string { return hex.EncodeToString([]byte{c}) }
