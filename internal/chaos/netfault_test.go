package chaos

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testLayout is a 5-node lab whose table and marks are fixed: tag 0x1093,
// node k under group 2001085952+k, the store at 127.0.0.1:3306.
func testLayout() netLayout {
	return newLayout(4242, []int64{1, 2, 3, 4, 5}, []string{"127.0.0.1:3306"})
}

func TestNetLayout(t *testing.T) {
	l := testLayout()
	if l.Table != "ringchaos_4242" || l.GID(3) != 2001085955 || l.mark(3, StoreEnd) != 0x10930300 || l.mark(2, 5) != 0x10930205 {
		t.Fatalf("layout: table %s gid(3) %d mark(3,store) %#x mark(2,5) %#x", l.Table, l.GID(3), l.mark(3, StoreEnd), l.mark(2, 5))
	}
	if NodeAddr(1) != "127.0.0.11" || NodeAddr(5) != "127.0.0.15" {
		t.Errorf("aliases %s %s", NodeAddr(1), NodeAddr(5))
	}
	for _, bad := range []netLayout{newLayout(1, []int64{1}, nil), newLayout(1, []int64{1}, []string{"localhost:3306"}),
		newLayout(1, []int64{241}, []string{"127.0.0.1:3306"})} {
		if bad.validate() == nil {
			t.Errorf("layout %+v: valid, want an error", bad)
		}
	}
}

func TestNetSetupScript(t *testing.T) {
	s := newLayout(4242, []int64{1, 2}, []string{"127.0.0.1:3306"}).setupScript()
	want := `add table inet ringchaos_4242
delete table inet ringchaos_4242
table inet ringchaos_4242 {
	chain marking {
		type filter hook output priority -150; policy accept;
		ct state new meta skgid 2001085953 ip daddr 127.0.0.12 ct mark set 0x10930102
		ct state new meta skgid 2001085953 ip daddr 127.0.0.1 tcp dport 3306 ct mark set 0x10930100
		ct state new meta skgid 2001085954 ip daddr 127.0.0.11 ct mark set 0x10930201
		ct state new meta skgid 2001085954 ip daddr 127.0.0.1 tcp dport 3306 ct mark set 0x10930200
	}
	chain faults {
		type filter hook prerouting priority -150; policy accept;
	}
}
`
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("setup script (-want +got):\n%s", d)
	}
}

