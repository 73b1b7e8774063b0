package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Stamp identifies one token on one hop: the generation that created it (a
// counter kept in the store, advanced by the coordinator for every token it
// creates) and the hop sequence within that generation. Stamps are ordered
// lexicographically; a node discards any token not newer than the newest it
// has seen.
type Stamp struct {
	Gen int64 `json:"gen"`
	Seq int64 `json:"seq"`
}

// Newer reports whether s is newer than t.
func (s Stamp) Newer(t Stamp) bool {
	if s.Gen != t.Gen {
		return s.Gen > t.Gen
	}
	return s.Seq > t.Seq
}

// IsZero reports whether s is the zero stamp (no token seen yet).
func (s Stamp) IsZero() bool { return s == Stamp{} }

func (s Stamp) String() string { return fmt.Sprintf("%d/%d", s.Gen, s.Seq) }

// Token is what travels around the ring.
type Token struct {
	Stamp
	// Busy counts the hops during which no node idles the token: a node
	// that did work sets it to the ring size, so that the work's effects
	// (messages to deliver elsewhere) go round at full speed.
	Busy int `json:"busy,omitempty"`
	// Quiet counts the hops since the token last rested, did work or
	// passed the coordinator. A quiet token rests once a lap, at the
	// coordinator; a node that sees it quiet for two laps (no coordinator
	// on the way) rests it instead, so an idle token never spins.
	Quiet int `json:"quiet,omitempty"`
	// Coord and Epoch gossip the newest coordinator any node on the way
	// knew of, so a node that missed an announcement learns it within a
	// rotation. Epochs are claimed by compare-and-set in the store, so an
	// (epoch, coordinator) pair is never ambiguous.
	Coord int64 `json:"coord,omitempty"`
	Epoch int64 `json:"epoch,omitempty"`
	// App is carried around unchanged by the ring; the chat service keeps
	// its hints of pending work there.
	App json.RawMessage `json:"app,omitempty"`
	// Proof is Prove(the generation's secret, Stamp): the store makes a
	// secret with every generation, and only a node that read it from the
	// store can make a token of that generation at another hop.
	Proof string `json:"proof,omitempty"`
}

// Prove returns the proof of stamp s under a generation's secret (as the
// store keeps it, hex): the first 8 bytes, in hex, of
// HMAC-SHA256(secret, "ringchat token" 0x00 gen seq), gen and seq as 8-byte
// big-endian integers.
func Prove(secret string, s Stamp) string { return prove("ringchat token", secret, s) }

// ProveLink returns the proof a PING carries: the same as Prove, under the
// label "ringchat link" instead of "ringchat token" (so that a PING's
// proof is never a token's). It shows the link's peer read the
// generation's secret from the store, which a key holder alone cannot.
func ProveLink(secret string, s Stamp) string { return prove("ringchat link", secret, s) }

func prove(label, secret string, s Stamp) string {
	mac := hmac.New(sha256.New, []byte(secret))
	b := make([]byte, 0, len(label)+1+16)
	b = append(b, label...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Gen))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Seq))
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// Config holds the token timeouts, in ticks of the node's ticker.
type Config struct {
	// AckTicks is how long a sender waits for TOKEN_ACK before it declares
	// its successor failed (a stalled successor counts as failed).
	AckTicks int
	// IdleHoldTicks is how long a quiet token rests once a lap (at the
	// coordinator) before it moves on, so an idle ring costs almost
	// nothing: every other node passes a quiet token straight on.
	IdleHoldTicks int
	// MaxHoldTicks bounds a critical section; the runtime cancels work
	// that runs longer.
	MaxHoldTicks int
	// HopTicks is the time budget of one hop in the loss bound.
	HopTicks int
}

// DefaultConfig is tuned for a 20 ms tick on a LAN.
func DefaultConfig() Config {
	return Config{
		AckTicks:      15, // 300 ms: far above a LAN round trip, well under the 1.5 s stall target
		IdleHoldTicks: 40, // 800 ms a lap: an idle ring wakes each node a little more than once a second, whatever its size; a WAKE skips it
		MaxHoldTicks:  5,  // 100 ms: a batch of deliveries takes a few ms; this is a safety bound
		HopTicks:      1,  // 20 ms per hop in the loss bound: a loopback hop takes well under 1 ms
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.AckTicks < 1:
		return fmt.Errorf("token: AckTicks %d < 1", c.AckTicks)
	case c.IdleHoldTicks < 0:
		return fmt.Errorf("token: IdleHoldTicks %d < 0", c.IdleHoldTicks)
	case c.MaxHoldTicks < 1:
		return fmt.Errorf("token: MaxHoldTicks %d < 1", c.MaxHoldTicks)
	case c.HopTicks < 1:
		return fmt.Errorf("token: HopTicks %d < 1", c.HopTicks)
	}
	return nil
}

// RotationBound is the number of ticks within which an idle token passes
// every node of a ring of n nodes when nothing fails: one rest and n hops.
func (c Config) RotationBound(n int) int {
	if n < 1 {
		n = 1
	}
	return c.IdleHoldTicks + n*c.HopTicks
}

// HurriedRotation is the number of ticks a rotation takes when no node
// idles the token (after a WAKE).
func (c Config) HurriedRotation(n int) int {
	if n < 1 {
		n = 1
	}
	return n * c.HopTicks
}

// LapBound is the number of ticks within which a token the coordinator
// passed on comes back to it when no node rests it on the way: a hop and
// the longest critical section per node, plus a failed hop.
func (c Config) LapBound(n int) int {
	if n < 1 {
		n = 1
	}
	return n*(c.HopTicks+c.MaxHoldTicks) + c.AckTicks
}

// LossBound is how long the coordinator waits without seeing the token
// since it last saw it before it creates a new generation: a full rotation
// in which every node may hold the token for the longest critical section,
// one more rest (a node that rested a token that had been quiet for two
// laps as it counts the ring), plus a failed hop. Once the coordinator has
// passed the token on itself, the shorter LapBound applies. Regenerating
// too early is safe (the old generation is fenced off in the store and
// discarded by every node that saw the new one) but wasteful.
func (c Config) LossBound(n int) int {
	if n < 1 {
		n = 1
	}
	return c.RotationBound(n) + c.IdleHoldTicks + n*c.MaxHoldTicks + c.AckTicks
}
