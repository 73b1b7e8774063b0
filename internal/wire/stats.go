package wire

import (
	"errors"
	"sync/atomic"
)

// Stats counts what a Codec has done since it was made. Each decoded frame
// is counted once: as accepted or under the reason it was refused.
type Stats struct {
	Encoded   uint64 // frames encoded
	Accepted  uint64 // frames decoded and accepted
	TooLarge  uint64 // refused with ErrTooLarge
	Malformed uint64 // refused with ErrMalformed
	BadMAC    uint64 // refused with ErrBadMAC
	Stale     uint64 // refused with ErrStale
	Replay    uint64 // refused with ErrReplay
	// ReplayEvictions counts nonces dropped from a full replay cache before
	// their window ended. It should stay 0; if not, raise WithReplayCap.
	ReplayEvictions uint64
}

// Rejected returns the number of frames refused, for any reason.
func (s Stats) Rejected() uint64 {
	return s.TooLarge + s.Malformed + s.BadMAC + s.Stale + s.Replay
}

// counters are the live, atomic counterparts of Stats.
type counters struct {
	encoded, accepted                          atomic.Uint64
	tooLarge, malformed, badMAC, stale, replay atomic.Uint64
	evictions                                  atomic.Uint64
}

// count records the outcome of one Decode.
func (c *counters) count(err error) {
	switch {
	case err == nil:
		c.accepted.Add(1)
	case errors.Is(err, ErrTooLarge):
		c.tooLarge.Add(1)
	case errors.Is(err, ErrMalformed):
		c.malformed.Add(1)
	case errors.Is(err, ErrBadMAC):
		c.badMAC.Add(1)
	case errors.Is(err, ErrStale):
		c.stale.Add(1)
	case errors.Is(err, ErrReplay):
		c.replay.Add(1)
	}
}

// Stats returns a snapshot of the Codec's counters. Counters are read one by
// one, so a snapshot taken while frames are decoded may be slightly skewed.
func (c *Codec) Stats() Stats {
	return Stats{
		Encoded:         c.stats.encoded.Load(),
		Accepted:        c.stats.accepted.Load(),
		TooLarge:        c.stats.tooLarge.Load(),
		Malformed:       c.stats.malformed.Load(),
		BadMAC:          c.stats.badMAC.Load(),
		Stale:           c.stats.stale.Load(),
		Replay:          c.stats.replay.Load(),
		ReplayEvictions: c.stats.evictions.Load(),
	}
}
