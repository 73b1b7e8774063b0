package wire_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/wire"
)

func TestEncodeExactBytes(t *testing.T) {
	c := newCodec(t, newClock(t0), wire.WithNonceSource(fixedNonce(0x9f2c5a0b71d4e863)))
	got := encode(t, c, wire.Frame{Type: "TOKEN", Src: 3, Epoch: 7, Payload: []byte(`{"seq":1}`)})

	h := `{"t":"TOKEN","src":3,"ep":7,"ts":1763712000123,"n":"9f2c5a0b71d4e863","p":{"seq":1}}`
	m := hmac.New(sha256.New, testKey)
	m.Write([]byte(h))
	want := `{"h":` + h + `,"mac":"` + hex.EncodeToString(m.Sum(nil)) + `"}`
	if string(got) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", got, want)
	}
	checkStats(t, c, wire.Stats{Encoded: 1})
}

func TestEncodeNoPayload(t *testing.T) {
	c := newCodec(t, newClock(t0), wire.WithNonceSource(fixedNonce(1)))
	for _, p := range [][]byte{nil, {}, []byte(" \t ")} {
		b := encode(t, c, wire.Frame{Type: "ELECTION", Src: 1, Epoch: 0, Payload: p})
		if bytes.Contains(b, []byte(`"p"`)) {
			t.Errorf("Encode with payload %q = %s, want no \"p\"", p, b)
		}
		f, _, err := newCodec(t, newClock(t0)).Decode(b)
		if err != nil || f.Payload != nil {
			t.Errorf("Decode = %+v, %v; want nil payload", f, err)
		}
	}
}

func TestRoundTripTCP(t *testing.T) {
	clock := newClock(t0)
	sender := newCodec(t, clock)
	receiver := newCodec(t, clock)
	frames := []wire.Frame{
		token(),
		{Type: "TOKEN_ACK", Src: 5, Epoch: 7},
		{Type: "SUCCESSOR", Src: 1, Epoch: 8, Payload: []byte(`{"id":9,"addr":"10.0.0.9:7001"}`)},
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		for _, f := range frames {
			b, err := sender.Encode(f)
			if err != nil {
				t.Errorf("Encode: %v", err)
				return
			}
			if err := wire.WriteLine(conn, b); err != nil {
				t.Errorf("WriteLine: %v", err)
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))

	lr := wire.NewLineReader(conn, receiver.MaxSize())
	var got []wire.Frame
	for {
		line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		f, meta, err := receiver.Decode(line)
		if err != nil {
			t.Fatalf("Decode(%s): %v", line, err)
		}
		if !meta.Time.Equal(t0) {
			t.Errorf("meta.Time = %v, want %v", meta.Time, t0)
		}
		got = append(got, f)
	}
	if diff := cmp.Diff(frames, got); diff != "" {
		t.Errorf("frames mismatch (-sent +received):\n%s", diff)
	}
	checkStats(t, receiver, wire.Stats{Accepted: 3})
}

func TestRoundTripUDP(t *testing.T) {
	clock := newClock(t0)
	sender := newCodec(t, clock, wire.WithNonceSource(fixedNonce(0xfeedface)))
	receiver := newCodec(t, clock)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	defer pc.Close()
	out, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	want := wire.Frame{Type: "JOIN", Src: 12, Epoch: 0, Payload: []byte(`{"addr":"10.0.0.12:7001","udp":7002}`)}
	b := encode(t, sender, want)
	if _, err := out.Write(b); err != nil {
		t.Fatal(err)
	}
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, receiver.MaxSize()+1)
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	got, meta, err := receiver.Decode(buf[:n])
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frame mismatch (-sent +received):\n%s", diff)
	}
	if meta.Nonce != 0xfeedface || !meta.Time.Equal(t0) {
		t.Errorf("meta = %+v, want nonce 0xfeedface at %v", meta, t0)
	}
}

