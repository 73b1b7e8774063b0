package election

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The doc comment of Machine states the fault-free message counts; these
// tests hold the code to them for every initiator.

func TestRingMessageCount(t *testing.T) {
	for n := 1; n <= 16; n++ {
		for init := int64(1); init <= int64(n); init++ {
			c := newCluster(t, Ring, seq(n)...)
			c.ms[init].Start()
			c.deliver(1000)
			c.agreed()
			want := 2*n - 1
			if n == 1 {
				want = 0
			}
			el, ed, ack := c.count(Ring, KindElection), c.count(Ring, KindElected), c.count(Ring, KindAck)
			if el+ed != want || ack != want || (n > 1 && el != n) {
				t.Errorf("n=%d initiator %d: %d ELECTION + %d ELECTED, %d ACK; want %d and %d ACK", n, init, el, ed, ack, want, want)
			}
		}
	}
}

func TestRingAllInitiateMessageCount(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8, 16} {
		c := newCluster(t, Ring, seq(n)...)
		for _, id := range c.ids {
			c.ms[id].Start()
		}
		c.deliver(1000)
		c.agreed()
		if el, ed := c.count(Ring, KindElection), c.count(Ring, KindElected); el != n*n || ed != n*(n-1) {
			t.Errorf("n=%d: %d ELECTION, %d ELECTED; want %d, %d", n, el, ed, n*n, n*(n-1))
		}
		if c.epoch != 1 {
			t.Errorf("n=%d: %d claims, want 1", n, c.epoch)
		}
	}
}

func TestChangRobertsMessageCount(t *testing.T) {
	for n := 1; n <= 16; n++ {
		for r := range n {
			c := newCluster(t, ChangRoberts, seq(n)...)
			c.ms[int64(r+1)].Start()
			c.deliver(1000)
			c.agreed()
			el, ed, ack := c.count(ChangRoberts, KindElection), c.count(ChangRoberts, KindElected), c.count(ChangRoberts, KindAck)
			wantEl, wantEd := 2*n-1-r, n-1
			if n == 1 {
				wantEl, wantEd = 0, 0
			}
			if el != wantEl || ed != wantEd || ack != el+ed {
				t.Errorf("n=%d rank %d: %d ELECTION %d ELECTED %d ACK; want %d, %d, %d", n, r, el, ed, ack, wantEl, wantEd, wantEl+wantEd)
			}
		}
	}
}

// Concurrent initiators: extinction across rounds keeps the ELECTION count
// within n(n+1)/2 whatever the order of delivery, and all agree.
func TestChangRobertsConcurrent(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8, 16} {
		for s := range uint64(20) {
			c := newCluster(t, ChangRoberts, seq(n)...)
			if s > 0 {
				c.rng = rand.New(rand.NewPCG(s, uint64(n)))
			}
			for _, id := range c.ids {
				c.ms[id].Start()
			}
			c.deliver(1000)
			c.agreed()
			el := c.count(ChangRoberts, KindElection)
			if el > n*(n+1)/2 {
				t.Errorf("n=%d seed %d: %d ELECTION > n(n+1)/2 = %d", n, s, el, n*(n+1)/2)
			}
			if s == 0 && el != 2*n-1 {
				t.Errorf("n=%d simultaneous, in order: %d ELECTION, want 2n-1 = %d", n, el, 2*n-1)
			}
			if c.epoch != 1 {
				t.Errorf("n=%d seed %d: %d claims, want 1", n, s, c.epoch)
			}
		}
	}
}

func TestBullyMessageCount(t *testing.T) {
	for n := 1; n <= 16; n++ {
		for r := range n {
			c := newCluster(t, Bully, seq(n)...)
			c.ms[int64(r+1)].Start()
			c.deliver(1000)
			c.agreed()
			m := n - r
			el, ok, ed := c.count(Bully, KindElection), c.count(Bully, KindOK), c.count(Bully, KindElected)
			if el != m*(m-1)/2 || ok != el || ed < n-1 || ed > max(2*n-3, n-1) {
				t.Errorf("n=%d rank %d: %d ELECTION %d OK %d ELECTED; want %d, %d, n-1..2n-3", n, r, el, ok, ed, m*(m-1)/2, m*(m-1)/2)
			}
		}
	}
}

