package election

import "testing"

// leaseNode is a lease machine with LeaseTicks 30 (renew every 10),
// TimeoutTicks 2.
func leaseNode(t *testing.T) *Machine {
	t.Helper()
	m := New(testConfig(2, Lease))
	m.SetPeers([]int64{1, 2, 3})
	return m
}

func onlyOp(t *testing.T, rd Ready, kind LeaseOpKind) LeaseOp {
	t.Helper()
	if len(rd.LeaseOps) != 1 || rd.LeaseOps[0].Kind != kind || len(rd.Msgs) != 0 {
		t.Fatalf("want one lease op %d and no messages, got %+v", kind, rd)
	}
	return rd.LeaseOps[0]
}

// renewing is a lease node that acquired the lease of epoch at tick 0 and
// has just issued its first renewal (tick 10).
func renewing(t *testing.T, epoch int64) (*Machine, LeaseOp) {
	t.Helper()
	m := leaseNode(t)
	m.Start()
	m.LeaseDone(LeaseResult{Op: onlyOp(t, m.Ready(), LeaseAcquire), OK: true, Holder: 2, Epoch: epoch, RemainingTicks: 30})
	m.Ready()
	m.AdvanceTo(10)
	return m, onlyOp(t, m.Ready(), LeaseRenew)
}

func TestLeaseAcquireRenewValidity(t *testing.T) {
	m := leaseNode(t)
	m.Start()
	op := onlyOp(t, m.Ready(), LeaseAcquire)
	if !m.Electing() || m.Holding() {
		t.Fatal("acquiring: want electing, not holding")
	}
	m.Start() // one op in flight: no second Acquire
	if rd := m.Ready(); len(rd.LeaseOps) != 0 {
		t.Fatalf("second Start issued %+v", rd.LeaseOps)
	}
	m.AdvanceTo(5) // the answer takes 5 ticks: validity counts from the issue (tick 0)
	m.LeaseDone(LeaseResult{Op: op, OK: true, Holder: 2, Epoch: 7, RemainingTicks: 30})
	rd := m.Ready()
	if !rd.LeaseWon || rd.LeaseEpoch != 7 || !m.Holding() || m.Electing() || len(rd.Reports) != 1 || !rd.Reports[0].Won {
		t.Fatalf("after Acquire OK: %+v holding %v", rd, m.Holding())
	}
	m.AdvanceTo(9)
	if rd := m.Ready(); !rd.Empty() {
		t.Fatalf("before the renew time: %+v", rd)
	}
	m.AdvanceTo(10) // LeaseTicks/3 after the issue
	renew := onlyOp(t, m.Ready(), LeaseRenew)
	if renew.Epoch != 7 {
		t.Fatalf("renew of epoch %d, want 7", renew.Epoch)
	}
	m.AdvanceTo(12)
	m.LeaseDone(LeaseResult{Op: renew, OK: true, Holder: 2, Epoch: 7, RemainingTicks: 30})
	// Valid until 10+30 = 40; renews at 20 and 30 go unanswered (the store
	// is unreachable: Failed) and are retried every TimeoutTicks.
	for now := int64(13); now < 40; now++ {
		m.Tick()
		for _, op := range m.Ready().LeaseOps {
			m.LeaseDone(LeaseResult{Op: op, Failed: true})
		}
		if !m.Holding() {
			t.Fatalf("lost the lease at %d, valid until 40", m.Now())
		}
	}
	m.Tick()
	rd = m.Ready()
	if m.Holding() || !rd.LeaseLost {
		t.Fatalf("at 40: holding %v, %+v; want LeaseLost", m.Holding(), rd)
	}
}

func TestLeaseRenewTaken(t *testing.T) {
	m, renew := renewing(t, 1)
	m.LeaseDone(LeaseResult{Op: renew, Holder: 3, Epoch: 2, RemainingTicks: 30})
	if rd := m.Ready(); !rd.LeaseLost || m.Holding() {
		t.Fatalf("renew refused: %+v, holding %v", rd, m.Holding())
	}
	m.AdvanceTo(200)
	if rd := m.Ready(); len(rd.LeaseOps) != 0 {
		t.Fatalf("lost lease still renewed: %+v", rd.LeaseOps)
	}
}

