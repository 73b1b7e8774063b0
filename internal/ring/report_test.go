package ring

import "testing"

// reportingNode is node 2 of a ring 1 -> 2 -> 3 -> 4 -> 1 whose
// coordinator is 4 at epoch 3: its successor 3 failed and it asked for
// another, straight to the coordinator or (relay) through another node.
func reportingNode(t *testing.T, relay bool) *Machine {
	t.Helper()
	n := NewMachine(TestConfig(2))
	n.SetPeers([]int64{1, 2, 3, 4})
	n.phase, n.coord, n.epoch, n.members = PhaseInRing, 4, 3, []int64{1, 2, 3, 4}
	n.succ, n.succUp, n.ringPred, n.relay = 3, true, 1, relay
	n.SuccessorDown(3)
	n.Ready()
	if n.req == nil || n.req.failed != 3 {
		t.Fatal("no request for a successor after 3 failed")
	}
	return n
}

// sentReport reports whether r holds a SUCCESSOR_REQUEST naming 3 failed.
func sentReport(r Ready) bool {
	for _, m := range r.Msgs {
		if m.Type == MsgSuccessorRequest && m.Failed == 3 {
			return true
		}
	}
	return false
}

// TestReportStandsAgainstAnAssignmentThatIsNoAnswer: node 2 reported its
// successor 3 failed through a relay (its coordinator out of reach), and
// the coordinator of epoch 3 names 3 again (its sync): the report goes
// again at once and stays pending, while the node dials 3; the link
// coming up withdraws it. The same assignment after the report went
// straight to that coordinator is its answer: the report ends (a reporter
// judged the lossy one is placed again, and reports no more).
func TestReportStandsAgainstAnAssignmentThatIsNoAnswer(t *testing.T) {
	n := reportingNode(t, true)
	n.applySuccessor(3, 3, 9)
	if !sentReport(n.Ready()) {
		t.Fatal("the coordinator has not had the report: want it sent again at once")
	}
	if n.req == nil || n.failedSucc != 3 {
		t.Fatalf("the report was dropped (req %+v, failed %d)", n.req, n.failedSucc)
	}
	n.SuccessorUp(3)
	if n.req != nil || n.failedSucc != 0 {
		t.Fatalf("the link to 3 came up: want the report withdrawn (req %+v, failed %d)", n.req, n.failedSucc)
	}

	n = reportingNode(t, false) // sent straight to the coordinator of epoch 3
	n.applySuccessor(3, 3, 9)
	if sentReport(n.Ready()) || n.req != nil || n.failedSucc != 0 {
		t.Fatalf("the coordinator's answer names 3: want the report ended (req %+v, failed %d)", n.req, n.failedSucc)
	}

	n = reportingNode(t, false)
	n.applySuccessor(3, 4, 1) // a newer coordinator's sync, which had no report
	if !sentReport(n.Ready()) || n.req == nil {
		t.Fatal("a newer coordinator names 3: want the report sent again")
	}
}
