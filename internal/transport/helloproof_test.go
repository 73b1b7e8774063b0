package transport

import (
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/token"
	"github.com/ringchat/ringchat/internal/wire"
)

// TestNetHelloMustProveItselfToReplaceALiveLink: with a Prover, a HELLO
// replaces the predecessor link that is up only if it proves itself under
// a store secret. A key holder's HELLO (valid MAC, in the real
// predecessor's name or another's, without a proof, with a proof under a
// secret the store never issued, or with a proof seen on another link) is
// refused with UNLINK "unproven", counted, and the real link carries on. A
// node that read the secret (its own HELLO proven by the transport's
// dial) replaces it, and with no link up any HELLO is taken.
func TestNetHelloMustProveItselfToReplaceALiveLink(t *testing.T) {
	keys := &token.Keys{}
	keys.Publish([]token.GenSecret{{Gen: 7, Secret: "s7"}, {Gen: 6, Secret: "s6"}})
	nodes := netCluster(t, func(c *Config) { c.Prover = keys }, 1, 2, 3)
	n1 := nodes[1]
	c := newTestCodec(t, testKey)

	// With no predecessor link up, an unproven HELLO is taken.
	stranger := dialHello(t, n1, c, 9)
	expect(t, "node 1", n1, link(EventPredecessorUp, 9))
	// Node 2's dial proves itself and replaces it.
	nodes[2].ConnectSuccessor(1)
	expect(t, "node 2", nodes[2], link(EventSuccessorUp, 1))
	expect(t, "node 1", n1, link(EventPredecessorDown, 9), link(EventPredecessorUp, 2))
	expectHangUp(t, stranger)

	refused := func(name string, as int64, hp helloPayload) {
		t.Helper()
		conn := dialHelloPayload(t, n1, c, as, hp)
		lr := wire.NewLineReader(conn, 1<<16)
		_ = conn.SetReadDeadline(time.Now().Add(testutil.WaitLimit))
		line, err := lr.Next()
		if err != nil {
			t.Fatalf("%s: no UNLINK: %v", name, err)
		}
		f, _, err := c.Decode(line)
		var up unlinkPayload
		if err != nil || f.Type != UnlinkType || json.Unmarshal(f.Payload, &up) != nil || up.Why != unlinkUnproven {
			t.Fatalf("%s: got %s %s (%v), want UNLINK unproven", name, f.Type, f.Payload, err)
		}
		expectHangUp(t, conn)
	}
	before := n1.Drops()[ReasonUnprovenHello]
	refused("no proof, in the predecessor's name", 2, helloPayload{To: 1})
	refused("no proof, in another node's name", 3, helloPayload{To: 1})
	refused("a proof under a secret the store never issued", 2, helloPayload{To: 1, Proofs: []token.HelloProof{{Gen: 7, Proof: token.ProveHello("guess", 7, 2, 1)}}})
	refused("a generation never published", 2, helloPayload{To: 1, Proofs: []token.HelloProof{{Gen: 8, Proof: token.ProveHello("s7", 8, 2, 1)}}})
	refused("node 2's proof in node 3's name", 3, helloPayload{To: 1, Proofs: []token.HelloProof{{Gen: 7, Proof: token.ProveHello("s7", 7, 2, 1)}}})
	refused("a proof for another successor", 2, helloPayload{To: 1, Proofs: []token.HelloProof{{Gen: 7, Proof: token.ProveHello("s7", 7, 2, 4)}}})
	// A good proof after maxHelloProofs bad ones is not looked at: a
	// HELLO costs the acceptor a bounded number of checks.
	many := make([]token.HelloProof, maxHelloProofs, maxHelloProofs+1)
	for i := range many {
		many[i] = token.HelloProof{Gen: 7, Proof: "0000000000000000"}
	}
	refused("the good proof past the bound", 2, helloPayload{To: 1, Proofs: append(many, token.HelloProof{Gen: 7, Proof: token.ProveHello("s7", 7, 2, 1)})})
	if got := n1.Drops()[ReasonUnprovenHello] - before; got != 7 {
		t.Errorf("unproven_hello counted %d times, want 7", got)
	}
	// The real link carries on: no event on node 1 but node 2's frame.
	mustSend(t, "node 2 to node 1", nodes[2].SendSuccessor(frame("TOKEN", 2, 1)))
	expect(t, "node 1", n1, framed(ViaPredecessor, 2, "TOKEN"))

	// A dialer that knows a newer generation than the acceptor proves
	// itself with an older one the acceptor knows (the acceptor's
	// newest, or one of the 4 before).
	dialHelloPayload(t, n1, c, 3, helloPayload{To: 1, Proofs: []token.HelloProof{
		{Gen: 9, Proof: token.ProveHello("s9", 9, 3, 1)}, {Gen: 8, Proof: token.ProveHello("s8", 8, 3, 1)},
		{Gen: 6, Proof: token.ProveHello("s6", 6, 3, 1)}}})
	expect(t, "node 1", n1, link(EventPredecessorDown, 2), link(EventPredecessorUp, 3))
	expect(t, "node 2", nodes[2], link(EventSuccessorDown, 1))
}

// dialHelloPayload opens a raw inbound link to node 1 at n and sends a
// HELLO in the name of node as with payload hp.
func dialHelloPayload(t *testing.T, n *Net, c *wire.Codec, as int64, hp helloPayload) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", n.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p, _ := json.Marshal(hp)
	if _, err := conn.Write(encodeLine(t, c, wire.Frame{Type: HelloType, Src: as, Payload: p})); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestNetWithoutProverAnyHelloReplaces: without a Prover (a transport
// whose node keeps no secrets), any authenticated HELLO replaces the
// link, as before proofs.
func TestNetWithoutProverAnyHelloReplaces(t *testing.T) {
	n := netCluster(t, nil, 1)[1]
	c := newTestCodec(t, testKey)
	dialHello(t, n, c, 5)
	expect(t, "node 1", n, link(EventPredecessorUp, 5))
	dialHello(t, n, c, 6)
	expect(t, "node 1", n, link(EventPredecessorDown, 5), link(EventPredecessorUp, 6))
	if got := n.Drops()[ReasonUnprovenHello]; got != 0 {
		t.Errorf("unproven_hello counted %d times without a prover", got)
	}
}
