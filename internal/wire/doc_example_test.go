package wire_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/wire"
)

// protocolDoc is the document that tells strangers how to speak the ring.
const protocolDoc = "../../docs/PROTOCOL.md"

// docSection returns the text of the section of doc headed exactly by
// heading, up to the next heading of the same or a higher level.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	level := strings.IndexByte(heading, ' ')
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", protocolDoc, heading)
	}
	body := doc[start+len(heading)+2:]
	for i := 0; i < len(body); {
		nl := strings.IndexByte(body[i:], '\n')
		line := body[i:]
		if nl >= 0 {
			line = body[i : i+nl]
		}
		if h := strings.IndexByte(line, ' '); h > 0 && h <= level && strings.Trim(line[:h], "#") == "" {
			return body[:i]
		}
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	return body
}

// fencedBlocks returns the contents of the ```text blocks of s, in order.
func fencedBlocks(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```text\n(.*?)\n```").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocWorkedExample: the worked example of PROTOCOL.md ("Node-to-node
// frames") is what the code does: its key file loads as the key, the code
// encodes the frame's content at its time and nonce to exactly its line,
// the MAC's input is the header's bytes as stated, their HMAC is the MAC
// shown, and a receiver accepts the line once, refuses it replayed, and
// refuses it with one header byte changed. A change to the document or to
// the codec's format fails here.
func TestDocWorkedExample(t *testing.T) {
	doc := readDoc(t)
	ex := docSection(t, docSection(t, doc, "## Node-to-node frames"), "### Worked example")
	blocks := fencedBlocks(ex)
	if len(blocks) != 4 {
		t.Fatalf("the worked example has %d text blocks, want 4 (key file, line, MAC input, MAC)", len(blocks))
	}
	keyText, line, input, macHex := blocks[0], []byte(blocks[1]), blocks[2], blocks[3]

	// The key file, as ringnode keygen writes it: hex and a newline.
	file := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(file, []byte(keyText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, isDev, err := wire.LoadKey(file, "")
	if err != nil || isDev {
		t.Fatalf("LoadKey(the example's key file) = %v, dev %v", err, isDev)
	}
	if want, _ := hex.DecodeString(keyText); !bytes.Equal(key, want) || len(key) != 32 {
		t.Fatalf("the key file gives %x, want the 32 bytes %s", key, keyText)
	}

	// The line's content, read as a stranger would.
	var outer struct {
		H struct {
			T   string          `json:"t"`
			Src int64           `json:"src"`
			Ep  int64           `json:"ep"`
			TS  int64           `json:"ts"`
			N   string          `json:"n"`
			P   json.RawMessage `json:"p"`
		} `json:"h"`
		MAC string `json:"mac"`
	}
	if err := json.Unmarshal(line, &outer); err != nil {
		t.Fatalf("the example's line is not JSON: %v", err)
	}
	h := outer.H
	nonce, err := strconv.ParseUint(h.N, 16, 64)
	if err != nil {
		t.Fatalf("nonce %q: %v", h.N, err)
	}
	at := time.UnixMilli(h.TS)

	// The code spells that content exactly as the document does.
	enc, err := wire.NewCodec(key, wire.WithClock(func() time.Time { return at }),
		wire.WithNonceSource(func() uint64 { return nonce }))
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Frame{Type: h.T, Src: h.Src, Epoch: h.Ep, Payload: h.P}
	got, err := enc.Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, line) {
		t.Fatalf("the code encodes the example's frame as\n%s\nthe document shows\n%s", got, line)
	}

	// The MAC's input: the header's bytes as they stand in the line, of
	// the length the text states.
	if !bytes.Contains(line, []byte(`{"h":`+input+`,"mac":"`)) {
		t.Fatalf("the stated MAC input is not the value of h in the line:\n%s", input)
	}
	m := regexp.MustCompile(`input is these (\d+) bytes`).FindStringSubmatch(ex)
	if m == nil || m[1] != strconv.Itoa(len(input)) {
		t.Fatalf("the document states the MAC input's length as %v; it is %d bytes", m, len(input))
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(input))
	if sum := hex.EncodeToString(mac.Sum(nil)); sum != macHex || outer.MAC != macHex {
		t.Fatalf("HMAC-SHA256 of the input = %s; the document shows %s, the line carries %s", sum, macHex, outer.MAC)
	}

	// A receiver within the window accepts it once.
	recv, err := wire.NewCodec(key, wire.WithClock(func() time.Time { return at.Add(29 * time.Second) }))
	if err != nil {
		t.Fatal(err)
	}
	f, meta, err := recv.Decode(line)
	if err != nil {
		t.Fatalf("decoding the example's line: %v", err)
	}
	if diff := cmp.Diff(want, f); diff != "" || meta.Nonce != nonce || !meta.Time.Equal(at) {
		t.Fatalf("decoded (-want +got):\n%s nonce %x time %v", diff, meta.Nonce, meta.Time)
	}
	if _, _, err := recv.Decode(line); !errors.Is(err, wire.ErrReplay) {
		t.Fatalf("the same line again: %v, want a replay", err)
	}
	tampered := bytes.Replace(line, []byte(`"seq":112`), []byte(`"seq":113`), 1)
	if bytes.Equal(tampered, line) || !strings.Contains(ex, "`\"seq\":113`") {
		t.Fatal("the example no longer shows the changed byte the document speaks of")
	}
	fresh, err := wire.NewCodec(key, wire.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fresh.Decode(tampered); !errors.Is(err, wire.ErrBadMAC) {
		t.Fatalf("the line with one header byte changed: %v, want a bad MAC", err)
	}
	// A stranger's clock 31 s away refuses it.
	late, err := wire.NewCodec(key, wire.WithClock(func() time.Time { return at.Add(31 * time.Second) }))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := late.Decode(line); !errors.Is(err, wire.ErrStale) {
		t.Fatalf("the line 31 s later: %v, want stale", err)
	}
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestDocLimits: the limits PROTOCOL.md gives for frames and keys are the
// codec's.
func TestDocLimits(t *testing.T) {
	sec := docSection(t, readDoc(t), "## Node-to-node frames")
	limits := docSection(t, sec, "### Limits")
	for _, row := range []string{
		"| frame size (a TCP line without its `\\n`, or a datagram) | " + thousands(wire.DefaultMaxSize) + " bytes |",
		"| frame type `t` | 1 to " + strconv.Itoa(wire.MaxTypeLen) + " bytes |",
		"| clock skew and replay window | " + thousands(int(wire.DefaultWindow.Milliseconds())) + " ms |",
		"| nonces remembered per node | " + thousands(wire.DefaultReplayCap) + " |",
		"| cluster key | at least " + strconv.Itoa(wire.MinKeyLen) + " bytes (" + strconv.Itoa(2*wire.MinKeyLen) + " hex digits) |",
	} {
		if !strings.Contains(limits, row+"\n") {
			t.Errorf("PROTOCOL.md's frame limits lack the row\n%s", row)
		}
	}
	dev := "the " + strconv.Itoa(len(wire.DevKey)) + " ASCII bytes `" + wire.DevKey + "`"
	if !strings.Contains(strings.Join(strings.Fields(docSection(t, sec, "### The key")), " "), dev) {
		t.Errorf("PROTOCOL.md does not give the development key as %q", dev)
	}
}