// TestNetFaultRules: the rules of each fault, as text.
func TestNetFaultRules(t *testing.T) {
	l := testLayout()
	const flush = "flush chain inet ringchaos_4242 faults\n"
	rule := func(mark, dir string) string {
		return "add rule inet ringchaos_4242 faults ct mark " + mark + " ct direction " + dir + " counter drop\n"
	}
	cases := []struct {
		name string
		f    NetFault
		want string
	}{
		{"node 2 cannot send to its successor 3", NetFault{Drop: []Link{{2, 3}}},
			flush + rule("0x10930203", "original") + rule("0x10930302", "reply")},
		{"2 and 3 cut both ways", NetFault{Drop: Both(2, 3)},
			flush + rule("0x10930203", "original") + rule("0x10930302", "reply") + rule("0x10930302", "original") + rule("0x10930203", "reply")},
		{"node 4 cut from the store", NetFault{Drop: Both(4, StoreEnd)},
			flush + rule("0x10930400", "original") + rule("0x10930400", "reply")},
		{"heal", NetFault{}, flush},
		{"a link twice and a self-link: once, none", NetFault{Drop: []Link{{1, 2}, {1, 2}, {3, 3}}},
			flush + rule("0x10930102", "original") + rule("0x10930201", "reply")},
		{"5 % of node 1's packets to the store", NetFault{Drop: []Link{{1, StoreEnd}}, LossPct: 5},
			flush + "add rule inet ringchaos_4242 faults ct mark 0x10930100 ct direction original numgen random mod 100 < 5 counter drop\n"},
	}
	for _, c := range cases {
		if d := cmp.Diff(c.want, l.faultScript(c.f)); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
	if got := l.healScript(); got != flush {
		t.Errorf("heal script %q", got)
	}
}

// TestNetPlans: each kind's links, and the rule count they make.
func TestNetPlans(t *testing.T) {
	l := testLayout()
	s := &scheduler{r: &runner{procs: &procs{addrs: map[int64]nodeAddr{1: {}, 2: {}, 3: {}, 4: {}, 5: {}}}},
		rng: newTestRand(), live: []int64{1, 2, 3, 4, 5}}
	order := []int64{1, 3, 5, 2, 4}
	for _, k := range NetKinds {
		ev := s.planNet(k, order, 5)
		rules := strings.Count(l.faultScript(ev.Fault), "add rule")
		var want int
		switch k {
		case NetCutSuccOneWay:
			want = 2
			if succ := succOf(ev.Victim, order, nil); !slices.Equal(ev.Fault.Drop, []Link{{ev.Victim, succ}}) {
				t.Errorf("%s: %v, want node %d to its successor %d", k, ev.Fault.Drop, ev.Victim, succ)
			}
		case NetCutSucc, NetFlap:
			want = 4
		case NetCutStore:
			want = 2 // the store opens no connections
		case NetCutRing:
			want = 4 * 4
		case NetCutCoord:
			want = 4 * 4
			if ev.Victim != 5 {
				t.Errorf("%s: victim %d, want the coordinator 5", k, ev.Victim)
			}
		case NetSplit:
			want = 2 * 3 * 4
		case NetSplitStore:
			// The split, and the store cut from the side of 2 or of 3.
			if want = 2*3*4 + 2*2; rules == 2*3*4+3*2 {
				want = rules
			}
			if !strings.Contains(ev.Detail, "the store reachable from [") {
				t.Errorf("%s: %s", k, ev.Detail)
			}
		case NetLoss1, NetLoss5, NetLoss20:
			want = 4*4 + 2
			if !strings.Contains(l.faultScript(ev.Fault), "numgen random mod 100 < "+strconv.Itoa(ev.Fault.LossPct)+" ") {
				t.Errorf("%s: no loss rule: %s", k, l.faultScript(ev.Fault))
			}
		}
		if rules != want {
			t.Errorf("%s (%s): %d rules, want %d", k, ev.Detail, rules, want)
		}
	}
}

func TestExpectedSides(t *testing.T) {
	ids := []int64{1, 2, 3, 4, 5}
	var split []Link
	for _, a := range []int64{1, 2} {
		for _, b := range []int64{3, 4, 5} {
			split = append(split, Both(a, b)...)
		}
	}
	ring := func(v int64) (out []Link) {
		for _, j := range ids {
			if j != v {
				out = append(out, Both(v, j)...)
			}
		}
		return out
	}
	cases := []struct {
		name string
		f    NetFault
		want [][]int64
	}{
		{"no fault", NetFault{}, [][]int64{ids}},
		{"3 cut from the store", NetFault{Drop: Both(3, StoreEnd)}, [][]int64{{1, 2, 4, 5}}},
		{"3 cut from the ring", NetFault{Drop: ring(3)}, [][]int64{{1, 2, 4, 5}}},
		{"3 and 4 cut: the ring goes round them", NetFault{Drop: Both(3, 4)}, [][]int64{ids}},
		{"split, store on both sides", NetFault{Drop: split}, [][]int64{{1, 2}, {3, 4, 5}}},
		{"split, store with 3 4 5", NetFault{Drop: append(slices.Clone(split), append(Both(1, StoreEnd), Both(2, StoreEnd)...)...)}, [][]int64{{3, 4, 5}}},
		{"loss cuts nothing", NetFault{Drop: ring(2), LossPct: 20}, [][]int64{ids}},
	}
	for _, c := range cases {
		if d := cmp.Diff(c.want, expectedSides(c.f, ids)); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}

func TestLongestStall(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ds := []owedShow{
		{From: 1, To: 2, Owed: at(0), Shown: at(0.1)},
		{From: 1, To: 2, Owed: at(0.5), Shown: at(1)},
		// Owed since 1.5 while another of the pair was shown at 2: the
		// stall is from 2 (the pair's last showing) to 4.5.
		{From: 1, To: 2, Owed: at(2.2), Shown: at(2)},
		{From: 1, To: 2, Owed: at(1.5), Shown: at(4.5)},
		// A pair cut by the fault: not judged.
		{From: 3, To: 2, Owed: at(0), Shown: at(9)},
		// A stall that began before the window counts from its start.
		{From: 2, To: 1, Owed: at(-5), Shown: at(1.5)},
	}
	pairOK := func(a, b int64) bool { return a != 3 && b != 3 }
	got := longestStall(ds, pairOK, span{at(0), at(10)})
	if got.From != 1 || got.To != 2 || got.dur() != 2500*time.Millisecond {
		t.Errorf("longest stall %d->%d %v, want 1->2 2.5s", got.From, got.To, got.dur())
	}
	got = longestStall(ds, func(int64, int64) bool { return true }, span{at(0), at(5)})
	if got.From != 3 || got.dur() != 5*time.Second {
		t.Errorf("with the cut pair, clipped to the window: %d->%d %v, want 3->2 5s", got.From, got.To, got.dur())
	}
	if got := longestStall(ds, pairOK, span{at(5), at(10)}); got.dur() != 0 {
		t.Errorf("nothing owed after 4.5: stall %v", got.dur())
	}
}

// TestNetLabCuts makes the table for real (where nft works) and checks
// what a cut does to a node's connections: a node cut from another and
// from the store reaches neither, a third node both; a one-way cut stops
// a TCP connection (its answers are lost); after the heal everything
// connects; the table is gone after Close.
func TestNetLabCuts(t *testing.T) {
	requireNft(t)
	store := listen(t, "127.0.0.1:0")
	n2 := listen(t, "127.0.0.12:0")
	l := newLayout(os.Getpid(), []int64{1, 2, 3}, []string{store})
	lab, err := openNetLab(l)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	if !tableExists(l.Table) {
		t.Fatalf("table %s not made", l.Table)
	}
	connects := func(node int64, addr string) bool {
		host, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command("timeout", "1", "bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+port)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: l.GID(node), Groups: []uint32{}}}
		return cmd.Run() == nil
	}
	expect := func(what string, want [4]bool) {
		t.Helper()
		got := [4]bool{connects(1, n2), connects(1, store), connects(3, n2), connects(3, store)}
		if got != want {
			t.Errorf("%s: 1->2 1->store 3->2 3->store connect %v, want %v", what, got, want)
		}
	}
	expect("no fault", [4]bool{true, true, true, true})
	if err := lab.Apply(NetFault{Drop: append(Both(1, 2), Both(1, StoreEnd)...)}); err != nil {
		t.Fatal(err)
	}
	expect("1 cut from 2 and the store", [4]bool{false, false, true, true})
	if err := lab.Apply(NetFault{Drop: []Link{{2, 1}}}); err != nil {
		t.Fatal(err)
	}
	expect("2 cannot send to 1", [4]bool{false, true, true, true})
	dropped, err := lab.Heal()
	if err != nil || dropped == 0 {
		t.Errorf("heal: %d packets dropped, %v", dropped, err)
	}
	expect("healed", [4]bool{true, true, true, true})
	lab.Close()
	if tableExists(l.Table) {
		t.Errorf("table %s still there after Close", l.Table)
	}
}

func listen(t *testing.T, addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// requireNft skips (loudly) where nft cannot run, and fails in CI, where
// .ci/run installs it.
func requireNft(t *testing.T) {
	t.Helper()
	if why := NetUsable(); why != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("network faults cannot run: %s (CI needs them: .ci/run installs nftables)", why)
		}
		t.Skipf("!!! SKIPPING THE NETWORK-FAULT TEST: %s", why)
	}
}

// A fault during which nothing was stored at all shows no stall between
// any pair (the clients' messages, never answered, were sent again after
// the heal): a ring-wide pause (no visit committed) over MaxNetGap within
// the fault, or within the window after its heal, fails it all the same.
// A pause while no side is expected to deliver (each node alone with the
// store) does not.
func TestJudgeNetCountsARingWidePause(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ids := []int64{1, 2, 3, 4, 5}
	storeCut := netEvent{Kind: NetCutStore, Victim: 5, Fault: NetFault{Drop: Both(5, StoreEnd)}, At: at(0), Heal: at(14)}
	everyone := NetFault{}
	for _, j := range ids {
		everyone.Drop = append(everyone.Drop, Both(j, StoreEnd)...)
	}
	storeGone := netEvent{Kind: NetCutStore, Fault: everyone, At: at(100), Heal: at(110)}
	for _, c := range []struct {
		name              string
		ev                netEvent
		pauses            []span
		duringOK, afterOK bool
	}{
		{"no pause", storeCut, nil, true, true},
		{"a short pause", storeCut, []span{{at(3), at(4.5)}}, true, true},
		{"the ring still during the fault", storeCut, []span{{at(1), at(26)}}, false, false},
		{"still after the heal only", storeCut, []span{{at(13.5), at(16.5)}}, true, false},
		{"no side expected", storeGone, []span{{at(101), at(109)}}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs := judgeNet([]netEvent{c.ev}, nil, nil, ids, c.pauses)
			if len(vs) != 1 || vs[0].duringOK != c.duringOK || vs[0].afterOK != c.afterOK {
				t.Fatalf("verdict %+v, want during ok %v, after ok %v", vs, c.duringOK, c.afterOK)
			}
		})
	}
}
