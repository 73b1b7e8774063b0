package election

import (
	"slices"
	"testing"
)

func ringNode(id int64, meth Method) *Machine {
	m := New(testConfig(id, meth))
	m.SetPeers([]int64{1, 2, 3, 4, 5})
	return m
}

// A node that observes a lower coordinator than itself starts an election
// after ChallengeTicks (how a joining higher node takes over); a
// coordinator at least its own id disarms the timer.
func TestChallenge(t *testing.T) {
	for _, meth := range []Method{Ring, ChangRoberts, Bully} {
		m := ringNode(4, meth)
		m.Observe(3, 1)
		if got, want := m.NextDeadline(), int64(testConfig(4, meth).ChallengeTicks); got != want {
			t.Fatalf("%s: next deadline %d, want the challenge at %d", meth, got, want)
		}
		m.AdvanceTo(want(meth) - 1)
		if rd := m.Ready(); !rd.Empty() {
			t.Fatalf("%s: acted before the challenge: %+v", meth, rd)
		}
		m.AdvanceTo(want(meth))
		if rd := m.Ready(); len(rd.Msgs) == 0 || rd.Msgs[0].Kind != KindElection || m.Counters().Started != 1 {
			t.Fatalf("%s: challenge sent %+v, started %d", meth, rd.Msgs, m.Counters().Started)
		}

		m = ringNode(4, meth)
		m.Observe(3, 1)
		m.Observe(5, 2)
		m.AdvanceTo(1000)
		if rd := m.Ready(); !rd.Empty() || m.Counters().Started != 0 {
			t.Fatalf("%s: challenged a higher coordinator: %+v", meth, rd)
		}
	}
}

func want(meth Method) int64 { return int64(testConfig(1, meth).ChallengeTicks) }

// A participant that sees no result within ResultTicks starts again.
func TestResultTimeoutRestarts(t *testing.T) {
	m := ringNode(3, Ring)
	m.Step(Msg{From: 2, Method: Ring, Kind: KindElection, Round: Round{Initiator: 2, N: 1}, Seq: 1, Cands: []int64{2}})
	m.Step(Msg{From: 4, Method: Ring, Kind: KindAck, Round: Round{Initiator: 2, N: 1}, Seq: 1})
	m.Ready()
	if !m.Electing() {
		t.Fatal("a forwarding node is not electing")
	}
	m.AdvanceTo(int64(testConfig(3, Ring).ResultTicks) - 1)
	if rd := m.Ready(); !rd.Empty() {
		t.Fatalf("acted early: %+v", rd)
	}
	m.AdvanceTo(int64(testConfig(3, Ring).ResultTicks))
	rd := m.Ready()
	if m.Counters().Restarts != 1 || len(rd.Msgs) != 1 || rd.Msgs[0].Round.Initiator != 3 || !slices.Equal(rd.Msgs[0].Cands, []int64{3}) {
		t.Fatalf("restart: %+v, counters %+v", rd.Msgs, m.Counters())
	}
}

// ELECTED names the winner (a report) but the node waits until it
// observes that coordinator; an observation of the coordinator it already
// knew when it started does not end an election it started because that
// one failed.
func TestObserveEndsWaiting(t *testing.T) {
	m := ringNode(3, ChangRoberts)
	m.Step(Msg{From: 2, Method: ChangRoberts, Kind: KindElected, Round: Round{Initiator: 5, N: 1}, Seq: 9, Leader: 5, Cands: []int64{5}})
	rd := m.Ready()
	if len(rd.Reports) != 1 || rd.Reports[0].Leader != 5 || rd.Reports[0].Won || !m.Electing() {
		t.Fatalf("ELECTED: %+v electing %v", rd, m.Electing())
	}
	if len(rd.Msgs) != 2 || rd.Msgs[1].Kind != KindElected || rd.Msgs[1].To != 4 {
		t.Fatalf("ELECTED not acked and forwarded: %+v", rd.Msgs)
	}
	m.Observe(5, 1)
	if m.Electing() {
		t.Fatal("still electing after observing the announced leader")
	}

	m = ringNode(3, Bully)
	m.Observe(5, 1)
	m.Start() // the host believes 5 failed
	m.Observe(5, 1)
	if !m.Electing() {
		t.Fatal("the failed coordinator's old epoch ended the election")
	}
	m.Observe(4, 2)
	if m.Electing() {
		t.Fatal("a newer coordinator above this node did not end the election")
	}
}

