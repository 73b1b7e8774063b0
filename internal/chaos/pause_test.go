package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

func TestPauseWatchMeasuresConservatively(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := newPauseWatch(nil, 20*time.Millisecond)
	f := func(seq int64) store.Fence { return store.Fence{Generation: 1, Seq: seq} }
	// Polls take 5 ms. Fence 1 is read from the poll ending at 5 until the
	// poll starting at 600; fence 2 from then on, with a failed poll in
	// the middle of fence 2's stretch that proves nothing.
	p.observe(at(0), at(5), f(1), true)
	for ms := 20; ms <= 600; ms += 20 {
		p.observe(at(ms), at(ms+5), f(1), true)
	}
	p.observe(at(620), at(625), f(2), true)
	p.observe(at(640), at(645), f(3), true)
	p.observe(at(660), at(1660), store.Fence{}, false)
	p.observe(at(1700), at(1705), f(3), true)
	p.observe(at(1720), at(1725), f(4), true)
	p.close()
	pauses, polls, failed := p.result()
	if polls != 36 || failed != 1 {
		t.Errorf("polls %d, failed %d; want 36, 1", polls, failed)
	}
	want := []span{{at(5), at(600)}, {at(645), at(1700)}}
	if len(pauses) != len(want) {
		t.Fatalf("pauses %v, want %v", pauses, want)
	}
	for i := range want {
		if !pauses[i].from.Equal(want[i].from) || !pauses[i].to.Equal(want[i].to) {
			t.Errorf("pause %d = %v..%v, want %v..%v", i, pauses[i].from.Sub(t0), pauses[i].to.Sub(t0), want[i].from.Sub(t0), want[i].to.Sub(t0))
		}
	}
}

func TestLongestPauseExcusesRepairs(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pauses := []span{
		{at(100), at(400)},    // 300 ms, free
		{at(1000), at(3000)},  // 2 s, during a kill's repair
		{at(5000), at(5700)},  // 700 ms, free: the one that fails the target
		{at(9800), at(10500)}, // 700 ms, half after the fault phase: 200 ms inside
		{at(7000), at(7600)},  // 600 ms, 1 s after a database restart settled: its aftermath
	}
	records := []faultRecord{
		{Kind: KillNode, At: at(900), Settle: 1500 * time.Millisecond},  // 900..2400 overlaps the 2 s pause
		{Kind: ClientMove, At: at(5100), Settle: 2 * time.Second},       // a client's move excuses nothing
		{Kind: StopCont, At: at(8000), Err: "not re-formed"},            // never settled: excused to the end
		{Kind: DBRestart, At: at(5800), Settle: 200 * time.Millisecond}, // settled at 6 s; its aftermath to 9 s
	}
	window := span{at(0), at(10000)}
	free, longest, ok := longestPause(pauses, repairWindows(records, window.to), window)
	if !ok || !free.from.Equal(at(5000)) || free.dur() != 700*time.Millisecond {
		t.Errorf("free = %v..%v (ok %v), want the 700 ms pause at 5 s", free.from.Sub(t0), free.to.Sub(t0), ok)
	}
	if longest.dur() != 2*time.Second {
		t.Errorf("longest = %v, want 2s", longest.dur())
	}
	// Without the faults, the 2 s pause is the free one.
	if free, _, _ := longestPause(pauses, nil, window); free.dur() != 2*time.Second {
		t.Errorf("free without faults = %v, want 2s", free.dur())
	}
	// Nothing but excused pauses: none free.
	if _, _, ok := longestPause(pauses[1:2], repairWindows(records, window.to), window); ok {
		t.Error("a pause inside a repair counted")
	}
	if _, _, ok := longestPause(pauses[4:5], repairWindows(records, window.to), window); ok {
		t.Error("a pause in a database restart's aftermath counted")
	}
}

func TestBigGroupMembership(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clients = 20
	w := newWorkload(cfg, newTestRand(), []string{"a"}, []int64{1}, func(string, ...any) {})
	if got := len(w.members[BigGroupName]); got != 5 {
		t.Errorf("%d clients in the big group, want a quarter of 20", got)
	}
	cfg.Clients, cfg.BigGroup = 3, 10
	w = newWorkload(cfg, newTestRand(), []string{"a"}, []int64{1}, func(string, ...any) {})
	if got := len(w.members[BigGroupName]); got != 2 {
		t.Errorf("%d of 3 clients in the big group, want at least 2", got)
	}
	cfg.BigGroup = 0
	w = newWorkload(cfg, newTestRand(), []string{"a"}, []int64{1}, func(string, ...any) {})
	if _, ok := w.members[BigGroupName]; ok {
		t.Error("big group without --big-group")
	}
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