// The reference's bully did not answer ELECTION while it was electing
// itself; ours always answers.
func TestBullyAnswersOKWhileElecting(t *testing.T) {
	m := New(testConfig(2, Bully))
	m.SetPeers([]int64{1, 2, 3})
	m.Start()
	rd := m.Ready()
	if !m.Electing() || len(rd.Msgs) != 1 || rd.Msgs[0].To != 3 || rd.Msgs[0].Kind != KindElection {
		t.Fatalf("Start: electing %v, msgs %+v", m.Electing(), rd.Msgs)
	}
	for range 2 { // also a second time (a duplicate or a new round)
		m.Step(Msg{From: 1, Method: Bully, Kind: KindElection, Round: Round{Initiator: 1, N: 1}})
		rd = m.Ready()
		if len(rd.Msgs) != 1 || rd.Msgs[0].Kind != KindOK || rd.Msgs[0].To != 1 {
			t.Fatalf("ELECTION while electing: sent %+v, want one OK to 1", rd.Msgs)
		}
	}
	// While waiting for its claim (the highest node), too.
	top := New(testConfig(3, Bully))
	top.SetPeers([]int64{1, 2, 3})
	top.Start()
	if rd := top.Ready(); !rd.Win {
		t.Fatal("highest node did not win at once")
	}
	top.Step(Msg{From: 2, Method: Bully, Kind: KindElection, Round: Round{Initiator: 2, N: 1}})
	if rd := top.Ready(); len(rd.Msgs) != 1 || rd.Msgs[0].Kind != KindOK || rd.Win {
		t.Fatalf("ELECTION while claiming: %+v", rd)
	}
	top.Resign()
	top.Step(Msg{From: 2, Method: Bully, Kind: KindElection, Round: Round{Initiator: 2, N: 2}})
	if rd := top.Ready(); !rd.Empty() {
		t.Fatalf("a resigned node answered: %+v", rd)
	}
}

// A ring election whose initiator dies after its first hop completes at
// another node, and no message circulates for ever.
func TestRingInitiatorDies(t *testing.T) {
	for _, tc := range []struct {
		name      string
		initiator int64
		want      int64
	}{{"lowest initiator", 1, 5}, {"highest initiator", 5, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, Ring, seq(5)...)
			c.ms[tc.initiator].Start()
			c.collect()
			first := c.queue[0]
			c.queue = nil
			c.ms[first.To].Step(first) // the first hop arrives, then the initiator dies
			c.down[tc.initiator] = true
			c.deliver(2000)
			c.agreed()
			if c.coord != tc.want {
				t.Fatalf("coordinator %d, want %d", c.coord, tc.want)
			}
			total := 0
			for _, k := range []Kind{KindElection, KindElected} {
				total += c.count(Ring, k)
			}
			// One circle less the dead node, its resends, an announcement
			// and (when the dead node had been named winner) one new round.
			if limit := 4 * 5 * testConfig(1, Ring).Retries; total > limit {
				t.Fatalf("%d ring messages, want at most %d", total, limit)
			}
			for _, id := range c.ids {
				if !c.down[id] && c.ms[id].NextDeadline() != 1<<63-1 {
					t.Fatalf("node %d still busy", id)
				}
			}
		})
	}
}

// A hop whose ACK is lost is resent with the same Seq; the receiver acks
// the duplicate again but forwards the list only once. After Retries sends
// without an ACK the addressee is skipped.
func TestRingHopResendAndDedup(t *testing.T) {
	a, b := New(testConfig(2, Ring)), New(testConfig(3, Ring))
	for _, m := range []*Machine{a, b} {
		m.SetPeers([]int64{1, 2, 3, 4})
	}
	a.Start()
	first := a.Ready().Msgs
	if len(first) != 1 || first[0].To != 3 || first[0].Kind != KindElection {
		t.Fatalf("Start sent %+v", first)
	}
	a.AdvanceTo(a.Now() + int64(testConfig(2, Ring).TimeoutTicks)) // no ACK: resend
	again := a.Ready().Msgs
	if len(again) != 1 || again[0].Seq != first[0].Seq || again[0].To != 3 {
		t.Fatalf("resend: %+v, want the same hop again", again)
	}
	var forwards, acks int
	for _, msg := range []Msg{first[0], again[0]} {
		b.Step(msg)
		for _, out := range b.Ready().Msgs {
			switch {
			case out.Kind == KindAck && out.To == 2 && out.Seq == msg.Seq:
				acks++
			case out.Kind == KindElection && out.To == 4:
				forwards++
				if want := []int64{2, 3}; fmt.Sprint(out.Cands) != fmt.Sprint(want) {
					t.Errorf("forwarded list %v, want %v", out.Cands, want)
				}
			}
		}
	}
	if acks != 2 || forwards != 1 {
		t.Fatalf("%d acks, %d forwards; want 2 and 1", acks, forwards)
	}
	// Retries sends in all, then node 3 is skipped: the list goes to 4.
	a.AdvanceTo(a.Now() + int64(testConfig(2, Ring).TimeoutTicks))
	skip := a.Ready().Msgs
	if len(skip) != 1 || skip[0].To != 4 || fmt.Sprint(skip[0].Cands) != "[2]" {
		t.Fatalf("after %d sends: %+v, want the list to node 4", testConfig(2, Ring).Retries, skip)
	}
}

