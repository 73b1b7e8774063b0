package ringsim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/token"
)

// The hostile-peer suite: an attacker holding the cluster key sends frames
// a node authenticates. Frames only propose; the store decides. After each
// attack the ring must have the store's coordinator, every node must
// commit again within 2 s (the default 20-ms tick), and the store's fence
// must hold only a generation it issued.

// hostileSim starts a 5-node ring with the production timeouts.
func hostileSim(t *testing.T, seed uint64) *Sim {
	t.Helper()
	s := newSim(t, seed, 1, 2, 3, 4, 5)
	s.Cfg = ring.DefaultConfig
	startAll(t, s)
	return s
}

// within2s is 2 s in ticks of the production config.
func within2s(s *Sim) int { return int(2 * time.Second / s.Cfg(1).Tick) }

// recovered fails the test unless, within 2 s of the attack at tick
// attacked, the ring is healthy with the store's coordinator and every
// running node has committed a critical section since the attack. A frame
// that only proposes must not even cost the ring a new coordinator epoch or
// a new token: epoch and generation are those of before the attack.
func recovered(t *testing.T, s *Sim, attacked int64, what string) {
	t.Helper()
	epoch, gen := s.Store.Epoch, s.Store.Gen
	defer func() {
		if s.Store.Epoch != epoch || s.Store.Gen != gen {
			t.Errorf("%s: the attack cost the ring: epoch %d -> %d, generation %d -> %d", what, epoch, s.Store.Epoch, gen, s.Store.Gen)
		}
	}()
	var err error
	ok := s.RunUntil(within2s(s)-int(s.Now-attacked), func() bool {
		if err = s.Healthy(); err != nil {
			return false
		}
		commits := s.CommitsSince(attacked)
		for _, id := range s.Live() {
			if commits[id] == 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("%s: not recovered within 2 s (%d ticks): healthy: %v; commits since the attack: %v",
			what, within2s(s), err, s.CommitsSince(attacked))
	}
	if s.Store.Fence.Gen > s.Store.Gen {
		t.Fatalf("%s: the store's fence holds generation %d, never issued (last issued %d)", what, s.Store.Fence.Gen, s.Store.Gen)
	}
	checkInvariants(t, s)
	for _, id := range s.Live() {
		if c, e := s.Procs[id].Node.Coordinator(); c != s.Store.Coord || e != s.Store.Epoch {
			t.Fatalf("%s: node %d follows coordinator %d epoch %d; the store has %d epoch %d", what, id, c, e, s.Store.Coord, s.Store.Epoch)
		}
	}
}

// notCoordinator returns a running node other than the store's
// coordinator and the given ones.
func notCoordinator(s *Sim, except ...int64) int64 {
	for _, id := range s.Live() {
		if id == s.Store.Coord {
			continue
		}
		skip := false
		for _, e := range except {
			skip = skip || e == id
		}
		if !skip {
			return id
		}
	}
	return 0
}

// A forged COORDINATOR at an epoch far above the store's, to every node,
// in the name of a real node that is not the coordinator.
func TestHostileForgedCoordinator(t *testing.T) {
	s := hostileSim(t, 101)
	phantom := notCoordinator(s)
	at := s.Now
	for _, id := range s.Live() {
		s.Inject(id, ring.Msg{Type: ring.MsgCoordinator, Via: ring.ViaUDP, From: phantom, To: id, Epoch: s.Store.Epoch + 1000})
	}
	recovered(t, s, at, "forged COORDINATOR at epoch+1000")
}

// A TOKEN at the largest generation, on a node's inbound link in its
// predecessor's name (an attacker that dialled in as the predecessor), to
// a node without work (its critical sections do not touch the store). The
// node asks the store about the unknown generation and discards the token
// without a critical section; nothing records its stamp, so the real token
// is taken next, and a later regeneration still works. (Before, such a
// node recorded 2^63-1 as the newest stamp seen, refused every real token
// as stale from then on, and so did every node it passed the forged token
// to: the ring stopped until every node restarted.)
func TestHostileTokenAtMaxGeneration(t *testing.T) {
	for _, gen := range []int64{math.MaxInt64, 0} { // 0: one above the store's
		s := hostileSim(t, 102)
		s.IdleVisits = true
		if gen == 0 {
			gen = s.Store.Gen + 1
		}
		victim := notCoordinator(s)
		n := s.Procs[victim].Node
		if !s.RunUntil(bound, func() bool { return !n.HoldsToken() && n.Predecessor() != 0 }) {
			t.Fatal("the victim always holds the token")
		}
		at := s.Now
		s.Inject(victim, ring.Msg{Type: ring.MsgToken, Via: ring.ViaPred, From: n.Predecessor(), Epoch: s.Store.Epoch,
			Token: &token.Token{Stamp: token.Stamp{Gen: gen, Seq: 0}}})
		workEverywhere(s)
		recovered(t, s, at, fmt.Sprintf("TOKEN at generation %d", gen))
		if s.Store.Refused != 0 {
			t.Errorf("gen %d: %d critical sections refused: the forged token was visited", gen, s.Store.Refused)
		}
		for _, id := range s.Live() {
			if l := s.Procs[id].Node.LastStamp(); l.Gen > s.Store.Gen {
				t.Fatalf("gen %d: node %d recorded %s, a generation the store never issued", gen, id, l)
			}
		}
		// A new generation still takes over: crash a node holding the token.
		before := s.Store.Gen
		var holder int64
		if !s.RunUntil(bound, func() bool {
			for _, id := range s.Live() {
				if id != s.Store.Coord && s.Procs[id].Node.HoldsToken() {
					holder = id
					return true
				}
			}
			return false
		}) {
			t.Fatal("the token never visited a node other than the coordinator")
		}
		s.Crash(holder)
		if !s.RunUntil(bound, func() bool { return s.Store.Gen > before }) {
			t.Fatalf("no new generation after the token holder crashed (generation %d)", s.Store.Gen)
		}
		s.Start(holder)
		workEverywhere(s)
		if !s.RunUntil(bound, func() bool {
			return s.Healthy() == nil && !slices.ContainsFunc(s.Live(), func(id int64) bool { return pendingWork(s.Procs[id]) })
		}) {
			t.Fatalf("the ring does not deliver after a regeneration that followed a forged token: %v", s.Healthy())
		}
	}
}

// A TOKEN of the current generation at a later hop, its proof made without
// the generation's secret (the attacker has the cluster key, not the
// store): refused as stale and discarded, whatever the sequence.
func TestHostileTokenAtCurrentGeneration(t *testing.T) {
	for _, seq := range []int64{math.MaxInt64, 1 << 40, 1} {
		s := hostileSim(t, 106)
		s.IdleVisits = true
		victim := notCoordinator(s)
		n := s.Procs[victim].Node
		if !s.RunUntil(bound, func() bool { return !n.HoldsToken() && n.Predecessor() != 0 }) {
			t.Fatal("the victim always holds the token")
		}
		at := s.Now
		st := token.Stamp{Gen: s.Store.Gen, Seq: n.LastStamp().Seq + seq}
		if st.Seq < 0 {
			st.Seq = math.MaxInt64
		}
		s.Inject(victim, ring.Msg{Type: ring.MsgToken, Via: ring.ViaPred, From: n.Predecessor(), Epoch: s.Store.Epoch,
			Token: &token.Token{Stamp: st, Proof: token.Prove("guessed", st)}})
		workEverywhere(s)
		recovered(t, s, at, fmt.Sprintf("TOKEN at the current generation, sequence +%d", seq))
		if l := n.LastStamp(); l == st {
			t.Fatalf("seq %d: the victim recorded the forged stamp", seq)
		}
	}
}

// A TOKEN from a node that is not the predecessor: the attacker dials node
// 3 in node 5's name (a valid HELLO) while node 2 is 3's predecessor in
// the store's ring. The node asks the store, refuses the link with UNLINK
// and never acknowledges or visits the token. (Before, whoever last sent a
// valid HELLO became the predecessor, and its token was taken.)
func TestHostileTokenFromNotPredecessor(t *testing.T) {
	s := hostileSim(t, 107)
	s.IdleVisits = true
	var victim, stranger int64
	for _, id := range s.Live() {
		pred := s.Store.Topo.Predecessor(id)
		for _, o := range s.Live() {
			if o != id && o != pred {
				victim, stranger = id, o
			}
		}
		if victim != 0 {
			break
		}
	}
	n := s.Procs[victim].Node
	// The real predecessor is stopped, so that it does not dial in again
	// before the store answers (which would end the stranger's link).
	pred := s.Store.Topo.Predecessor(victim)
	s.Stall(pred)
	at := s.Now
	s.DialAs(victim, stranger)
	s.Step()
	forged := token.Stamp{Gen: s.Store.Gen, Seq: n.LastStamp().Seq + 1}
	s.Inject(victim, ring.Msg{Type: ring.MsgToken, Via: ring.ViaPred, From: stranger, Epoch: s.Store.Epoch,
		Token: &token.Token{Stamp: forged, Proof: token.Prove(Secret(s.Store.Gen), forged)}})
	refused := false
	trace := s.Trace
	s.Trace = func(line string) {
		trace(line)
		if strings.Contains(line, fmt.Sprintf("node %d: %s peer=%d", victim, ring.EventNotPredecessor, stranger)) {
			refused = true
		}
	}
	if !s.RunUntil(within2s(s), func() bool { return refused }) {
		t.Fatalf("node %d never refused the token from node %d, not its predecessor", victim, stranger)
	}
	if n.LastStamp() == forged {
		t.Fatalf("node %d took a token from node %d, which is not its predecessor", victim, stranger)
	}
	s.Wake(pred)
	workEverywhere(s)
	recovered(t, s, at, "TOKEN from a node that is not the predecessor")
}

// workEverywhere gives every running node work (a client's message), so
// that recovery means the ring delivers again everywhere.
func workEverywhere(s *Sim) {
	for _, id := range s.Live() {
		s.Work(id)
	}
}

// A SUCCESSOR the coordinator sent to node A, replayed to A's
// predecessor B within the replay window: obeyed, B would link past A and
// cut it out of the ring until the coordinator's next sync (10 s).
func TestHostileSuccessorReplayedToAnotherNode(t *testing.T) {
	s := hostileSim(t, 103)
	var a, b int64
	for _, id := range s.Live() {
		if next := s.Store.Topo[id]; id != s.Store.Coord && next != s.Store.Coord && next != id {
			a, b = next, id
			break
		}
	}
	if a == 0 {
		t.Fatal("no two adjacent nodes besides the coordinator")
	}
	at := s.Now
	s.Inject(b, ring.Msg{Type: ring.MsgSuccessor, Via: ring.ViaUDP, From: s.Store.Coord, To: a, Epoch: s.Store.Epoch,
		Succ: s.Store.Topo[a], Ver: 1 << 40})
	recovered(t, s, at, "SUCCESSOR for another node replayed")
}

// A TOKEN by UDP in the predecessor's name (UDP sources are not checked),
// at the largest generation: the token travels only on the ring link from
// the predecessor, so the node never takes it.
func TestHostileTokenByDatagram(t *testing.T) {
	s := hostileSim(t, 104)
	victim := notCoordinator(s)
	n := s.Procs[victim].Node
	at := s.Now
	s.Inject(victim, ring.Msg{Type: ring.MsgToken, Via: ring.ViaUDP, From: n.Predecessor(), To: victim, Epoch: s.Store.Epoch,
		Token: &token.Token{Stamp: token.Stamp{Gen: math.MaxInt64, Seq: 1}}})
	recovered(t, s, at, "TOKEN by UDP with a spoofed source")
	if s.Store.Refused != 0 {
		t.Errorf("%d critical sections refused: the node took the forged token", s.Store.Refused)
	}
}

// A PING or TOKEN_ACK by UDP in the name of the node's predecessor or
// successor is dropped: heartbeats and acknowledgements come on the ring
// links only.
func TestHostileHeartbeatAndAckByDatagram(t *testing.T) {
	s := hostileSim(t, 105)
	victim := notCoordinator(s)
	n := s.Procs[victim].Node
	succ, _ := n.Successor()
	s.flush(s.Procs[victim])
	n.Step(ring.Msg{Type: ring.MsgPing, Via: ring.ViaUDP, From: n.Predecessor(), To: victim, Epoch: s.Store.Epoch})
	n.Step(ring.Msg{Type: ring.MsgTokenAck, Via: ring.ViaUDP, From: succ, To: victim, Epoch: s.Store.Epoch,
		Stamp: &token.Stamp{Gen: s.Store.Gen, Seq: 1}, Stale: true})
	for _, m := range n.Ready().Msgs {
		if m.Type == ring.MsgPong {
			t.Errorf("answered a PING that came by UDP: %s", m)
		}
	}
	// The same PING on the link from the predecessor is answered.
	n.Step(ring.Msg{Type: ring.MsgPing, Via: ring.ViaPred, From: n.Predecessor(), Epoch: s.Store.Epoch})
	pong := false
	for _, m := range n.Ready().Msgs {
		pong = pong || m.Type == ring.MsgPong
	}
	if !pong {
		t.Error("no PONG to a PING on the link from the predecessor")
	}
	at := s.Now
	recovered(t, s, at, "PING and TOKEN_ACK by UDP")
}

// A TOKEN from a node that is not the predecessor, while the real
// predecessor dials in again before the store answers (its link was
// ended by the stranger's HELLO): the token is still refused and counted
// (before, it was dropped uncounted once its link had gone), never
// acknowledged or visited, and the real predecessor's new link stays.
func TestHostileTokenFromNotPredecessorWhileThePredecessorRelinks(t *testing.T) {
	s := hostileSim(t, 108)
	s.IdleVisits = true
	s.OpDelay = 20 // the store's answer comes after the predecessor's new HELLO
	var victim, stranger int64
	for _, id := range s.Live() {
		pred := s.Store.Topo.Predecessor(id)
		for _, o := range s.Live() {
			if o != id && o != pred && id != s.Store.Coord {
				victim, stranger = id, o
			}
		}
		if victim != 0 {
			break
		}
	}
	n := s.Procs[victim].Node
	pred := s.Store.Topo.Predecessor(victim)
	at := s.Now
	s.DialAs(victim, stranger)
	s.Step()
	forged := token.Stamp{Gen: s.Store.Gen, Seq: n.LastStamp().Seq + 1}
	s.Inject(victim, ring.Msg{Type: ring.MsgToken, Via: ring.ViaPred, From: stranger, Epoch: s.Store.Epoch,
		Token: &token.Token{Stamp: forged, Proof: token.Prove(Secret(s.Store.Gen), forged)}})
	refused, relinked := false, false
	trace := s.Trace
	s.Trace = func(line string) {
		trace(line)
		if strings.Contains(line, fmt.Sprintf("node %d: %s peer=%d", victim, ring.EventNotPredecessor, stranger)) {
			refused, relinked = true, n.Predecessor() == pred
		}
	}
	if !s.RunUntil(within2s(s), func() bool { return refused }) {
		t.Fatalf("node %d never counted the token from node %d, not its predecessor", victim, stranger)
	}
	if !relinked {
		t.Fatalf("the predecessor %d had not dialled in again when the token was refused (predecessor then %d): the schedule tests nothing", pred, n.Predecessor())
	}
	if n.LastStamp() == forged {
		t.Fatalf("node %d took a token from node %d, which is not its predecessor", victim, stranger)
	}
	workEverywhere(s)
	recovered(t, s, at, "TOKEN from a node that is not the predecessor while the predecessor relinks")
	if n.Predecessor() != s.Store.Topo.Predecessor(victim) {
		t.Fatalf("node %d's inbound link is from %d; the store names %d", victim, n.Predecessor(), s.Store.Topo.Predecessor(victim))
	}
}

// Two TOKENs on strangers' links in a row, the second before the store
// answered about the first: one token waits at a time, so the first is
// dropped without being taken and counted (token-unjudged), and the second
// is refused as not-predecessor. Before, the first went uncounted (seen
// in the chaos suite's barrage: a forged TOKEN in the predecessor's name
// waiting for a member check, replaced by the stranger's TOKEN sent just
// after it).
func TestHostileTokensFromTwoStrangersInARow(t *testing.T) {
	s := hostileSim(t, 109)
	s.IdleVisits = true
	s.OpDelay = 20 // both come before the store's answer
	var victim int64
	var strangers []int64
	for _, id := range s.Live() {
		if id == s.Store.Coord {
			continue
		}
		pred := s.Store.Topo.Predecessor(id)
		strangers = nil
		for _, o := range s.Live() {
			if o != id && o != pred {
				strangers = append(strangers, o)
			}
		}
		victim = id
		break
	}
	first, second := strangers[0], strangers[1]
	n := s.Procs[victim].Node
	unjudged, refused := false, false
	trace := s.Trace
	s.Trace = func(line string) {
		trace(line)
		switch {
		case strings.Contains(line, fmt.Sprintf("node %d: %s peer=%d", victim, ring.EventTokenUnjudged, first)):
			unjudged = true
		case strings.Contains(line, fmt.Sprintf("node %d: %s peer=%d", victim, ring.EventNotPredecessor, second)):
			refused = true
		}
	}
	at := s.Now
	var stamps []token.Stamp
	for i, from := range []int64{first, second} {
		s.DialAs(victim, from)
		s.Step()
		st := token.Stamp{Gen: s.Store.Gen, Seq: n.LastStamp().Seq + 1 + int64(i)}
		stamps = append(stamps, st)
		s.Inject(victim, ring.Msg{Type: ring.MsgToken, Via: ring.ViaPred, From: from, Epoch: s.Store.Epoch,
			Token: &token.Token{Stamp: st, Proof: token.Prove(Secret(s.Store.Gen), st)}})
		s.Step()
	}
	if !s.RunUntil(within2s(s), func() bool { return unjudged && refused }) {
		t.Fatalf("node %d: the first stranger's token (node %d) counted unjudged %v, the second's (node %d) refused %v", victim, first, unjudged, second, refused)
	}
	for _, st := range stamps {
		if n.LastStamp() == st {
			t.Fatalf("node %d took the token %s from a node that is not its predecessor", victim, st)
		}
	}
	workEverywhere(s)
	recovered(t, s, at, "TOKENs from two strangers in a row")
}
