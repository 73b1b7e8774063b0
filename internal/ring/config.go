package ring

import (
	"fmt"
	"time"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/token"
)

// Config holds a node's protocol settings. Durations are in ticks of the
// node's ticker (Tick).
type Config struct {
	ID    int64
	Tick  time.Duration // the runtime's tick; only used to describe bounds
	Token token.Config
	// Election configures the coordinator election (its ID is the node's).
	Election election.Config

	// HeartbeatTicks: a PING goes on an otherwise idle successor link this
	// often, so that a stalled successor is found without the token.
	HeartbeatTicks int
	// CoordHeartbeatTicks: the same on the links into and out of the
	// coordinator (at most HeartbeatTicks), so that a coordinator cut off
	// from its ring finds out, and stops renewing its lease, well within a
	// lease: its predecessor must have been heard within this and
	// FailTicks, or its successor link work, for the lease to be renewed.
	CoordHeartbeatTicks int
	// FailTicks: no PONG within this many ticks means the successor failed.
	FailTicks int
	// PredSilenceTicks: an inbound link silent this long is dropped.
	PredSilenceTicks int
	// RetryTicks is the first retry interval of UDP requests; it doubles up
	// to MaxRetryTicks.
	RetryTicks    int
	MaxRetryTicks int
	// StoreCheckRetries: after this many unanswered requests the node
	// reads the coordinator from the store, and claims the role if the
	// coordinator it has been asking is still recorded there (it is dead).
	StoreCheckRetries int
	// SuccessorRetries bounds how often the coordinator resends an
	// unacknowledged SUCCESSOR.
	SuccessorRetries int
	// LeaveRetries bounds how often a leaving node asks to be spliced out
	// before it leaves anyway (the ring then repairs itself).
	LeaveRetries int
	// SyncTicks: the coordinator re-asserts every member's successor this
	// often (and when it takes office).
	SyncTicks int
	// AliveTicks: a coordinator (of a voting method) whose ring works
	// renews its lease in the store for this long, every quarter of it. A
	// node that cannot reach the coordinator takes the role over only once
	// that lease ran out, so an isolated node, or the far side of a split,
	// never takes it from a ring that works.
	AliveTicks int
	// TroubleHoldTicks: a node whose store link was troubled does not
	// challenge a lower coordinator for this long after the trouble ends
	// (trouble.go), so that a link that fails on and off does not bring the
	// role back and forth.
	TroubleHoldTicks int
	// UnheardTicks, UnheardLinkTicks: a coordinator gives its successor's
	// link up before the watchdog (twice FailTicks) once that successor
	// has answered none of this term's assignments for UnheardTicks and
	// its link has not come up in UnheardLinkTicks (silence.go).
	UnheardTicks     int
	UnheardLinkTicks int
}

// DefaultConfig is tuned for a 20 ms tick on a LAN or loopback: fine enough
// for the repair targets, coarse enough that an idle node wakes rarely.
func DefaultConfig(id int64) Config {
	return Config{
		ID:                  id,
		Tick:                20 * time.Millisecond,
		Token:               token.DefaultConfig(),
		Election:            election.DefaultConfig(id, election.Default),
		HeartbeatTicks:      45,  // 900 ms idle before a PING: a quiet token comes round every 800 ms (one rest a lap), so the links away from the coordinator need no PINGs when idle
		CoordHeartbeatTicks: 12,  // 240 ms on the coordinator's two links, with its lease renewals: a cut coordinator stops renewing within half a second
		FailTicks:           15,  // 300 ms without a PONG (as for a TOKEN_ACK): a stalled successor is found within 1.2 s even with no token going round
		PredSilenceTicks:    75,  // 1.5 s: far above the heartbeat, so only a dead link trips it
		RetryTicks:          5,   // 100 ms: a lost datagram costs little
		MaxRetryTicks:       40,  // 800 ms: keeps retrying without flooding a busy coordinator
		StoreCheckRetries:   3,   // 0.7 s without an answer (100 + 200 + 400 ms): check whether the coordinator is dead
		SuccessorRetries:    8,   // a live node answers the first or second; a dead one is found by its neighbour
		LeaveRetries:        6,   // ~2 s, then leave anyway
		SyncTicks:           500, // 10 s: one datagram per node; repairs any assignment lost in a coordinator change
		AliveTicks:          50,  // 1 s: a coordinator that died (or is cut off) is replaced about a second later; four store writes a second
		TroubleHoldTicks:    500, // 10 s: a lossy link clears and fails again within a second or two; the role stays away from it meanwhile
		UnheardTicks:        20,  // 400 ms: three sends (0, 100, 300 ms) unanswered
		UnheardLinkTicks:    5,   // 100 ms: a dial to a node that answers comes up in a few milliseconds
	}
}

