package transport

import (
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/wire"
)

// Reasons for dropping input, as counted by Drops and logged in the
// "reason" field.
const (
	ReasonTooLarge      = "too_large"       // line or datagram over the maximum frame size
	ReasonMalformed     = "malformed"       // not a well-formed frame
	ReasonBadMAC        = "bad_mac"         // forged, corrupted or signed with another key
	ReasonStale         = "stale"           // timestamp outside the window
	ReasonReplay        = "replay"          // nonce already seen
	ReasonNoHello       = "no_hello"        // connection closed or timed out before its HELLO
	ReasonNotHello      = "not_hello"       // first frame on a connection is not a HELLO
	ReasonMisdirected   = "misdirected"     // HELLO or datagram meant for another node
	ReasonWrongSource   = "wrong_source"    // a frame on a link in the name of a node other than the link's peer
	ReasonTooManyHellos = "too_many_hellos" // closed to make room: too many connections waiting for their HELLO
	ReasonReadError     = "read_error"      // a socket read failed (UDP)
	ReasonReplacedLink  = "replaced_link"   // a frame read from a link just as another replaced it (counted, not logged: relinks make them)
	ReasonUnprovenHello = "unproven_hello"  // a HELLO without a proof under a store secret, while a predecessor link is up: refused, the link kept
)

// reasonOf returns the drop reason for a wire decoding error.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, wire.ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, wire.ErrBadMAC):
		return ReasonBadMAC
	case errors.Is(err, wire.ErrStale):
		return ReasonStale
	case errors.Is(err, wire.ErrReplay):
		return ReasonReplay
	}
	return ReasonMalformed
}

// dropLog counts dropped input by reason and logs it at warn level, at most
// once per interval per reason, with the number of drops not logged since
// the previous line. Reasons are the constants above, so the map stays small.
type dropLog struct {
	log   zerolog.Logger
	every time.Duration
	now   func() time.Time

	mu sync.Mutex
	by map[string]*dropCount
}

type dropCount struct {
	total      uint64
	suppressed uint64
	last       time.Time // when the last line was logged; zero if never
}

func newDropLog(log zerolog.Logger) *dropLog {
	return &dropLog{log: log, every: time.Second, now: time.Now, by: make(map[string]*dropCount)}
}

// drop records one dropped input. via says where it came from ("udp",
// "inbound", "successor", ...) and from the remote address or node.
func (d *dropLog) drop(reason, via, from string, err error) {
	d.mu.Lock()
	c := d.count(reason)
	now := d.now()
	if !c.last.IsZero() && now.Sub(c.last) < d.every {
		c.suppressed++
		d.mu.Unlock()
		return
	}
	suppressed := c.suppressed
	c.suppressed, c.last = 0, now
	d.mu.Unlock()
	d.log.Warn().Str("reason", reason).Str("via", via).Str("from", from).
		Uint64("suppressed", suppressed).Err(err).Msg("dropped input")
}

// quiet records one dropped input without logging it: input that normal
// operation also drops now and then.
func (d *dropLog) quiet(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.count(reason)
}

// count adds one drop of reason and returns its counts. The caller holds
// d.mu.
func (d *dropLog) count(reason string) *dropCount {
	c := d.by[reason]
	if c == nil {
		c = &dropCount{}
		d.by[reason] = c
	}
	c.total++
	return c
}

// counts returns the number of drops by reason.
func (d *dropLog) counts() map[string]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]uint64, len(d.by))
	for r, c := range maps.All(d.by) {
		m[r] = c.total
	}
	return m
}