func TestPayloadPreservedByteForByte(t *testing.T) {
	clock := newClock(t0)
	c := newCodec(t, clock)
	for _, p := range []string{
		`{"html":"<a href='x'>&amp;</a>","u":"é\u00e9\ud83d\ude00","n":1.50e+3,"big":123456789012345678901234567890}`,
		`{ "spaced" : [ 1 ,2 ] ,"tab":	true }`,
		`"just a string"`, `42`, `-0.0`, `null`, `[]`, `{}`, "\"\\r\\n escaped\"",
		"{\"cr\":1}\r", // a bare CR is JSON white space and not a frame separator
	} {
		b := encode(t, c, wire.Frame{Type: "MSG", Src: 2, Epoch: 1, Payload: []byte(p)})
		f, _, err := c.Decode(b)
		if err != nil {
			t.Errorf("Decode(%s): %v", b, err)
			continue
		}
		if want := strings.TrimRight(p, "\r"); string(f.Payload) != want {
			t.Errorf("payload = %q, want %q", f.Payload, want)
		}
	}
}

func TestEncodeRefusesInvalidFrames(t *testing.T) {
	c := newCodec(t, newClock(t0))
	ok := wire.Frame{Type: "TOKEN", Src: 1, Epoch: 0}
	for name, mod := range map[string]func(*wire.Frame){
		"empty type":          func(f *wire.Frame) { f.Type = "" },
		"long type":           func(f *wire.Frame) { f.Type = strings.Repeat("A", wire.MaxTypeLen+1) },
		"type with space":     func(f *wire.Frame) { f.Type = "TOKEN ACK" },
		"type with newline":   func(f *wire.Frame) { f.Type = "TOKEN\n" },
		"type with non-ASCII": func(f *wire.Frame) { f.Type = "TÖKEN" },
		"src 0":               func(f *wire.Frame) { f.Src = 0 },
		"negative src":        func(f *wire.Frame) { f.Src = -4 },
		"negative epoch":      func(f *wire.Frame) { f.Epoch = -1 },
		"payload not JSON":    func(f *wire.Frame) { f.Payload = []byte(`{"a":`) },
		"two payload values":  func(f *wire.Frame) { f.Payload = []byte(`{} {}`) },
		"payload newline":     func(f *wire.Frame) { f.Payload = []byte("{\n\"a\":1}") },
	} {
		f := ok
		mod(&f)
		if b, err := c.Encode(f); !errors.Is(err, wire.ErrInvalidFrame) {
			t.Errorf("%s: Encode = %q, %v; want ErrInvalidFrame", name, b, err)
		}
	}
	if _, err := c.Encode(wire.Frame{Type: strings.Repeat("A", wire.MaxTypeLen), Src: 1, Epoch: 0}); err != nil {
		t.Errorf("Encode with a %d-byte type: %v", wire.MaxTypeLen, err)
	}
	checkStats(t, c, wire.Stats{Encoded: 1})
}

func TestEncodeRefusesOversize(t *testing.T) {
	c := newCodec(t, newClock(t0), wire.WithMaxSize(1024))
	big := wire.Frame{Type: "MSG", Src: 1, Payload: []byte(`"` + strings.Repeat("x", 1024) + `"`)}
	if _, err := c.Encode(big); !errors.Is(err, wire.ErrTooLarge) {
		t.Errorf("Encode of an oversize frame: %v, want ErrTooLarge", err)
	}
	checkStats(t, c, wire.Stats{})
}

