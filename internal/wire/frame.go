package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxTypeLen is the longest frame type accepted, in bytes.
const MaxTypeLen = 32

// Frame is one node-to-node message, as the protocol packages see it.
type Frame struct {
	// Type is a short name such as "TOKEN": 1 to MaxTypeLen printable ASCII
	// characters, no spaces.
	Type string
	// Src is the sender's node id, >= 1.
	Src int64
	// Dst is the node the frame is meant for, >= 0; 0 means none named
	// (frames on a TCP link, whose HELLO named the receiver). Every UDP
	// datagram names its destination, and a node drops datagrams meant for
	// another (a frame replayed to the wrong node). Encoded as "dst" only
	// when not 0.
	Dst int64
	// Epoch is the sender's coordinator epoch, >= 0.
	Epoch int64
	// Payload is an optional JSON value, carried byte for byte. Encode drops
	// white space around it and refuses one containing a newline (marshal it
	// compactly, as json.Marshal does). A nil or empty Payload is omitted.
	Payload json.RawMessage
}

// Meta is what Decode learnt about a frame besides its content.
type Meta struct {
	// Time is the sender's clock when it encoded the frame (millisecond
	// precision).
	Time time.Time
	// Nonce is the frame's random nonce.
	Nonce uint64
}

// validType reports whether t is an acceptable frame type.
func validType(t string) bool {
	if len(t) == 0 || len(t) > MaxTypeLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] > '~' {
			return false
		}
	}
	return true
}

// checkFrame validates f for Encode and returns its payload trimmed of
// surrounding white space (nil if absent).
func checkFrame(f Frame) (json.RawMessage, error) {
	if !validType(f.Type) {
		return nil, fmt.Errorf("%w: type %s: want 1 to %d printable ASCII characters, no spaces",
			ErrInvalidFrame, quoteShort(f.Type), MaxTypeLen)
	}
	if f.Src < 1 {
		return nil, fmt.Errorf("%w: src %d: want >= 1", ErrInvalidFrame, f.Src)
	}
	if f.Dst < 0 {
		return nil, fmt.Errorf("%w: dst %d: want >= 0", ErrInvalidFrame, f.Dst)
	}
	if f.Epoch < 0 {
		return nil, fmt.Errorf("%w: epoch %d: want >= 0", ErrInvalidFrame, f.Epoch)
	}
	p := bytes.TrimSpace(f.Payload)
	if len(p) == 0 {
		return nil, nil
	}
	if !json.Valid(p) {
		return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalidFrame)
	}
	if bytes.IndexByte(p, '\n') >= 0 {
		return nil, fmt.Errorf("%w: payload contains a newline", ErrInvalidFrame)
	}
	return p, nil
}

// appendHeader appends the JSON header of a frame. Its fields have been
// checked: t needs no escaping beyond what strconv gives printable ASCII,
// which is the same as JSON's.
func appendHeader(b []byte, t string, src, dst, ep, ts int64, nonce uint64, p json.RawMessage) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendQuote(b, t)
	b = append(b, `,"src":`...)
	b = strconv.AppendInt(b, src, 10)
	if dst != 0 {
		b = append(b, `,"dst":`...)
		b = strconv.AppendInt(b, dst, 10)
	}
	b = append(b, `,"ep":`...)
	b = strconv.AppendInt(b, ep, 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"n":"`...)
	b = appendNonce(b, nonce)
	b = append(b, '"')
	if len(p) > 0 {
		b = append(b, `,"p":`...)
		b = append(b, p...)
	}
	return append(b, '}')
}

func appendNonce(b []byte, n uint64) []byte {
	var raw [8]byte
	for i := range raw {
		raw[i] = byte(n >> (56 - 8*i))
	}
	return hex.AppendEncode(b, raw[:])
}

// header is a parsed, validated frame header.
type header struct {
	frame Frame
	ts    int64
	nonce uint64
}

// rawHeader is the header as decoded. Pointers tell missing (or null)
// fields from zero values. encoding/json matches these keys without regard
// to case; that is harmless here, since only holders of the key can write a
// header that is accepted. Keys outside the header are matched exactly.
type rawHeader struct {
	T   *string         `json:"t"`
	Src *int64          `json:"src"`
	Dst *int64          `json:"dst"` // optional
	Ep  *int64          `json:"ep"`
	TS  *int64          `json:"ts"`
	N   *string         `json:"n"`
	P   json.RawMessage `json:"p"`
}

// parseHeader parses and validates the header of a frame whose MAC has been
// verified. Errors wrap ErrMalformed.
func parseHeader(h json.RawMessage) (header, error) {
	var r rawHeader
	if err := json.Unmarshal(h, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return header{}, fmt.Errorf("%w: header field %q: wrong type or out of range", ErrMalformed, te.Field)
		}
		return header{}, fmt.Errorf("%w: header is not a JSON object", ErrMalformed)
	}
	return checkHeader(r)
}

// checkHeader validates a header as read, for either path of Decode.
func checkHeader(r rawHeader) (header, error) {
	for _, f := range []struct {
		name    string
		missing bool
	}{{"t", r.T == nil}, {"src", r.Src == nil}, {"ep", r.Ep == nil}, {"ts", r.TS == nil}, {"n", r.N == nil}} {
		if f.missing {
			return header{}, fmt.Errorf("%w: header field %q missing", ErrMalformed, f.name)
		}
	}
	switch {
	case !validType(*r.T):
		return header{}, fmt.Errorf("%w: type %s: want 1 to %d printable ASCII characters, no spaces",
			ErrMalformed, quoteShort(*r.T), MaxTypeLen)
	case *r.Src < 1:
		return header{}, fmt.Errorf("%w: src %d: want >= 1", ErrMalformed, *r.Src)
	case r.Dst != nil && *r.Dst < 0:
		return header{}, fmt.Errorf("%w: dst %d: want >= 0", ErrMalformed, *r.Dst)
	case *r.Ep < 0:
		return header{}, fmt.Errorf("%w: ep %d: want >= 0", ErrMalformed, *r.Ep)
	case *r.TS < 0:
		return header{}, fmt.Errorf("%w: ts %d: want >= 0", ErrMalformed, *r.TS)
	}
	n, ok := parseNonce(*r.N)
	if !ok {
		return header{}, fmt.Errorf("%w: nonce %s: want 16 lowercase hex digits", ErrMalformed, quoteShort(*r.N))
	}
	var dst int64
	if r.Dst != nil {
		dst = *r.Dst
	}
	return header{
		frame: Frame{Type: *r.T, Src: *r.Src, Dst: dst, Epoch: *r.Ep, Payload: r.P},
		ts:    *r.TS,
		nonce: n,
	}, nil
}

// parseNonce parses exactly 16 lowercase hex digits.
func parseNonce(s string) (uint64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(c)
	}
	return n, true
}

// quoteShort quotes s for an error message, cut to a bounded length: the
// text may come from a peer.
func quoteShort(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