// TestConfig has small bounds for simulations.
func TestConfig(id int64) Config {
	c := DefaultConfig(id)
	c.Tick = time.Millisecond
	c.Token = token.Config{AckTicks: 6, IdleHoldTicks: 2, MaxHoldTicks: 4, HopTicks: 1}
	c.HeartbeatTicks = 3
	c.CoordHeartbeatTicks = 3
	c.FailTicks = 8
	c.PredSilenceTicks = 20
	c.RetryTicks = 3
	c.MaxRetryTicks = 12
	c.StoreCheckRetries = 3
	c.SuccessorRetries = 6
	c.LeaveRetries = 5
	c.SyncTicks = 100
	c.AliveTicks = 12
	c.TroubleHoldTicks = 100
	c.UnheardTicks = 12
	c.UnheardLinkTicks = 2
	c.Election.TimeoutTicks = 3
	c.Election.ResultTicks = 40
	c.Election.ChallengeTicks = 10
	c.Election.LeaseTicks = 30
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.ID < 1 {
		return fmt.Errorf("ring: node id %d < 1", c.ID)
	}
	if err := c.Token.Validate(); err != nil {
		return err
	}
	if c.Election.ID != c.ID {
		return fmt.Errorf("ring: election config is for node %d, not %d", c.Election.ID, c.ID)
	}
	if err := c.Election.Validate(); err != nil {
		return err
	}
	for name, v := range map[string]int{
		"HeartbeatTicks": c.HeartbeatTicks, "CoordHeartbeatTicks": c.CoordHeartbeatTicks, "FailTicks": c.FailTicks, "PredSilenceTicks": c.PredSilenceTicks,
		"RetryTicks": c.RetryTicks, "MaxRetryTicks": c.MaxRetryTicks, "StoreCheckRetries": c.StoreCheckRetries,
		"SuccessorRetries": c.SuccessorRetries, "LeaveRetries": c.LeaveRetries, "SyncTicks": c.SyncTicks,
		"AliveTicks": c.AliveTicks, "TroubleHoldTicks": c.TroubleHoldTicks,
		"UnheardTicks": c.UnheardTicks, "UnheardLinkTicks": c.UnheardLinkTicks,
	} {
		if v < 1 {
			return fmt.Errorf("ring: %s %d < 1", name, v)
		}
	}
	if c.PredSilenceTicks <= c.HeartbeatTicks {
		return fmt.Errorf("ring: PredSilenceTicks %d must exceed HeartbeatTicks %d", c.PredSilenceTicks, c.HeartbeatTicks)
	}
	if c.CoordHeartbeatTicks > c.HeartbeatTicks {
		return fmt.Errorf("ring: CoordHeartbeatTicks %d must not exceed HeartbeatTicks %d", c.CoordHeartbeatTicks, c.HeartbeatTicks)
	}
	if c.MaxRetryTicks < c.RetryTicks {
		return fmt.Errorf("ring: MaxRetryTicks %d < RetryTicks %d", c.MaxRetryTicks, c.RetryTicks)
	}
	return nil
}
