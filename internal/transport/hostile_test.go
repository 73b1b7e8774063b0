package transport

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// TestNetMisdirectedDatagram: a datagram names its destination under the
// MAC, so one meant for another node (a capture replayed here) is dropped
// and counted, and the node goes on taking its own.
func TestNetMisdirectedDatagram(t *testing.T) {
	c := netCluster(t, nil, 1, 2)
	conn, err := net.Dial("udp", c[1].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	good := newTestCodec(t, testKey)
	for _, dst := range []int64{2, 0, 1} { // for node 2, for nobody, for node 1
		f := frame("SUCCESSOR", 9, int(dst))
		f.Dst = dst
		b, err := good.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	ev := expect(t, "node 1", c[1], framed(ViaDatagram, 9, "SUCCESSOR"))[0]
	if ev.Frame.Dst != 1 || string(ev.Frame.Payload) != `{"n":1}` {
		t.Errorf("delivered %+v, want only the frame meant for node 1", ev.Frame)
	}
	if d := c[1].Drops(); d[ReasonMisdirected] != 2 {
		t.Errorf("drops %v, want 2 misdirected", d)
	}
	// Send names the destination itself.
	mustSend(t, "Send", c[2].Send(1, frame("WAKE", 2, 0)))
	if ev := expect(t, "node 1", c[1], framed(ViaDatagram, 2, "WAKE"))[0]; ev.Frame.Dst != 1 {
		t.Errorf("Send wrote dst %d, want 1", ev.Frame.Dst)
	}
}

// TestNetLinkFrameInAnotherName: on a link, every frame must come from the
// node its HELLO authenticated; one in another node's name is dropped and
// counted, and the link stays.
func TestNetLinkFrameInAnotherName(t *testing.T) {
	n := netCluster(t, nil, 1)[1]
	conn, err := net.Dial("tcp", n.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := newTestCodec(t, testKey)
	var msg []byte
	msg = append(msg, encodeLine(t, c, helloFrame(5, 1))...)
	msg = append(msg, encodeLine(t, c, frame("TOKEN", 6, 0))...)
	msg = append(msg, encodeLine(t, c, frame("TOKEN", 5, 1))...)
	if _, err := conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	evs := expect(t, "node 1", n, link(EventPredecessorUp, 5), framed(ViaPredecessor, 5, "TOKEN"))
	if string(evs[1].Frame.Payload) != `{"n":1}` {
		t.Errorf("delivered %s, want the frame from node 5 only", evs[1].Frame.Payload)
	}
	if d := n.Drops(); d[ReasonWrongSource] != 1 {
		t.Errorf("drops %v, want one wrong_source", d)
	}
}

// TestNetSilentConnectionsDoNotShutOutPredecessor: connections that never
// send a HELLO, more than the node holds, from the predecessor's own
// address, do not keep a real predecessor from linking: each new
// connection closes the oldest silent one. (The HELLO timeout is long
// here, so only that rule can let the predecessor in.)
func TestNetSilentConnectionsDoNotShutOutPredecessor(t *testing.T) {
	c := netCluster(t, func(cfg *Config) { cfg.HelloTimeout = time.Minute }, 1, 2)
	var silent []net.Conn
	defer func() {
		for _, s := range silent {
			s.Close()
		}
	}()
	for range 2 * c[1].cfg.MaxHandshakes {
		s, err := net.Dial("tcp", c[1].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, s)
	}
	// All accepted: at most MaxHandshakesPerSource of them wait now.
	want := uint64(2*c[1].cfg.MaxHandshakes - c[1].cfg.MaxHandshakesPerSource)
	testutil.WaitFor(waitTimeout, 5*time.Millisecond, func() bool { return c[1].Drops()[ReasonTooManyHellos] >= want })
	if got := c[1].Drops()[ReasonTooManyHellos]; got != want {
		t.Fatalf("%d silent connections closed, want %d", got, want)
	}
	c[2].ConnectSuccessor(1)
	expect(t, "node 2", c[2], link(EventSuccessorUp, 1))
	expect(t, "node 1", c[1], link(EventPredecessorUp, 2))
	roundTrip(t, cluster{1: c[1], 2: c[2]}, 2, 1, 0)
}

// TestNetReplacedWhileSending: a HELLO in another node's name replaces the
// predecessor's link while the predecessor is writing on it. The
// predecessor must learn that its link was replaced (ErrReplaced: its
// successor is alive), never see a reset it would take for the
// successor's death: that report splices a live node out of the ring.
func TestNetReplacedWhileSending(t *testing.T) {
	c := netCluster(t, nil, 3, 4)
	pred, succ := c[3], c[4]
	links := make(chan Event, 16)
	var drained sync.WaitGroup
	drained.Add(1)
	go func() { // node 4's frames are read and thrown away; its link events kept
		defer drained.Done()
		for ev := range succ.Events() {
			if ev.Kind != EventFrame {
				links <- ev
			}
		}
	}()
	defer func() { _ = succ.Close(); drained.Wait() }()
	waitLink := func(m match) {
		t.Helper()
		select {
		case ev := <-links:
			if !m.ok(ev) {
				t.Fatalf("node 4: got %v, want %v", ev, m)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("node 4: no %v within %v", m, waitTimeout)
		}
	}
	for round := range 20 {
		pred.ConnectSuccessor(4)
		expect(t, "node 3", pred, link(EventSuccessorUp, 4))
		waitLink(link(EventPredecessorUp, 3))
		stop := make(chan struct{})
		var sending sync.WaitGroup
		sending.Add(1)
		go func() {
			defer sending.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if pred.SendSuccessor(frame("TOKEN", 3, i)) != nil {
					return
				}
			}
		}()
		stranger, err := net.Dial("tcp", succ.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stranger.Write(encodeLine(t, newTestCodec(t, testKey), helloFrame(5, 4))); err != nil {
			t.Fatal(err)
		}
		ev := next(t, "node 3", pred)
		close(stop)
		sending.Wait()
		if ev.Kind != EventSuccessorDown || !errors.Is(ev.Err, ErrReplaced) {
			t.Fatalf("round %d: node 3 got %v (%v), want its link replaced", round, ev, ev.Err)
		}
		waitLink(link(EventPredecessorDown, 3))
		waitLink(link(EventPredecessorUp, 5))
		_ = stranger.Close()
		waitLink(link(EventPredecessorDown, 5))
	}
}
