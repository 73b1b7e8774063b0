// Package wire is the node-to-node frame codec of ringnode. The same frames
// travel over the TCP links between ring neighbours (one frame per line, see
// LineReader and WriteLine) and over UDP to and from the coordinator (one
// frame per datagram). Every frame is authenticated with HMAC-SHA256 under a
// shared cluster key (see LoadKey).
//
// # Wire format
//
// A frame is one JSON object:
//
//	{"h":{"t":"TOKEN","src":3,"ep":7,"ts":1763712000123,"n":"9f2c5a0b71d4e863","p":{...}},"mac":"<64 lowercase hex>"}
//
// The header "h" holds:
//
//	t    frame type: 1 to 32 printable ASCII characters, no spaces
//	src  sender node id, >= 1
//	dst  optional: the node a datagram is meant for, >= 0 (absent: 0)
//	ep   sender's coordinator epoch, >= 0
//	ts   sender's wall clock, Unix milliseconds, >= 0
//	n    random 64-bit nonce, exactly 16 lowercase hex digits
//	p    optional payload, any JSON value, kept byte for byte
//
// "mac" is the lowercase hex HMAC-SHA256, under the cluster key, of the exact
// bytes of the "h" value as they appear in the frame, so no canonical form is
// needed. Unknown fields are ignored, in the header and at the top level.
// Top-level keys are matched exactly, so a frame cannot be re-spelt without
// breaking its MAC; header keys are matched as encoding/json does (ignoring
// case), which is harmless since the header is authenticated. A frame never
// contains a newline byte, so that it can be sent as one TCP line; Encode's
// output has no trailing newline. A "p" of null is kept as the payload
// "null"; an absent "p" is a nil payload.
//
// # Checks on receipt
//
// Decode refuses, in this order: input longer than the maximum frame size
// (ErrTooLarge); input that is not one JSON object with an "h" object and a
// "mac" string, or that contains a newline (ErrMalformed); a MAC mismatch
// (ErrBadMAC); a header with missing or invalid fields (ErrMalformed); a ts
// further than the window (default 30 s) from the receiver's clock in either
// direction (ErrStale); and a nonce already accepted from the same src within
// the window (ErrReplay). No header field is read before the MAC has been
// verified, and a nonce is recorded only once its frame has passed
// every other check, so forged frames cannot poison the replay cache.
//
// The replay cache holds at most a fixed number of nonces (default 100,000);
// when it is full the oldest is dropped early (counted in
// Stats.ReplayEvictions). Only holders of the cluster key can fill it.
//
// Frames spelled exactly as Encode spells them (fields in its order, no
// white space, no escapes in the type) are read by a fast path without
// encoding/json's reflection; every other frame, and every frame the fast
// path cannot accept, goes through the general path, which alone decides
// refusals. The fast path accepts only what the general path would accept
// with the same content (FuzzFastPathMatchesGeneral).
package wire
