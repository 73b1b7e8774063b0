package wire

import "errors"

// Decoding errors. Decode wraps exactly one of them with %w, so callers can
// tell the reasons apart with errors.Is and still log a message that says
// what was wrong. Each has its own counter in Stats.
var (
	// ErrTooLarge reports input longer than the maximum frame size. Encode
	// and LineReader.Next return it too.
	ErrTooLarge = errors.New("wire: frame too large")
	// ErrMalformed reports input that is not a well-formed frame: bad JSON,
	// trailing bytes, missing fields, header fields of the wrong type or out
	// of range.
	ErrMalformed = errors.New("wire: malformed frame")
	// ErrBadMAC reports a frame whose MAC does not match its header: it was
	// corrupted, forged, or signed with another key.
	ErrBadMAC = errors.New("wire: bad MAC")
	// ErrStale reports a frame whose timestamp is outside the window around
	// the receiver's clock: too old (or replayed late), or too far ahead.
	ErrStale = errors.New("wire: stale frame")
	// ErrReplay reports a frame whose nonce was already accepted from the
	// same sender within the window.
	ErrReplay = errors.New("wire: replayed frame")
)

// ErrInvalidFrame reports a Frame that Encode refuses to encode.
var ErrInvalidFrame = errors.New("wire: invalid frame")

// ErrShortKey reports a cluster key shorter than MinKeyLen bytes.
var ErrShortKey = errors.New("wire: key too short")
