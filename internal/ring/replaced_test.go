package ring

import "testing"

// TestOnlyTheCoordinatorRelinksAReplacedLink: while the store fails, a
// coordinator whose successor closed its link as replaced (a stranger's
// HELLO in its name) links to it again: nobody else places nodes, so its
// successor is still the one it placed. A member whose link was replaced
// does not: the coordinator has placed another node before its successor,
// and linking again would take that node's link from it; the member waits
// for its SUCCESSOR (or the store). A member whose link works keeps it
// through a store failure.
func TestOnlyTheCoordinatorRelinksAReplacedLink(t *testing.T) {
	for _, tc := range []struct {
		name     string
		coord    bool
		replaced bool
		relink   bool
	}{
		{"coordinator, link replaced", true, true, true},
		{"member, link replaced", false, true, false},
		{"member, link up", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NewMachine(TestConfig(3))
			n.SetPeers([]int64{1, 3, 5})
			n.phase, n.coord, n.epoch, n.isCoord = PhaseInRing, 1, 2, tc.coord
			if tc.coord {
				n.coord = 3
			}
			n.succ, n.succUp, n.ringPred = 5, true, 1
			n.now = 100
			if tc.replaced {
				n.SuccessorReplaced(5)
			} else {
				n.checkJoins = n.joins
				n.enqueue(Op{Kind: OpCheckMember})
			}
			ops := n.Ready().Ops
			if len(ops) == 0 {
				t.Fatal("no store operation to fail")
			}
			n.StoreDone(Result{Op: ops[0], Outcome: Failed})
			r := n.Ready()
			switch {
			case tc.relink && (r.Connect == nil || *r.Connect != 5):
				t.Errorf("the store failing, the node does not link to its successor 5 again (connect %v)", r.Connect)
			case !tc.relink && r.Connect != nil:
				t.Errorf("the store failing, the node dials %d", *r.Connect)
			}
		})
	}
}
