package transport

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/wire"
)

func memNodes(t *testing.T, m *MemNetwork, ids ...int64) cluster {
	c := cluster{}
	for _, id := range ids {
		tr := m.Transport(id)
		t.Cleanup(func() { _ = tr.Close() })
		c[id] = tr
	}
	return c
}

// quiet checks that tr has no pending event: a datagram sent to it now
// must be its next event.
func quiet(t *testing.T, c cluster, id int64) {
	t.Helper()
	mustSend(t, "Send", c[id].Send(id, frame("MARK", id, 0)))
	expect(t, "node", c[id], framed(ViaDatagram, id, "MARK"))
}

func wantErr(t *testing.T, ev Event, target error) {
	t.Helper()
	if !errors.Is(ev.Err, target) {
		t.Errorf("%v: Err %v, want %v", ev, ev.Err, target)
	}
}

func TestMemPartition(t *testing.T) {
	m := NewMemNetwork(WithMemLogger(testLogger(t)))
	c := memNodes(t, m, 1, 2, 3)
	connect(t, c, 1, 2)
	connect(t, c, 2, 3)

	m.Partition(1, 2)
	wantErr(t, expect(t, "node 1", c[1], link(EventSuccessorDown, 2))[0], ErrUnreachable)
	wantErr(t, expect(t, "node 2", c[2], link(EventPredecessorDown, 1))[0], ErrUnreachable)
	c[1].ConnectSuccessor(2)
	wantErr(t, expect(t, "node 1", c[1], link(EventSuccessorDown, 2))[0], ErrUnreachable)
	before := m.Stats()
	mustSend(t, "Send", c[1].Send(2, frame("JOIN", 1, 0))) // best effort: no error
	mustSend(t, "Send", c[2].Send(1, frame("JOIN", 2, 0)))
	if s := m.Stats(); s.Dropped != before.Dropped+2 || s.Delivered != before.Delivered {
		t.Errorf("stats %+v after two blocked datagrams, before %+v", s, before)
	}
	quiet(t, c, 1)
	quiet(t, c, 2)
	roundTrip(t, c, 2, 3, 0) // links not crossing the cut are untouched

	m.Heal(2, 1)
	mustSend(t, "Send", c[1].Send(2, frame("JOIN", 1, 1)))
	expect(t, "node 2", c[2], framed(ViaDatagram, 1, "JOIN"))
	connect(t, c, 1, 2)
	roundTrip(t, c, 1, 2, 1)
}

func TestMemIsolate(t *testing.T) {
	m := NewMemNetwork(WithMemLogger(testLogger(t)))
	c := memNodes(t, m, 1, 2, 3)
	for _, l := range [][2]int64{{1, 2}, {2, 3}, {3, 1}} {
		connect(t, c, l[0], l[1])
	}
	m.Isolate(2)
	wantErr(t, expect(t, "node 1", c[1], link(EventSuccessorDown, 2))[0], ErrUnreachable)
	wantErr(t, expect(t, "node 3", c[3], link(EventPredecessorDown, 2))[0], ErrUnreachable)
	for _, ev := range expectAnyOrder(t, "node 2", c[2], link(EventSuccessorDown, 3), link(EventPredecessorDown, 1)) {
		wantErr(t, ev, ErrUnreachable)
	}
	mustSend(t, "Send", c[2].Send(2, frame("MARK", 2, 0))) // not even to itself
	mustSend(t, "Send", c[2].Send(1, frame("JOIN", 2, 0)))
	mustSend(t, "Send", c[1].Send(2, frame("JOIN", 1, 0)))
	if s := m.Stats(); s.Dropped != 3 {
		t.Errorf("stats %+v, want 3 dropped", s)
	}
	c[1].ConnectSuccessor(2)
	wantErr(t, expect(t, "node 1", c[1], link(EventSuccessorDown, 2))[0], ErrUnreachable)
	c[2].ConnectSuccessor(2)
	wantErr(t, expect(t, "node 2", c[2], link(EventSuccessorDown, 2))[0], ErrUnreachable)
	quiet(t, c, 1)
	quiet(t, c, 3)

	m.Unisolate(2)
	quiet(t, c, 2)
	connect(t, c, 1, 2)
	roundTrip(t, c, 1, 2, 0)

	m.Isolate(3)
	expect(t, "node 1", c[1], link(EventPredecessorDown, 3))
	expect(t, "node 3", c[3], link(EventSuccessorDown, 1))
	m.Partition(1, 2)
	expect(t, "node 1", c[1], link(EventSuccessorDown, 2))
	expect(t, "node 2", c[2], link(EventPredecessorDown, 1))
	m.HealAll()
	connect(t, c, 1, 2)
	mustSend(t, "Send", c[3].Send(1, frame("JOIN", 3, 0)))
	expect(t, "node 1", c[1], framed(ViaDatagram, 3, "JOIN"))
}

