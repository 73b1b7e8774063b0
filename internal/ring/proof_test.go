package ring

import (
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/token"
)

// reportingMember is node 3 of the ring 1 -> 3 -> 4 -> 5 -> 1, coordinator
// 5 at epoch 2, with the secret of generation gen confirmed ("" : none).
func reportingMember(gen int64, secret string) *Machine {
	n := NewMachine(TestConfig(3))
	n.SetPeers([]int64{1, 3, 4, 5})
	n.phase, n.coord, n.epoch, n.members = PhaseInRing, 5, 2, []int64{1, 3, 4, 5}
	n.succ, n.succUp, n.ringPred = 4, true, 1
	if secret != "" {
		n.tok.Confirm(gen, secret)
	}
	return n
}

func hasReadFence(ops []Op) bool {
	return slices.ContainsFunc(ops, func(op Op) bool { return op.Kind == OpReadFence })
}

// TestRequestCarriesItsNodesProof: a node reporting its successor proves
// the report under the newest secret it has, naming itself, the successor
// and the path; one that has seen no token since it started sends it
// without a proof and reads the store's newest generation, so that its
// next try has one. A relay passes the proof on untouched.
func TestRequestCarriesItsNodesProof(t *testing.T) {
	n := reportingMember(7, "s7")
	n.SuccessorDown(4)
	r := n.Ready()
	i := slices.IndexFunc(r.Msgs, func(m Msg) bool { return m.Type == MsgSuccessorRequest })
	if i < 0 {
		t.Fatalf("no SUCCESSOR_REQUEST: %v", r.Msgs)
	}
	if m := r.Msgs[i]; m.Gen != 7 || m.Proof != token.ProveRequest("s7", 7, string(MsgSuccessorRequest), 3, 4, false) {
		t.Errorf("request proof gen %d %q, want generation 7's proof of node 3's report of 4", m.Gen, m.Proof)
	}
	if hasReadFence(r.Ops) {
		t.Error("a node with a secret read the fence for its request")
	}

	n = reportingMember(0, "")
	n.SuccessorDown(4)
	if r := n.Ready(); !hasReadFence(r.Ops) {
		t.Errorf("a node without a secret did not read the store's generation: %v", r.Ops)
	}

	relay := reportingMember(7, "s7")
	relay.Step(Msg{Type: MsgLeave, Via: ViaUDP, From: 4, To: 3, Epoch: 2, Relay: true, Gen: 6, Proof: "p"})
	r = relay.Ready()
	if len(r.Msgs) != 1 || r.Msgs[0].To != 5 || r.Msgs[0].For != 4 || r.Msgs[0].Gen != 6 || r.Msgs[0].Proof != "p" {
		t.Errorf("relayed: %+v, want the LEAVE for 4 to 5 with its proof", r.Msgs)
	}
}

// coordinatorWith is node 5, coordinator of the ring 1 -> 3 -> 4 -> 5 -> 1
// at epoch 2, with generation gen's secret confirmed ("" : none).
func coordinatorWith(gen int64, secret string) *Machine {
	n := reportingMember(gen, secret)
	n.id, n.cfg.ID = 5, 5
	n.isCoord, n.coord = true, 5
	n.succ, n.ringPred = 1, 4
	n.nextSync = 1000
	n.Ready()
	return n
}

func hasRepair(ops []Op, node, failed int64) bool {
	return slices.ContainsFunc(ops, func(op Op) bool { return op.Kind == OpRepair && op.Node == node && op.Failed == failed })
}

// TestCoordinatorActsOnProvenRequestsOnly: a report proven under the
// coordinator's generation, or one of the four before it, is acted on;
// without a proof, or with a proof of another node, another successor or
// another kind, it is dropped. A proof under a newer generation than the
// coordinator knows makes it read the store's. A coordinator that knows
// no generation (no token made yet) has nothing to check against.
func TestCoordinatorActsOnProvenRequestsOnly(t *testing.T) {
	report := func(gen int64, proof string) Msg {
		return Msg{Type: MsgSuccessorRequest, Via: ViaUDP, From: 3, To: 5, Epoch: 2, Failed: 4, Gen: gen, Proof: proof}
	}
	proof := func(secret string, gen int64, kind MsgType, from, failed int64) string {
		return token.ProveRequest(secret, gen, string(kind), from, failed, false)
	}
	for _, tc := range []struct {
		name  string
		m     Msg
		acted bool
	}{
		{"proven", report(9, proof("s9", 9, MsgSuccessorRequest, 3, 4)), true},
		{"proven under an older generation", report(8, proof("s8", 8, MsgSuccessorRequest, 3, 4)), true},
		{"no proof", report(0, ""), false},
		{"a guessed secret", report(9, proof("guess", 9, MsgSuccessorRequest, 3, 4)), false},
		{"another node's proof", report(9, proof("s9", 9, MsgSuccessorRequest, 1, 4)), false},
		{"another successor's proof", report(9, proof("s9", 9, MsgSuccessorRequest, 3, 1)), false},
		{"a LEAVE's proof", report(9, proof("s9", 9, MsgLeave, 3, 4)), false},
	} {
		n := coordinatorWith(8, "s8")
		n.tok.Confirm(9, "s9")
		n.Ready()
		n.Step(tc.m)
		if got := hasRepair(n.Ready().Ops, 3, 4); got != tc.acted {
			t.Errorf("%s: repaired %v, want %v", tc.name, got, tc.acted)
		}
	}

	n := coordinatorWith(8, "s8")
	n.Step(report(9, proof("s9", 9, MsgSuccessorRequest, 3, 4)))
	if r := n.Ready(); hasRepair(r.Ops, 3, 4) || !hasReadFence(r.Ops) {
		t.Errorf("a proof under a newer generation: %v, want no repair and a read of the store's generation", r.Ops)
	}

	// A flood of them: one read per RetryTicks (3 here), however many.
	n = coordinatorWith(8, "s8")
	reads := 0
	for i := range 9 {
		if i%3 == 0 && i > 0 {
			for range 3 {
				n.Tick()
			}
		}
		n.Step(report(9+int64(i), "forged"))
		for _, op := range n.Ready().Ops {
			if op.Kind == OpReadFence {
				reads++
			}
			n.StoreDone(Result{Op: op, Gen: 8, Secret: "s8"}) // every operation answers at once
		}
	}
	if reads != 3 {
		t.Errorf("%d store reads for 9 requests over 9 ticks, want 3", reads)
	}

	n = coordinatorWith(0, "")
	n.Step(report(0, ""))
	if !hasRepair(n.Ready().Ops, 3, 4) {
		t.Error("a coordinator without a generation dropped a request it cannot check")
	}
}
