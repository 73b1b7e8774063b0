package transport

import (
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/wire"
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
	msg = append(msg, encodeLine(t, c, helloFrame(5, 1, nil))...)
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

// TestNetUnlinkSaysWhy: the UNLINK on an inbound link says whether another
// link replaced it (frames its peer sent last may be unread) or the ring
// refused its peer.
func TestNetUnlinkSaysWhy(t *testing.T) {
	n := netCluster(t, nil, 1)[1]
	c := newTestCodec(t, testKey)
	dial := func(as int64) (net.Conn, *wire.LineReader) {
		t.Helper()
		conn := dialHello(t, n, c, as)
		return conn, wire.NewLineReader(conn, 1<<16)
	}
	why := func(conn net.Conn, lr *wire.LineReader) string {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(testutil.WaitLimit))
		line, err := lr.Next()
		if err != nil {
			t.Fatal(err)
		}
		f, _, err := c.Decode(line)
		if err != nil || f.Type != UnlinkType {
			t.Fatalf("got %v (%v), want UNLINK", f.Type, err)
		}
		var p unlinkPayload
		if err := json.Unmarshal(f.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p.Why
	}
	first, lr1 := dial(5)
	expect(t, "node 1", n, link(EventPredecessorUp, 5))
	dial(6)
	expect(t, "node 1", n, link(EventPredecessorDown, 5), link(EventPredecessorUp, 6))
	if got := why(first, lr1); got != unlinkReplaced {
		t.Errorf("the replaced link's UNLINK says %q, want %q", got, unlinkReplaced)
	}
	second, lr2 := dial(7)
	expect(t, "node 1", n, link(EventPredecessorDown, 6), link(EventPredecessorUp, 7))
	n.RefusePredecessor()
	if got := why(second, lr2); got != unlinkRefused {
		t.Errorf("the refused link's UNLINK says %q, want %q", got, unlinkRefused)
	}
}