// lossRun sends n datagrams over a network with the given loss and seed
// and returns the indexes received, in order.
func lossRun(t *testing.T, loss float64, seed uint64, n int) ([]int, MemStats) {
	m := NewMemNetwork(WithMemLogger(testLogger(t)))
	m.SetDatagramLoss(loss, seed)
	c := memNodes(t, m, 1, 2)
	for i := range n {
		mustSend(t, "Send", c[1].Send(2, frame("MSG", 1, i)))
	}
	m.SetDatagramLoss(0, 0) // the end marker always arrives
	mustSend(t, "Send", c[1].Send(2, frame("END", 1, 0)))
	var got []int
	for {
		ev := next(t, "node 2", c[2])
		if ev.Frame.Type == "END" {
			break
		}
		var p struct{ N int }
		if err := json.Unmarshal(ev.Frame.Payload, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.N)
	}
	return got, m.Stats()
}

func TestMemDatagramLoss(t *testing.T) {
	const n = 1000
	a, sa := lossRun(t, 0.3, 42, n)
	b, _ := lossRun(t, 0.3, 42, n)
	if !slices.Equal(a, b) {
		t.Error("two runs with the same seed lost different datagrams")
	}
	if c, _ := lossRun(t, 0.3, 43, n); slices.Equal(a, c) {
		t.Error("two runs with different seeds lost the same datagrams")
	}
	if !slices.IsSorted(a) {
		t.Error("datagrams reordered")
	}
	if sa.Lost+uint64(len(a)) != n || sa.Lost < 200 || sa.Lost > 400 {
		t.Errorf("stats %+v with %d received of %d at 30%% loss", sa, len(a), n)
	}
	if sa.Dropped != sa.Lost {
		t.Errorf("stats %+v: only losses should drop", sa)
	}
}

func TestMemDatagramDup(t *testing.T) {
	for _, withCodec := range []bool{false, true} {
		var opts []MemOption
		codecs := map[int64]*wire.Codec{}
		if withCodec {
			opts = append(opts, WithCodecs(func(id int64) *wire.Codec {
				codecs[id] = newTestCodec(t, testKey)
				return codecs[id]
			}))
		}
		m := NewMemNetwork(opts...)
		m.SetDatagramDup(1)
		c := memNodes(t, m, 1, 2)
		mustSend(t, "Send", c[1].Send(2, frame("JOIN", 1, 0)))
		expect(t, "node 2", c[2], framed(ViaDatagram, 1, "JOIN"))
		s := m.Stats()
		if s.Duplicated != 1 {
			t.Errorf("stats %+v, want one duplicate", s)
		}
		if !withCodec {
			// Without a codec the copy arrives, as a network would deliver it.
			expect(t, "node 2", c[2], framed(ViaDatagram, 1, "JOIN"))
			continue
		}
		// With codecs the receiver refuses the copy as a replay, as a node does.
		if st := codecs[2].Stats(); st.Replay != 1 || s.Dropped != 1 || s.Delivered != 1 {
			t.Errorf("codec stats %+v, network stats %+v: want the copy refused as a replay", st, s)
		}
		m.SetDatagramDup(0)
		quiet(t, c, 2)
	}
}

func TestMemCodecRefusesInvalidFrames(t *testing.T) {
	m := NewMemNetwork(WithCodecs(func(int64) *wire.Codec { return newTestCodec(t, testKey) }))
	c := memNodes(t, m, 1, 2)
	connect(t, c, 1, 2)
	bad := wire.Frame{Type: "TOKEN", Src: 0}
	if err := c[1].Send(2, bad); !errors.Is(err, wire.ErrInvalidFrame) {
		t.Errorf("Send(src 0) = %v, want ErrInvalidFrame", err)
	}
	if err := c[1].SendSuccessor(bad); !errors.Is(err, wire.ErrInvalidFrame) {
		t.Errorf("SendSuccessor(src 0) = %v, want ErrInvalidFrame", err)
	}
	roundTrip(t, c, 1, 2, 0) // an encoding error does not break the link
}

func TestMemRejoin(t *testing.T) {
	m := NewMemNetwork()
	c := memNodes(t, m, 1, 2)
	connect(t, c, 1, 2)
	old := c[2]
	c[2] = m.Transport(2) // restarted: the old transport is closed
	t.Cleanup(func() { _ = c[2].Close() })
	expect(t, "node 1", c[1], link(EventSuccessorDown, 2))
	for range old.Events() { // closed: the loop ends
	}
	connect(t, c, 1, 2)
	roundTrip(t, c, 1, 2, 0)
}
