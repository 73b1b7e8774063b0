package wire_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/wire"
)

var genCorpus = flag.Bool("wire.gencorpus", false, "rewrite the FuzzDecode seed corpus in testdata/fuzz/FuzzDecode")

// corpusSeeds returns the FuzzDecode seeds: frames valid under testKey at
// t0, and garbage.
func corpusSeeds(t testing.TB) map[string][]byte {
	clock := newClock(t0)
	c := newCodec(t, clock, wire.WithNonceSource(seqNonces(0x5eed0000)))
	tok := encode(t, c, token())
	seeds := map[string][]byte{
		"valid_token":     tok,
		"valid_ack":       encode(t, c, wire.Frame{Type: "TOKEN_ACK", Src: 5, Epoch: 7}),
		"valid_join":      encode(t, c, wire.Frame{Type: "JOIN", Src: 12, Payload: []byte(`{"addr":"10.0.0.12:7001"}`)}),
		"valid_election":  encode(t, c, wire.Frame{Type: "ELECTION", Src: 9223372036854775807, Epoch: 9223372036854775807, Payload: []byte(`[9,3,1]`)}),
		"valid_odd_types": encode(t, c, wire.Frame{Type: `A"\<&>~!`, Src: 1, Payload: []byte(`"\u00e9\ud83d\ude00<>"`)}),
		"valid_extra":     []byte(`{"v":2,` + string(tok[1:len(tok)-1]) + `,"x":[{}]}`),
		"valid_signed":    sign(testKey, `{"p":null,"n":"00000000000000ff","ts":1763712000123,"ep":-0,"src":1,"t":"\u0054OKEN","zz":1}`),
		"stale":           sign(testKey, `{"t":"TOKEN","src":1,"ep":0,"ts":0,"n":"0000000000000001"}`),
		"bad_mac":         bytes.Replace(tok, []byte(`"src":3`), []byte(`"src":4`), 1),
		"bad_header":      sign(testKey, `{"t":7,"src":"3","ep":1.5,"ts":null,"n":"XYZ"}`),
		"truncated":       tok[:len(tok)/2],
		"trailing":        append(bytes.Clone(tok), " x"...),
		"empty":           {},
		"null":            []byte("null"),
		"nested":          []byte(strings.Repeat("[", 5000) + strings.Repeat("]", 5000)),
		"not_utf8":        []byte("{\"h\":{\"t\":\"\xff\xfe\"},\"mac\":\"\x80\"}"),
		"numbers":         []byte(`{"h":{"src":1e400,"ep":-1e-400},"mac":123456789012345678901234567890}`),
	}
	return seeds
}

// TestGenerateFuzzCorpus rewrites the seed corpus when run with
// -wire.gencorpus; otherwise it checks that the stored seeds are what
// corpusSeeds makes, so that the valid ones are valid under testKey at t0.
func TestGenerateFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if *genCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	accepted := 0
	for name, b := range corpusSeeds(t) {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		path := filepath.Join(dir, name)
		if *genCorpus {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if data, err := os.ReadFile(path); err != nil || string(data) != content {
			t.Errorf("seed %s is missing or out of date (%v): run go test -run TestGenerateFuzzCorpus -wire.gencorpus", name, err)
		}
		if _, _, err := newCodec(t, newClock(t0)).Decode(b); err == nil {
			accepted++
		}
	}
	if accepted != 7 {
		t.Errorf("%d seeds are valid frames, want 7", accepted)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(f, newCodec(f, newClock(t0)), token()))
	f.Fuzz(func(t *testing.T, b []byte) {
		clock := newClock(t0)
		c := newCodec(t, clock)
		fr, meta, err := c.Decode(b)
		s := c.Stats()
		if s.Accepted+s.Rejected() != 1 {
			t.Fatalf("one Decode counted as %+v", s)
		}
		if err != nil {
			for _, sentinel := range []error{wire.ErrTooLarge, wire.ErrMalformed, wire.ErrBadMAC, wire.ErrStale, wire.ErrReplay} {
				if errors.Is(err, sentinel) {
					return
				}
			}
			t.Fatalf("Decode error %v wraps no sentinel", err)
		}
		if _, _, err := c.Decode(b); !errors.Is(err, wire.ErrReplay) {
			t.Fatalf("second Decode of an accepted frame: %v, want ErrReplay", err)
		}
		// An accepted frame re-encodes and decodes to the same Frame.
		re, err := newCodec(t, clock, wire.WithNonceSource(fixedNonce(meta.Nonce+1))).Encode(fr)
		if err != nil {
			t.Fatalf("re-Encode(%+v) of an accepted frame: %v", fr, err)
		}
		fr2, meta2, err := newCodec(t, clock).Decode(re)
		if err != nil {
			t.Fatalf("Decode of re-encoded %s: %v", re, err)
		}
		if diff := cmp.Diff(fr, fr2); diff != "" {
			t.Fatalf("re-encoded frame differs (-first +second):\n%s", diff)
		}
		if !meta2.Time.Equal(t0) {
			t.Fatalf("re-encoded time %v, want %v", meta2.Time, t0)
		}
	})
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), c.n)])
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc\n"), uint16(2), uint8(1))
	f.Add([]byte("0123456789\n0123456789A\n"), uint16(10), uint8(3))
	f.Add([]byte("partial"), uint16(100), uint8(7))
	f.Add([]byte(strings.Repeat("x", 300)+"\n"), uint16(0), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, maxLen uint16, chunk uint8) {
		if len(data) > 8<<10 {
			t.Skip("large inputs make the fuzzer crawl; TestLineReader covers the default limit")
		}
		limit := int(maxLen)
		if limit == 0 {
			limit = wire.DefaultMaxSize
		}
		// The model: split on '\n'; stop at the first line over the limit.
		var want []string
		var wantErr error
		for rest := data; ; {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				switch {
				case len(rest) > limit:
					wantErr = wire.ErrTooLarge
				case len(rest) == 0:
					wantErr = io.EOF
				default:
					wantErr = io.ErrUnexpectedEOF
				}
				break
			}
			if i > limit {
				wantErr = wire.ErrTooLarge
				break
			}
			want = append(want, string(rest[:i]))
			rest = rest[i+1:]
		}

		r := &countingReader{r: chunkReader{bytes.NewReader(data), int(chunk) + 1}}
		lr := wire.NewLineReader(r, int(maxLen))
		var got []string
		var err error
		for {
			var line []byte
			if line, err = lr.Next(); err != nil {
				break
			}
			got = append(got, string(line))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("lines mismatch (-want +got):\n%s", diff)
		}
		if !errors.Is(err, wantErr) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		// Never more than one line beyond what was returned is buffered.
		consumed := len(want)
		for _, l := range want {
			consumed += len(l)
		}
		if r.n > consumed+max(limit+1, 16)+int(chunk)+1 {
			t.Fatalf("read %d bytes; returned %d; limit %d", r.n, consumed, limit)
		}
	})
}