func TestNewCodecRefusesBadSettings(t *testing.T) {
	if _, err := wire.NewCodec([]byte("fifteen bytes!!")); !errors.Is(err, wire.ErrShortKey) {
		t.Errorf("NewCodec with a 15-byte key: %v, want ErrShortKey", err)
	}
	if _, err := wire.NewCodec([]byte("sixteen bytes!!!")); err != nil {
		t.Errorf("NewCodec with a 16-byte key: %v", err)
	}
	for name, o := range map[string]wire.Option{
		"zero window":  wire.WithWindow(0),
		"tiny size":    wire.WithMaxSize(10),
		"zero cap":     wire.WithReplayCap(0),
		"nil clock":    wire.WithClock(nil),
		"nil nonces":   wire.WithNonceSource(nil),
		"neg. window":  wire.WithWindow(-time.Second),
		"neg. maxsize": wire.WithMaxSize(-1),
	} {
		if _, err := wire.NewCodec(testKey, o); err == nil {
			t.Errorf("NewCodec with %s: no error", name)
		}
	}
}

func TestKeyIsCopied(t *testing.T) {
	key := []byte("a key that the caller will reuse")
	c, err := wire.NewCodec(key, wire.WithClock(newClock(t0).Now))
	if err != nil {
		t.Fatal(err)
	}
	b := encode(t, c, token())
	for i := range key {
		key[i] = 0
	}
	if _, _, err := c.Decode(b); err != nil {
		t.Errorf("Decode after the caller wiped its key: %v", err)
	}
}

func TestNullPayload(t *testing.T) {
	c := newCodec(t, newClock(t0))
	for h, want := range map[string]json.RawMessage{
		`{"t":"X","src":1,"ep":0,"ts":1763712000123,"n":"0000000000000001","p":null}`: json.RawMessage("null"),
		`{"t":"X","src":1,"ep":0,"ts":1763712000123,"n":"0000000000000002"}`:          nil,
	} {
		f, _, err := c.Decode(sign(testKey, h))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if diff := cmp.Diff(want, f.Payload); diff != "" {
			t.Errorf("header %s: payload mismatch (-want +got):\n%s", h, diff)
		}
	}
}

// TestDestination: a frame's destination is signed with the header, so a
// datagram meant for one node cannot be replayed to another as if meant for
// it; frames without one (TCP links) are spelled as before.
func TestDestination(t *testing.T) {
	c := newCodec(t, newClock(t0), wire.WithNonceSource(fixedNonce(0x9f2c5a0b71d4e863)))
	got := encode(t, c, wire.Frame{Type: "SUCCESSOR", Src: 3, Dst: 4, Epoch: 7, Payload: []byte(`{"succ":5}`)})
	h := `{"t":"SUCCESSOR","src":3,"dst":4,"ep":7,"ts":1763712000123,"n":"9f2c5a0b71d4e863","p":{"succ":5}}`
	m := hmac.New(sha256.New, testKey)
	m.Write([]byte(h))
	want := `{"h":` + h + `,"mac":"` + hex.EncodeToString(m.Sum(nil)) + `"}`
	if string(got) != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want)
	}
	f, _, err := newCodec(t, newClock(t0)).Decode(got)
	if err != nil || f.Dst != 4 || f.Src != 3 {
		t.Errorf("Decode = %+v, %v; want dst 4 from 3", f, err)
	}
	// Changing the destination breaks the MAC.
	forged := bytes.Replace(got, []byte(`"dst":4`), []byte(`"dst":5`), 1)
	if _, _, err := newCodec(t, newClock(t0)).Decode(forged); !errors.Is(err, wire.ErrBadMAC) {
		t.Errorf("Decode with the destination changed: %v, want ErrBadMAC", err)
	}
	// The general path reads it too (spaces defeat the fast path).
	spaced := []byte(`{"h":` + h + ` , "mac":"` + hex.EncodeToString(m.Sum(nil)) + `"}`)
	if f, _, err := newCodec(t, newClock(t0)).Decode(spaced); err != nil || f.Dst != 4 {
		t.Errorf("general path: %+v, %v; want dst 4", f, err)
	}
	if _, err := c.Encode(wire.Frame{Type: "X", Src: 1, Dst: -1}); !errors.Is(err, wire.ErrInvalidFrame) {
		t.Errorf("Encode with dst -1: %v, want ErrInvalidFrame", err)
	}
}
