package ring

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAvoidedLinksOrderIsFullyDetermined: the links a coordinator avoids
// (Op.Avoid, whose order PlanJoinAvoiding goes by) come oldest failure
// first and, among links that failed at the same tick, in the order of
// their pairs: the lower first node first, then the lower second node.
// Nothing is left to the map's order, so the same run places a joining
// node the same way every time.
func TestAvoidedLinksOrderIsFullyDetermined(t *testing.T) {
	n := NewMachine(TestConfig(9))
	n.now = 10
	n.avoidLink(6, 3) // failed at tick 10: the oldest
	n.now = 20
	// Failed at the same tick, given in no particular order.
	n.avoidLink(5, 1)
	n.avoidLink(4, 2)
	n.avoidLink(1, 4)
	n.avoidLink(2, 3) // again: now at tick 20 too
	n.avoidLink(7, 1)
	n.linkFailed(6, 1) // once only: not avoided
	want := [][2]int64{{3, 6}, {1, 4}, {1, 5}, {1, 7}, {2, 3}, {2, 4}}
	for range 20 { // the map's order changes from call to call
		if got := n.AvoidedLinks(); !cmp.Equal(got, want) {
			t.Fatalf("avoided links %v, want %v", got, want)
		}
	}
	n.now = 20 + linkMemoryTicks + 1 // the failures at tick 20 are forgotten
	if got := n.AvoidedLinks(); len(got) != 0 {
		t.Fatalf("avoided links %v after linkMemoryTicks, want none", got)
	}
}
