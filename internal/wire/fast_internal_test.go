package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var fastKey = []byte("ringchat-fast-path-key-0123456789")

func fastCodec(t testing.TB) *Codec {
	t.Helper()
	n := uint64(0)
	c, err := NewCodec(fastKey, WithClock(func() time.Time { return time.UnixMilli(1_763_712_000_000) }),
		WithNonceSource(func() uint64 { n += 0x0123456789; return n }))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// signHeader makes a frame around header h as Encode would, for headers
// Encode does not write.
func signHeader(h string) []byte {
	m := hmac.New(sha256.New, fastKey)
	m.Write([]byte(h))
	return []byte(`{"h":` + h + `,"mac":"` + hex.EncodeToString(m.Sum(nil)) + `"}`)
}

// Frames as Encode writes them take the fast path, and read the same as on
// the general one; frames spelled otherwise are left to the general path.
func TestEncodedFramesTakeFastPath(t *testing.T) {
	c := fastCodec(t)
	frames := []Frame{
		{Type: "TOKEN", Src: 3, Epoch: 7, Payload: []byte(`{"token":{"gen":12,"seq":123456,"coord":5,"epoch":7,"quiet":3}}`)},
		{Type: "TOKEN_ACK", Src: 9223372036854775807, Epoch: 0},
		{Type: "SUCCESSOR", Src: 1, Dst: 9223372036854775807, Epoch: 3, Payload: []byte(`{"succ":2}`)},
		{Type: "JOIN", Src: 12, Payload: []byte(`{"addr":"10.0.0.12:7001","x":[1,{"y":"}"}]}`)},
		{Type: "ELECTION", Src: 1, Epoch: 9223372036854775807, Payload: []byte(`[9,3,1]`)},
		{Type: "X!#$%&'()*+,-./:;<=>?@[]^_`{|}~", Src: 1, Payload: []byte(`"\u00e9 \" \\ }"`)},
		{Type: "N", Src: 2, Payload: []byte(`-0.5e3`)},
	}
	for _, f := range frames {
		b, err := c.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := c.fastHeader(b)
		if !ok {
			t.Errorf("%s: not read by the fast path: %s", f.Type, b)
			continue
		}
		general, err := c.generalHeader(b)
		if err != nil {
			t.Fatalf("%s: the general path refuses what the fast path read: %v", f.Type, err)
		}
		if diff := cmp.Diff(general, fast, cmp.AllowUnexported(header{})); diff != "" {
			t.Errorf("%s: paths differ (-general +fast):\n%s", f.Type, diff)
		}
		if diff := cmp.Diff(f, fast.frame); diff != "" {
			t.Errorf("%s: fast path read (-sent +read):\n%s", f.Type, diff)
		}
	}
	for name, b := range map[string][]byte{
		"escaped type":   mustEncode(t, c, Frame{Type: `A"\`, Src: 1}),
		"null payload":   mustEncode(t, c, Frame{Type: "T", Src: 1, Payload: []byte("null")}),
		"reordered":      signHeader(`{"src":1,"t":"T","ep":0,"ts":1763712000000,"n":"0000000000000001"}`),
		"unicode escape": signHeader(`{"t":"\u0054","src":1,"ep":0,"ts":1763712000000,"n":"0000000000000001"}`),
		"spaces":         signHeader(`{"t":"T","src":1,"ep":0,"ts":1763712000000,"n":"0000000000000001","p": 1}`),
		"minus zero":     signHeader(`{"t":"T","src":1,"ep":-0,"ts":1763712000000,"n":"0000000000000001"}`),
		"extra field":    signHeader(`{"t":"T","src":1,"ep":0,"ts":1763712000000,"n":"0000000000000001","zz":1}`),
		"upper-case mac": bytes.ToUpper(mustEncode(t, c, Frame{Type: "t", Src: 1})),
	} {
		if _, ok := c.fastHeader(b); ok {
			t.Errorf("%s: read by the fast path: %s", name, b)
		}
		if _, err := c.generalHeader(b); err != nil && name != "upper-case mac" {
			t.Errorf("%s: refused by the general path: %v", name, err)
		}
	}
}

// Whatever the fast path reads, the general path reads the same. Each
// input is tried as a whole frame and as a header signed under the key (so
// that the fuzzer explores headers past the MAC).
func FuzzFastPathMatchesGeneral(f *testing.F) {
	c := fastCodec(f)
	f.Add(mustEncode(f, c, Frame{Type: "TOKEN", Src: 3, Epoch: 7, Payload: []byte(`{"token":{"gen":1,"seq":2}}`)}))
	f.Add(mustEncode(f, c, Frame{Type: "TOKEN_ACK", Src: 5}))
	f.Add(mustEncode(f, c, Frame{Type: "P", Src: 5, Payload: []byte(`[{"a":"}"},null,true,-1.5e-3]`)}))
	for _, h := range []string{
		`{"t":"T","src":1,"ep":0,"ts":0,"n":"0000000000000001","p":{}}`,
		`{"t":"T","src":01,"ep":0,"ts":0,"n":"0000000000000001"}`,
		`{"t":"T","src":1,"ep":0,"ts":0,"n":"0000000000000001"},"x":{`,
		`{"t":"T","src":1,"ep":0,"ts":0,"n":"0000000000000001","p":[1,"}"]}`,
	} {
		f.Add([]byte(h))
		f.Add(signHeader(h))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, b := range [][]byte{in, signHeader(string(in))} {
			fast, ok := c.fastHeader(b)
			if !ok {
				continue
			}
			general, err := c.generalHeader(b)
			if err != nil {
				t.Fatalf("the fast path read %s, which the general path refuses: %v", b, err)
			}
			if diff := cmp.Diff(general, fast, cmp.AllowUnexported(header{})); diff != "" {
				t.Fatalf("paths differ on %s (-general +fast):\n%s", b, diff)
			}
		}
	})
}

func mustEncode(t testing.TB, c *Codec, f Frame) []byte {
	t.Helper()
	b, err := c.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