// A Chang–Roberts candidacy whose candidate dies is taken over by the node
// that cannot reach it, instead of circulating for ever.
func TestChangRobertsCandidateDies(t *testing.T) {
	c := newCluster(t, ChangRoberts, seq(5)...)
	c.ms[5].Start()
	c.collect()
	first := c.queue[0] // 5 → 1, candidate 5
	c.queue = nil
	c.down[5] = true
	c.ms[first.To].Step(first)
	c.deliver(2000)
	c.agreed()
	if c.coord != 4 {
		t.Fatalf("coordinator %d, want 4", c.coord)
	}
	// 1→2→3→4 and 4's failed sends to 5, then candidate 4 round the four
	// live nodes and its announcement.
	el, ed := c.count(ChangRoberts, KindElection), c.count(ChangRoberts, KindElected)
	if want := 1 + 3 + testConfig(4, ChangRoberts).Retries + 4; el != want || ed != 3 {
		t.Fatalf("%d ELECTION %d ELECTED, want %d and 3", el, ed, want)
	}
}

// Step never panics on junk and never lets junk grow state without bound.
func TestStepJunk(t *testing.T) {
	for _, meth := range Methods {
		m := New(testConfig(3, meth))
		m.SetPeers([]int64{1, 2, 3, 4})
		junk := []Msg{
			{From: 3, Method: Ring, Kind: KindElection, Round: Round{Initiator: 3, N: 9}, Cands: []int64{1}},
			{From: 99, Method: Ring, Kind: KindElection, Round: Round{Initiator: 99, N: 1}, Cands: []int64{99}},
			{From: 2, Method: Ring, Kind: KindElection, Round: Round{Initiator: 2, N: 7}},
			{From: 2, Method: Ring, Kind: KindElected, Round: Round{Initiator: 2, N: 7}, Leader: 3},
			{From: 2, Method: Ring, Kind: KindElected, Round: Round{Initiator: 2, N: 7}, Leader: 3, Cands: []int64{1}},
			{From: 2, Method: Ring, Kind: KindAck, Round: Round{Initiator: 8, N: 1}, Seq: 77},
			{From: 2, Method: Ring, Kind: KindOK, Round: Round{Initiator: 8, N: 1}},
			{From: 2, Method: ChangRoberts, Kind: KindElection, Round: Round{Initiator: 2, N: 1}},
			{From: 2, Method: ChangRoberts, Kind: KindElection, Round: Round{Initiator: 2, N: 1}, Cand: 1 << 60, Hops: 1 << 30},
			{From: 2, Method: Bully, Kind: KindOK, Round: Round{Initiator: 3, N: 1 << 60}},
			{From: 4, Method: Bully, Kind: KindElection, Round: Round{Initiator: 4, N: 1}},
			{From: 2, Method: Bully, Kind: KindElected, Round: Round{Initiator: 2, N: 1}, Leader: 3},
			{From: 2, Method: Bully, Kind: KindAck, Round: Round{Initiator: 2, N: 1}},
			{From: 2, Method: Lease, Kind: KindElection, Round: Round{Initiator: 2, N: 1}},
			{From: 2, Method: "paxos", Kind: KindElection, Round: Round{Initiator: 2, N: 1}},
			{From: 0, Method: Ring, Kind: KindElection, Round: Round{}},
			{From: -5, Method: Bully, Kind: "X", Round: Round{Initiator: -1}, Cand: -1, Leader: -2, Hops: -3, Cands: []int64{0, -1}},
		}
		for i := range 3000 {
			msg := junk[i%len(junk)]
			msg.Round.N += uint64(i / len(junk))
			msg.Seq = uint64(i)
			m.Step(msg)
			if i%7 == 0 {
				m.Tick()
			}
			m.Ready()
		}
		m.AdvanceTo(m.Now() + 10000)
		m.Ready()
		if len(m.hops) > maxHops || len(m.rounds.order) > maxRounds || len(m.seen.ring) > maxSeen {
			t.Errorf("%s: state grew: %d hops, %d rounds, %d seen", meth, len(m.hops), len(m.rounds.order), len(m.seen.ring))
		}
	}
}

