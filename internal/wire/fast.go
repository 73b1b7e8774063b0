package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The fast path of Decode reads frames spelled exactly as Encode spells
// them, without encoding/json's reflection (which is most of a decode's
// cost). Anything else it cannot read goes to the general path, which
// decides: the fast path only ever accepts a frame the general path would
// accept with the same content (FuzzFastPathMatchesGeneral checks this),
// and it never rejects one.

const (
	outerPrefix = `{"h":`
	macPrefix   = `,"mac":"`
	outerSuffix = macPrefix + "0000000000000000000000000000000000000000000000000000000000000000" + `"}`
)

// splitCanonical returns the header and the MAC's hex digits of a frame
// spelled {"h":HEADER,"mac":"HEX"}, or false.
func splitCanonical(b []byte) (h, mac []byte, ok bool) {
	if len(b) < len(outerPrefix)+2+len(outerSuffix) || !bytes.HasPrefix(b, []byte(outerPrefix)) ||
		b[len(b)-2] != '"' || b[len(b)-1] != '}' {
		return nil, nil, false
	}
	rest := b[len(outerPrefix):]
	tail := rest[len(rest)-len(outerSuffix):]
	if !bytes.HasPrefix(tail, []byte(macPrefix)) {
		return nil, nil, false
	}
	return rest[:len(rest)-len(outerSuffix)], tail[len(macPrefix) : len(tail)-2], true
}

// parseCanonicalHeader reads a header spelled as appendHeader spells it:
// {"t":"TYPE","src":N,"ep":N,"ts":N,"n":"NONCE"} with an optional ,"dst":N
// after src and an optional ,"p":VALUE
// before the closing brace, the type unescaped printable ASCII and VALUE
// valid JSON other than null with no white space around it. It fills r, or
// returns false.
func parseCanonicalHeader(h []byte, r *rawHeader) bool {
	p := canonicalParser{b: h}
	t, ok := p.str(`{"t":`)
	if !ok {
		return false
	}
	src, ok := p.num(`,"src":`)
	if !ok {
		return false
	}
	var dst *int64
	if d, ok := p.num(`,"dst":`); ok {
		dst = &d
	}
	ep, ok := p.num(`,"ep":`)
	if !ok {
		return false
	}
	ts, ok := p.num(`,"ts":`)
	if !ok {
		return false
	}
	n, ok := p.str(`,"n":`)
	if !ok {
		return false
	}
	var payload json.RawMessage
	switch {
	case p.rest() == "}":
	case p.skip(`,"p":`):
		if p.i >= len(p.b) || p.b[len(p.b)-1] != '}' {
			return false
		}
		v := p.b[p.i : len(p.b)-1]
		if len(v) == 0 || isJSONSpace(v[0]) || isJSONSpace(v[len(v)-1]) ||
			string(v) == "null" || !json.Valid(v) {
			return false
		}
		payload = bytes.Clone(v)
	default:
		return false
	}
	*r = rawHeader{T: &t, Src: &src, Dst: dst, Ep: &ep, TS: &ts, N: &n, P: payload}
	return true
}

type canonicalParser struct {
	b []byte
	i int
}

func (p *canonicalParser) rest() string { return string(p.b[p.i:]) }

// skip consumes lit if the input goes on with it.
func (p *canonicalParser) skip(lit string) bool {
	if !bytes.HasPrefix(p.b[p.i:], []byte(lit)) {
		return false
	}
	p.i += len(lit)
	return true
}

// str reads lit, then a string of printable ASCII without escapes.
func (p *canonicalParser) str(lit string) (string, bool) {
	if !p.skip(lit) || p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return string(p.b[start:j]), true
		case c <= ' ' || c > '~' || c == '\\':
			return "", false
		}
	}
	return "", false
}

// num reads lit, then a non-negative integer: digits without a leading
// zero, within int64. (No header number may be negative: the general path
// says why.)
func (p *canonicalParser) num(lit string) (int64, bool) {
	if !p.skip(lit) {
		return 0, false
	}
	start, j := p.i, p.i
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == start || (p.b[start] == '0' && j-start > 1) {
		return 0, false
	}
	v, err := strconv.ParseInt(string(p.b[start:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return v, true
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
