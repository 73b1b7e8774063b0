package ring

import (
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/election"
)

// silentSuccessorNode is coordinator 4 of the ring 4 -> 1 -> 2 -> 3 -> 4
// at epoch 3, just after it took the role over: its sync sent node 1 its
// successor at tick 100, and its own link to node 1 went down at tick 102
// (a split: node 1 is cut off from it).
func silentSuccessorNode(coord bool) *Machine {
	cfg := TestConfig(4)
	cfg.Election = election.DefaultConfig(4, election.Lease)
	n := NewMachine(cfg)
	n.SetPeers([]int64{1, 2, 3, 4})
	n.phase, n.coord, n.epoch, n.isCoord = PhaseInRing, 4, 3, coord
	n.members = []int64{1, 2, 3, 4}
	n.succ, n.ringPred = 1, 3
	n.nextSync = 1000 // no sync ahead of the repair
	n.now = 100
	n.sendSuccessor(1, 2)
	n.now = 102
	n.downSince = 102
	n.Ready()
	return n
}

// repairedAt ticks n until it asks the store to take its successor out,
// and returns that tick (0: not by limit).
func repairedAt(t *testing.T, n *Machine, limit int64) int64 {
	t.Helper()
	for n.now < limit {
		n.Tick()
		for _, op := range n.Ready().Ops {
			if op.Kind == OpRepair && op.Failed == 1 {
				return n.now
			}
		}
	}
	return 0
}

// TestSilentSuccessorGivenUpBeforeTheWatchdog: a coordinator whose
// successor answered none of this term's assignments for UnheardTicks
// (12 here) and whose link to it has not come up in UnheardLinkTicks (2)
// takes it out then, not at the watchdog (twice FailTicks, 16 after the
// link went down): the first tick past both is 113. Heard from in any
// frame, the successor keeps the full watchdog (a node at a heal answers
// at once, its link held back by a store operation). A node that is not
// coordinator has no such witness: the full watchdog too. NextDeadline
// wakes a sleeping coordinator for it.
func TestSilentSuccessorGivenUpBeforeTheWatchdog(t *testing.T) {
	n := silentSuccessorNode(true)
	if at := repairedAt(t, n, 130); at != 113 {
		t.Errorf("silent successor taken out at tick %d, want 113", at)
	}
	asleep := silentSuccessorNode(true) // a runtime that sleeps to the next deadline
	asleep.AdvanceTo(113)
	if !slices.ContainsFunc(asleep.Ready().Ops, func(op Op) bool { return op.Kind == OpRepair && op.Failed == 1 }) {
		t.Error("a coordinator asleep until its next deadline did not take the silent successor out at tick 113")
	}

	heard := silentSuccessorNode(true)
	heard.Step(Msg{Type: MsgSuccessorAck, Via: ViaUDP, From: 1, To: 4, Epoch: 3, Ver: 99})
	if at := repairedAt(t, heard, 130); at != 119 {
		t.Errorf("successor heard from taken out at tick %d, want 119 (the watchdog)", at)
	}

	member := silentSuccessorNode(false)
	member.coord = 3
	var reported int64
	for member.now < 130 && reported == 0 {
		member.Tick()
		for _, m := range member.Ready().Msgs {
			if m.Type == MsgSuccessorRequest && m.Failed == 1 {
				reported = member.now
			}
		}
	}
	if reported != 119 {
		t.Errorf("a member reported its successor at tick %d, want 119 (the watchdog)", reported)
	}
}

// TestSilenceEndsWithTheTerm: the record of who answered is the term's
// own: a coordinator deposed and elected again starts a new one, and a
// successor whose link came up is heard from.
func TestSilenceEndsWithTheTerm(t *testing.T) {
	n := silentSuccessorNode(true)
	n.stepDown()
	if len(n.unheard) != 0 {
		t.Errorf("unheard after stepping down: %v", n.unheard)
	}
	n = silentSuccessorNode(true)
	n.SuccessorUp(1)
	if _, ok := n.unheard[1]; ok {
		t.Error("successor still unheard after its link came up")
	}
}