func FuzzStep(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, uint8(0))
	f.Add([]byte("\x01\x02\x03\x10\x20\x30\x40\x50\x60\x70\x80\x90"), uint8(2))
	f.Add([]byte{255, 254, 3, 3, 3, 3, 0, 0, 1, 1, 2, 2, 9, 9}, uint8(3))
	kinds := []Kind{KindElection, KindOK, KindElected, KindAck}
	methods := []Method{Ring, ChangRoberts, Bully, Lease}
	f.Fuzz(func(t *testing.T, data []byte, method uint8) {
		m := New(testConfig(3, methods[int(method)%len(methods)]))
		m.SetPeers([]int64{1, 2, 3, 5, 8})
		for len(data) >= 6 {
			b := data[:6]
			data = data[6:]
			id := func(x byte) int64 { return int64(x%10) - 1 }
			switch b[0] % 8 {
			case 0:
				m.Tick()
			case 1:
				m.Observe(id(b[1]), int64(b[2]%5))
			case 2:
				m.Start()
			case 3:
				m.Claimed(int64(b[1] % 5))
			case 4:
				m.LeaseDone(LeaseResult{Op: LeaseOp{Kind: LeaseOpKind(b[1] % 3), Epoch: int64(b[2] % 3)},
					OK: b[3]%2 == 0, Failed: b[3]%3 == 0, Holder: id(b[4]), Epoch: int64(b[5] % 4), RemainingTicks: int(b[5]) - 100})
			default:
				msg := Msg{From: id(b[1]), Method: methods[int(b[2])%3], Kind: kinds[int(b[3])%4],
					Round: Round{Initiator: id(b[4]), N: uint64(b[5] % 3)}, Seq: uint64(b[5] % 4),
					Cand: id(b[4] / 10), Leader: id(b[1] / 10), Hops: int(b[2] % 20)}
				for i := range int(b[3] % 4) {
					msg.Cands = append(msg.Cands, id(b[i+1]))
				}
				m.Step(msg)
			}
			rd := m.Ready()
			for _, msg := range rd.Msgs {
				if err := msg.Validate(); err != nil || msg.From != 3 || msg.To < 1 || msg.To == 3 {
					t.Fatalf("sent an invalid message %+v: %v", msg, err)
				}
			}
		}
	})
}

// Tick one by one and AdvanceTo give the same outputs at the same times.
func TestAdvanceToEquivalent(t *testing.T) {
	for _, meth := range Methods {
		a, b := New(testConfig(2, meth)), New(testConfig(2, meth))
		for _, m := range []*Machine{a, b} {
			m.SetPeers([]int64{1, 2, 3})
			m.Start()
			if meth == Lease { // holds, then renews unanswered until the lease runs out
				m.LeaseDone(LeaseResult{Op: LeaseOp{Kind: LeaseAcquire}, OK: true, Holder: 2, Epoch: 1, RemainingTicks: 30})
			} else {
				m.Observe(1, 1)
			}
			m.Ready()
		}
		var outA, outB []string
		for step := int64(1); step <= 400; step++ {
			a.Tick()
			if rd := a.Ready(); !rd.Empty() {
				outA = append(outA, fmt.Sprintf("%d %+v", a.Now(), rd))
			}
			if b.NextDeadline() <= step {
				b.AdvanceTo(step)
				if rd := b.Ready(); !rd.Empty() {
					outB = append(outB, fmt.Sprintf("%d %+v", b.Now(), rd))
				}
			}
		}
		if fmt.Sprint(outA) != fmt.Sprint(outB) {
			t.Errorf("%s: Tick gave\n%v\nAdvanceTo gave\n%v", meth, outA, outB)
		}
		if len(outA) == 0 {
			t.Errorf("%s: nothing happened: the test tests nothing", meth)
		}
	}
}