func TestLeaseAcquireRefusedRetriesWhenItRunsOut(t *testing.T) {
	m := leaseNode(t)
	m.Observe(3, 4) // the holder, known before the election
	m.Start()
	op := onlyOp(t, m.Ready(), LeaseAcquire)
	m.AdvanceTo(2)
	m.LeaseDone(LeaseResult{Op: op, Holder: 3, Epoch: 4, RemainingTicks: 12})
	m.AdvanceTo(14)
	if rd := m.Ready(); len(rd.LeaseOps) != 0 || !m.Electing() {
		t.Fatalf("retried before the lease ran out: %+v", rd)
	}
	m.AdvanceTo(15) // 2 + 12 + 1
	op = onlyOp(t, m.Ready(), LeaseAcquire)
	m.LeaseDone(LeaseResult{Op: op, Failed: true}) // store unreachable: again after TimeoutTicks
	m.AdvanceTo(16)
	if rd := m.Ready(); len(rd.LeaseOps) != 0 {
		t.Fatalf("retried at once after a failure: %+v", rd)
	}
	m.AdvanceTo(17)
	op = onlyOp(t, m.Ready(), LeaseAcquire)
	// Someone newer than the holder we knew got it: the election is over.
	m.LeaseDone(LeaseResult{Op: op, Holder: 1, Epoch: 5, RemainingTicks: 30})
	rd := m.Ready()
	if m.Electing() || len(rd.Reports) != 1 || rd.Reports[0].Leader != 1 {
		t.Fatalf("newer holder: electing %v, %+v", m.Electing(), rd)
	}
	m.AdvanceTo(500)
	if rd := m.Ready(); len(rd.LeaseOps) != 0 {
		t.Fatalf("kept acquiring: %+v", rd.LeaseOps)
	}
}

func TestLeaseObserveStopsAcquiring(t *testing.T) {
	m := leaseNode(t)
	m.Start()
	op := onlyOp(t, m.Ready(), LeaseAcquire)
	m.Observe(3, 1)
	if m.Electing() {
		t.Fatal("still acquiring after a coordinator was observed")
	}
	m.LeaseDone(LeaseResult{Op: op, Holder: 3, Epoch: 1, RemainingTicks: 30})
	m.AdvanceTo(500)
	if rd := m.Ready(); len(rd.LeaseOps) != 0 {
		t.Fatalf("acquiring: %+v", rd.LeaseOps)
	}
}

func TestLeaseResign(t *testing.T) {
	m := leaseNode(t)
	m.Start()
	m.LeaseDone(LeaseResult{Op: onlyOp(t, m.Ready(), LeaseAcquire), OK: true, Holder: 2, Epoch: 1, RemainingTicks: 30})
	m.Ready()
	m.Resign()
	if rd := m.Ready(); !rd.LeaseLost || m.Holding() {
		t.Fatalf("resign: %+v", rd)
	}
	m.Start()
	m.AdvanceTo(500)
	if rd := m.Ready(); !rd.Empty() {
		t.Fatalf("resigned node acts: %+v", rd)
	}
}

// A lease node never challenges a lower coordinator (the store decides).
func TestLeaseNoChallenge(t *testing.T) {
	m := leaseNode(t)
	m.Observe(1, 1)
	m.AdvanceTo(1000)
	if rd := m.Ready(); !rd.Empty() || m.Counters().Started != 0 {
		t.Fatalf("lease node started an election: %+v", rd)
	}
}

// A holder whose renewal is answered too late (a slow store) loses the
// lease locally, but the store may well have renewed it: the others see a
// live coordinator and never try. So the node asks for the lease again as
// soon as its renewal is done with, and holds it again if granted.
func TestLeaseLostLocallyAsksAgain(t *testing.T) {
	m, renew := renewing(t, 4) // not answered before the validity ends at 30
	m.AdvanceTo(30)
	rd := m.Ready()
	if m.Holding() || !rd.LeaseLost || len(rd.LeaseOps) != 0 {
		t.Fatalf("at 30: holding %v, %+v; want LeaseLost and nothing issued while the renewal is in flight", m.Holding(), rd)
	}
	m.LeaseDone(LeaseResult{Op: renew, OK: true, Holder: 2, Epoch: 4, RemainingTicks: 30}) // the late answer
	m.Tick()
	acquire := onlyOp(t, m.Ready(), LeaseAcquire)
	m.LeaseDone(LeaseResult{Op: acquire, OK: true, Holder: 2, Epoch: 4, RemainingTicks: 30})
	if rd := m.Ready(); !rd.LeaseWon || rd.LeaseEpoch != 4 || !m.Holding() {
		t.Fatalf("after asking again: %+v, holding %v", rd, m.Holding())
	}
}

// The same with the renewal never answered: once it times out the node asks
// for the lease, not for a renewal of the one it lost.
func TestLeaseLostLocallyRenewalTimesOut(t *testing.T) {
	m, _ := renewing(t, 4) // the renewal is lost for good
	m.AdvanceTo(30)
	if rd := m.Ready(); !rd.LeaseLost {
		t.Fatalf("at 30: %+v; want LeaseLost", rd)
	}
	m.AdvanceTo(40) // the renewal's timeout (LeaseTicks after its issue)
	onlyOp(t, m.Ready(), LeaseAcquire)
}