func TestBullyTimeouts(t *testing.T) {
	cfg := testConfig(3, Bully)
	// No OK: resend, then win after Retries sends.
	m := ringNode(3, Bully)
	m.Start()
	if rd := m.Ready(); len(rd.Msgs) != 2 || rd.Msgs[0].To != 4 || rd.Msgs[1].To != 5 {
		t.Fatalf("Start: %+v", rd.Msgs)
	}
	m.AdvanceTo(int64(cfg.TimeoutTicks))
	if rd := m.Ready(); len(rd.Msgs) != 2 || rd.Win {
		t.Fatalf("first timeout: %+v", rd)
	}
	m.AdvanceTo(int64(cfg.Retries * cfg.TimeoutTicks))
	if rd := m.Ready(); !rd.Win {
		t.Fatalf("no OK after %d sends: %+v, want Win", cfg.Retries, rd)
	}
	m.Claimed(1)
	rd := m.Ready()
	if len(rd.Msgs) != 4 || len(rd.Reports) != 1 || !rd.Reports[0].Won || m.Counters().Won != 1 {
		t.Fatalf("Claimed: %+v", rd)
	}
	for _, msg := range rd.Msgs {
		if msg.Kind != KindElected || msg.Leader != 3 {
			t.Fatalf("announcement %+v", msg)
		}
	}

	// An OK, then no ELECTED: start again after ResultTicks.
	m = ringNode(3, Bully)
	m.Start()
	r := m.Ready().Msgs[0].Round
	m.Step(Msg{From: 5, Method: Bully, Kind: KindOK, Round: r})
	m.AdvanceTo(int64(cfg.ResultTicks) - 1)
	if rd := m.Ready(); !rd.Empty() {
		t.Fatalf("waiting for ELECTED: %+v", rd)
	}
	m.AdvanceTo(int64(cfg.ResultTicks))
	if rd := m.Ready(); len(rd.Msgs) != 2 || m.Counters().Restarts != 1 || rd.Msgs[0].Round == r {
		t.Fatalf("no ELECTED: %+v restarts %d", rd.Msgs, m.Counters().Restarts)
	}
}

func TestClaimLost(t *testing.T) {
	m := ringNode(5, Bully)
	m.Start()
	if !m.Ready().Win {
		t.Fatal("highest node did not win")
	}
	m.ClaimLost(2, 3) // a lower node holds epoch 3: the host retries
	if !m.Electing() {
		t.Fatal("a claim lost to a lower node ended the election")
	}
	m.Claimed(4)
	if rd := m.Ready(); len(rd.Msgs) != 4 || m.Electing() {
		t.Fatalf("Claimed after a retry: %+v", rd)
	}

	m = ringNode(4, Bully)
	m.Step(Msg{From: 1, Method: Bully, Kind: KindElection, Round: Round{Initiator: 1, N: 1}})
	m.Step(Msg{From: 5, Method: Bully, Kind: KindOK, Round: Round{Initiator: 4, N: 1}})
	m.ClaimLost(5, 2)
	if m.Electing() {
		t.Fatal("a claim lost to a higher node did not end the election")
	}
}

// Reports say who won, how many took part and what this node sent.
func TestReports(t *testing.T) {
	c := newCluster(t, Ring, seq(5)...)
	c.ms[2].Start()
	c.deliver(1000)
	c.agreed()
	for _, id := range c.ids {
		rs := c.reports[id]
		if len(rs) != 1 {
			t.Fatalf("node %d: reports %+v", id, rs)
		}
		r := rs[0]
		if r.Leader != 5 || r.Won != (id == 5) || r.Participants != 5 || r.Method != Ring || r.Round != (Round{Initiator: 2, N: 1}) {
			t.Errorf("node %d: %+v", id, r)
		}
		if r.MsgsSent < 1 || r.MsgsSent > 4 {
			t.Errorf("node %d sent %d messages in the round", id, r.MsgsSent)
		}
	}
	cs := c.ms[5].Counters()
	if cs.Won != 1 || cs.Sent[Ring] == 0 || cs.Received[Ring] == 0 {
		t.Errorf("counters %+v", cs)
	}
	cs.Sent[Ring] = 1 << 40 // a copy
	if c.ms[5].Counters().Sent[Ring] == 1<<40 {
		t.Error("Counters returned the machine's own map")
	}
}

// A node that resigned neither answers nor forwards; others skip it.
func TestResignedNodeIsSkipped(t *testing.T) {
	c := newCluster(t, ChangRoberts, seq(5)...)
	c.ms[3].Resign()
	c.down[3] = false
	c.ms[1].Start()
	c.deliver(2000)
	if c.coord != 5 {
		t.Fatalf("coordinator %d, want 5", c.coord)
	}
	if n := c.ms[3].Counters().Sent[ChangRoberts]; n != 0 {
		t.Fatalf("resigned node sent %d messages", n)
	}
}
