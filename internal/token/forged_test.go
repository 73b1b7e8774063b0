package token

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// The store decides; a frame only proposes. These tests hand the machine
// tokens whose stamps no store issued and check that the real token, and
// the coordinator's next generation, are still taken.

// secretOf is the store's secret of generation gen in these tests.
func secretOf(gen int64) string { return fmt.Sprintf("secret of %d", gen) }

// real is a token of generation gen at hop seq as the ring makes it: with
// the proof under its generation's secret.
func real(gen, seq int64) Token {
	s := Stamp{Gen: gen, Seq: seq}
	return Token{Stamp: s, Proof: Prove(secretOf(gen), s)}
}

// storeAt returns a linked machine to which the store has confirmed
// generation gen (as a claim or a fence read tells it).
func storeAt(gen int64) *Machine {
	m := NewMachine(cfg())
	m.LinkUp()
	m.Confirm(gen, secretOf(gen))
	return m
}

// visitAndPass takes tok through a critical section that did no work and
// its ack, as a node without clients does.
func visitAndPass(t *testing.T, m *Machine, tok Token) {
	t.Helper()
	m.Receive(tok)
	got := m.Drain()
	if len(got) != 2 || got[0].Kind != SendAck || got[0].Stale || got[1].Kind != Visit {
		t.Fatalf("token %s: %+v, want an ack and a visit", tok.Stamp, got)
	}
	m.VisitDone(tok, true)
	sent := m.Drain()
	if len(sent) != 1 || sent[0].Kind != SendToken {
		t.Fatalf("token %s not passed on: %+v", tok.Stamp, sent)
	}
	m.Ack(sent[0].Token.Stamp, false)
}

// A token of a generation above the one the store confirmed is held back
// while the store is asked, and acknowledged with the answer; forged, it is
// discarded and the real token is taken next, with no store visit in
// between (a node without clients never runs one).
func TestForgedGenerationIsCheckedNotRecorded(t *testing.T) {
	for _, gen := range []int64{4, 1000, math.MaxInt64} {
		m := storeAt(3)
		visitAndPass(t, m, real(3, 5))
		forged := real(gen, 7)
		m.Receive(forged)
		want := []Action{{Kind: Check, Token: forged, Ask: m.asks}} // acknowledged with the store's answer
		if diff := cmp.Diff(want, m.Drain()); diff != "" {
			t.Fatalf("gen %d: a token of an unconfirmed generation (-want +got):\n%s", gen, diff)
		}
		if m.Holding() || m.Last() != (Stamp{Gen: 3, Seq: 5}) {
			t.Fatalf("gen %d: taken before the store answered (holding %v, last %s)", gen, m.Holding(), m.Last())
		}
		m.Checked(m.asks, 3, secretOf(3))
		if diff := cmp.Diff([]Action{{Kind: SendAck, Stamp: forged.Stamp, Stale: true}, {Kind: Forged, Token: forged}}, m.Drain()); diff != "" {
			t.Fatalf("gen %d: the store never issued it (-want +got):\n%s", gen, diff)
		}
		visitAndPass(t, m, real(3, 10))
	}
}

// A forged generation must not stop the coordinator: its new generation,
// issued by the store, is taken whatever the node saw.
func TestCoordinatorsGenerationWinsOverForged(t *testing.T) {
	m := storeAt(3)
	m.SetCoordinator(true, 3, false)
	m.Receive(Token{Stamp: Stamp{Gen: math.MaxInt64, Seq: math.MaxInt64}})
	m.Drain()
	m.Generated(Stamp{Gen: 4}, secretOf(4))
	if tok, ok := m.Held(); !ok || tok.Stamp != (Stamp{Gen: 4}) {
		t.Fatalf("holding %v %s, want the new generation 4/0", ok, tok.Stamp)
	}
	// The forged token's answer comes late: it changes nothing.
	m.Checked(m.asks, 4, secretOf(4))
	if tok, ok := m.Held(); !ok || tok.Stamp != (Stamp{Gen: 4}) {
		t.Fatalf("after the late answer: holding %v %s", ok, tok.Stamp)
	}
	for _, a := range m.Drain() {
		if a.Kind == Visit && a.Token.Gen != 4 {
			t.Fatalf("visit with %s", a.Token.Stamp)
		}
	}
}

// A real new generation is taken once the store confirms it, and the
// store's word also ends the old generation here.
func TestNewGenerationTakenAfterOneCheck(t *testing.T) {
	m := storeAt(3)
	visitAndPass(t, m, real(3, 5))
	m.Receive(real(4, 2))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check}) {
		t.Fatalf("got %v", got)
	}
	m.Checked(m.asks, 4, secretOf(4))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("after the store confirmed generation 4: %v, want a visit", got)
	}
	m.VisitDone(real(4, 2), true)
	m.Drain()
	m.Ack(Stamp{Gen: 4, Seq: 3}, false)
	// Confirmed now: the next token of generation 4 needs no check, and
	// generation 3 is stale.
	m.Receive(real(4, 8))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("a confirmed generation: %v", got)
	}
	m.Receive(real(3, 99))
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("an old generation after the store's word: %+v", a)
	}
}

// Questions to the store are rate-limited: one out at a time, one per
// checkGapTicks; of the tokens waiting, the lowest generation stays (a
// forged one far ahead never pushes out a real new one).
func TestChecksAreRateLimited(t *testing.T) {
	m := storeAt(3)
	m.Receive(real(4, 1))
	m.Drain()
	for i := range 50 {
		m.Receive(Token{Stamp: Stamp{Gen: math.MaxInt64 - int64(i), Seq: 1}})
	}
	checks := 0
	for _, a := range m.Drain() {
		if a.Kind == Check {
			checks++
		}
	}
	if checks != 0 {
		t.Fatalf("%d more questions while one was out", checks)
	}
	m.Checked(m.asks, 4, secretOf(4))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("the real token of generation 4 was pushed out: %v", got)
	}
	m.VisitDone(real(4, 1), true)
	m.Drain()
	m.Ack(Stamp{Gen: 4, Seq: 2}, false)
	m.Receive(real(9, 1))
	if got := kinds(m.Drain()); len(got) != 0 {
		t.Fatalf("asked again within the gap: %v", got)
	}
	for range checkGapTicks {
		m.Tick()
	}
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check}) {
		t.Fatalf("after the gap: %v, want the question", got)
	}
}

// A node that cannot reach the store passes an unconfirmed token on as it
// came (it cannot prove a next hop), without a visit and without
// recording it.
func TestUncheckedTokenPassedOn(t *testing.T) {
	m := storeAt(3)
	tok := real(4, 1)
	m.Receive(tok)
	m.Drain()
	m.CheckFailed(m.asks)
	got := m.Drain()
	if len(got) != 2 || got[0].Kind != SendAck || got[0].Stale || got[1].Kind != SendToken ||
		got[1].Token.Stamp != tok.Stamp || got[1].Token.Proof != tok.Proof {
		t.Fatalf("got %+v, want it acknowledged and sent on as it came", got)
	}
	if m.Last() != (Stamp{}) {
		t.Fatalf("recorded %s", m.Last())
	}
	m.Ack(tok.Stamp, false)
	if m.Holding() {
		t.Fatal("still held after its ack")
	}
}

// A token of the current generation whose proof does not match its stamp
// (a key holder's forgery: it does not know the generation's secret) is
// refused as stale and discarded; the real token is taken next.
func TestForgedSequenceRefused(t *testing.T) {
	for _, seq := range []int64{6, 1 << 40, math.MaxInt64} {
		m := storeAt(3)
		visitAndPass(t, m, real(3, 5))
		forged := Token{Stamp: Stamp{Gen: 3, Seq: seq}, Proof: Prove(secretOf(2), Stamp{Gen: 3, Seq: seq})}
		m.Receive(forged)
		want := []Action{{Kind: SendAck, Stamp: forged.Stamp, Stale: true}, {Kind: Forged, Token: forged}}
		if diff := cmp.Diff(want, m.Drain()); diff != "" {
			t.Fatalf("seq %d (-want +got):\n%s", seq, diff)
		}
		if m.Last() != (Stamp{Gen: 3, Seq: 5}) || m.Holding() {
			t.Fatalf("seq %d: recorded %s, holding %v", seq, m.Last(), m.Holding())
		}
		visitAndPass(t, m, real(3, 10))
	}
}

// Each hop proves its stamp: the token a node sends on carries the proof
// of the next stamp under the generation's secret.
func TestForwardedTokenProvesItsHop(t *testing.T) {
	m := storeAt(3)
	m.Receive(real(3, 5))
	m.Drain()
	m.VisitDone(real(3, 5), true)
	got := m.Drain()
	if len(got) != 1 || got[0].Token.Proof != real(3, 6).Proof {
		t.Fatalf("sent %+v, want 3/6 with its proof", got)
	}
}

// The fence read after a refused visit names the store's generation: a
// forged stamp never raises the bar above it.
func TestFencedVisitDropsToken(t *testing.T) {
	m := storeAt(3)
	tok := real(3, 1)
	m.Receive(tok)
	m.Drain()
	m.VisitFenced(tok, &Stamp{Gen: 4})
	if m.Holding() || !cmp.Equal([]ActionKind{Dropped}, kinds(m.Drain())) {
		t.Fatal("a fenced-off token is still held")
	}
	m.Receive(real(3, 8))
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("a token of the fenced generation was accepted: %+v", a)
	}
	m.Receive(real(4, 8))
	m.Checked(m.asks, 4, secretOf(4))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check, SendAck, Visit}) {
		t.Fatalf("the store's generation after the fence read: %v", got)
	}
}

// A copy of the current generation refused by the fence (another copy
// wrote a newer stamp) ends the generation here: the next is checked.
func TestFencedCopyEndsTheGeneration(t *testing.T) {
	m := storeAt(3)
	tok := real(3, 1)
	m.Receive(tok)
	m.Drain()
	m.VisitFenced(tok, &Stamp{Gen: 3, Seq: 9})
	m.Drain()
	m.Receive(real(3, 20))
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("a copy of the ended generation: %+v", a)
	}
	m.Receive(real(4, 0))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check}) {
		t.Fatalf("the next generation: %v, want it checked", got)
	}
}

// A token at the largest sequence cannot move on (the next hop would wrap
// round to the smallest): it ends here.
func TestTokenAtLargestSequenceEnds(t *testing.T) {
	m := storeAt(3)
	tok := Token{Stamp: Stamp{Gen: 3, Seq: math.MaxInt64}}
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, true)
	for _, a := range m.Drain() {
		if a.Kind == SendToken {
			t.Fatalf("sent on as %s", a.Token.Stamp)
		}
	}
	if m.Holding() {
		t.Fatal("still held")
	}
}

// TestForgedStampsNeverStopTheRealToken: whatever tokens a key holder
// forges (any generation and sequence, the edges of int64 included), with
// the store answering each question truthfully, every real token newer
// than the last real one is taken at once or after one check, and the
// coordinator's new generation always is.
func TestForgedStampsNeverStopTheRealToken(t *testing.T) {
	edge := rapid.SampledFrom([]int64{math.MinInt64, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64})
	rapid.Check(t, func(rt *rapid.T) {
		gen := rapid.Int64Range(1, 100).Draw(rt, "store generation")
		m := storeAt(gen)
		coord := rapid.Bool().Draw(rt, "coordinator")
		m.SetCoordinator(coord, 3, false)
		m.Drain()
		for i := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 3).Draw(rt, "step") {
			case 0: // a forged token of a generation the store never issued
				g := rapid.OneOf(edge, rapid.Int64Range(gen+1, gen+3)).Draw(rt, "forged gen")
				if g <= gen && g >= 0 {
					g = gen + 1
				}
				s := rapid.OneOf(edge, rapid.Int64Range(0, 1000)).Draw(rt, "forged seq")
				m.Receive(real(g, s))
			case 1: // the store answers a question
				m.Checked(m.asks, gen, secretOf(gen))
			case 2: // time passes
				m.Tick()
			case 3: // the coordinator regenerates
				if coord {
					gen++
					m.Generated(Stamp{Gen: gen}, secretOf(gen))
					if tok, ok := m.Held(); !ok || tok.Stamp != (Stamp{Gen: gen}) {
						rt.Fatalf("step %d: the new generation %d was not taken", i, gen)
					}
				}
			}
			m.Drain()
			if l := m.Last(); l.Gen > gen {
				rt.Fatalf("step %d: recorded %s, a generation the store never issued (%d)", i, l, gen)
			}
			if tok, ok := m.Held(); ok && tok.Proof != Prove(secretOf(tok.Gen), tok.Stamp) {
				rt.Fatalf("step %d: holds %s, which no node that knows the secret made", i, tok.Stamp)
			}
		}
		// Bring the real token through: any held token leaves first.
		m.Checked(m.asks, gen, secretOf(gen))
		if tok, ok := m.Held(); ok {
			m.VisitDone(tok, true)
			for _, a := range m.Drain() {
				if a.Kind == SendToken {
					m.Ack(a.Token.Stamp, false)
				}
			}
		}
		m.Drain()
		seq := int64(1000)
		if l := m.Last(); l.Gen == gen {
			seq += l.Seq // the coordinator's own hops
		}
		tok := real(gen, seq)
		m.Receive(tok)
		got := m.Drain()
		if len(got) < 2 || got[0].Stale || got[len(got)-1].Kind != Visit {
			rt.Fatalf("the real token %s after the forged ones: %+v (last %s)", tok.Stamp, got, m.Last())
		}
	})
}

// TestProofExample checks the worked example of docs/PROTOCOL.md against
// Prove, and that the document still gives it.
func TestProofExample(t *testing.T) {
	const secret = "5f1c0a9e8d7b6a594837261504f3e2d1c0b9a8978675645342312f1e0d0c0b0a"
	const want = "b0cf48558ded7dcc"
	if got := Prove(secret, Stamp{Gen: 4, Seq: 112}); got != want {
		t.Fatalf("Prove = %s, want %s", got, want)
	}
	doc, err := os.ReadFile("../../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secret, "stamp 4/112 has the proof `" + want + "`"} {
		if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), s) {
			t.Errorf("docs/PROTOCOL.md does not give %q", s)
		}
	}
}

// A question whose answer never comes (its operation was lost) is asked
// again, so a token of a new generation is never held back for good.
func TestLostCheckAskedAgain(t *testing.T) {
	m := storeAt(3)
	m.Receive(real(4, 1))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check}) {
		t.Fatalf("got %v", got)
	}
	for i := 1; i <= checkLostTicks+checkGapTicks; i++ {
		if next := m.NextDeadline(); next > m.now+1 && i < checkLostTicks {
			m.Skip(next - 1)
		}
		m.Tick()
		if got := kinds(m.Drain()); len(got) > 0 {
			if !cmp.Equal(got, []ActionKind{Check}) || m.now < checkLostTicks {
				t.Fatalf("tick %d: %v", m.now, got)
			}
			m.Checked(m.asks, 4, secretOf(4))
			if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
				t.Fatalf("after the second answer: %v", got)
			}
			return
		}
	}
	t.Fatal("never asked again")
}

// askedAfterTheGap ticks m through the gap between two questions and
// checks that exactly one question, about want, is asked, at the tick
// NextDeadline names and not before.
func askedAfterTheGap(t *testing.T, m *Machine, want Token) {
	t.Helper()
	at := m.NextDeadline()
	if at != m.checkAt || at <= m.now {
		t.Fatalf("NextDeadline %d at tick %d, want the end of the gap %d", at, m.now, m.checkAt)
	}
	for m.now < at-1 {
		m.Tick()
		if got := m.Drain(); len(got) != 0 {
			t.Fatalf("tick %d: %+v within the gap", m.now, got)
		}
	}
	asked := m.asks
	m.Tick()
	if diff := cmp.Diff([]Action{{Kind: Check, Token: want, Ask: asked + 1}}, m.Drain()); diff != "" {
		t.Fatalf("tick %d: the question about %s (-want +got):\n%s", m.now, want.Stamp, diff)
	}
}

// An answer judges only the token it was asked about. A real token of a
// newer generation that came while the question about another was out
// (that one was replaced, or cleared by the store's word) may be of a
// generation issued after the read: it is asked about again, not dropped
// as forged, and taken with the second answer.
func TestAnswerDoesNotJudgeATokenThatCameAfterIt(t *testing.T) {
	cases := []struct {
		name   string
		before func(m *Machine) // A is held back and asked about; then this
		old    int64            // the answer to the question about A
		real   Token            // B, real, comes after the question
		wait   int              // ticks before the answer comes
	}{
		{
			// The trail of the model: a member check raises the minimum
			// generation past A while the question is out.
			name:   "cleared",
			before: func(m *Machine) { m.Receive(real(4, 1)); m.Confirm(5, secretOf(5)) },
			old:    4,
			real:   real(6, 2),
		},
		{
			// A forged token far ahead is replaced by the real new
			// generation (the lower one stays), issued after the read.
			name:   "replaced",
			before: func(m *Machine) { m.Receive(Token{Stamp: Stamp{Gen: math.MaxInt64, Seq: 1}}) },
			old:    3,
			real:   real(4, 2),
		},
		{
			// The answer comes after the gap: B is asked about at once.
			name:   "late",
			before: func(m *Machine) { m.Receive(real(4, 1)); m.Confirm(5, secretOf(5)) },
			old:    4,
			real:   real(6, 2),
			wait:   checkGapTicks,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := storeAt(3)
			c.before(m)
			if got := kinds(m.Drain()); len(got) == 0 || got[0] != Check {
				t.Fatalf("the first token was not asked about: %v", got)
			}
			m.Receive(c.real)
			if got := kinds(m.Drain()); len(got) != 0 && !cmp.Equal(got, []ActionKind{SendAck, Forged}) {
				t.Fatalf("the real token came: %v, want it held back (and A refused if it was there)", got)
			}
			for range c.wait {
				m.Tick()
			}
			m.Checked(m.asks, c.old, secretOf(c.old))
			var want []Action // asked about at once if the gap has passed
			if c.wait >= checkGapTicks {
				want = []Action{{Kind: Check, Token: c.real, Ask: m.asks}}
			}
			if diff := cmp.Diff(want, m.Drain()); diff != "" {
				t.Fatalf("the answer about the first token, for %s (-want +got):\n%s", c.real.Stamp, diff)
			}
			if m.Holding() {
				t.Fatal("taken on an answer that does not confirm its generation")
			}
			if want == nil {
				askedAfterTheGap(t, m, c.real)
			}
			m.Checked(m.asks, c.real.Gen, secretOf(c.real.Gen))
			want = []Action{{Kind: SendAck, Stamp: c.real.Stamp}, {Kind: Visit, Token: c.real}}
			if diff := cmp.Diff(want, m.Drain()); diff != "" {
				t.Fatalf("the answer about %s (-want +got):\n%s", c.real.Stamp, diff)
			}
		})
	}
}

// An answer that settles a token that came after the question (it
// confirms the token's generation: the read ran after that came) judges
// it at once: taken if it proves its stamp, forged otherwise. And the token
// the question was about is judged by its answer as before.
func TestAnswerSettlesATokenThatCameAfterIt(t *testing.T) {
	b := real(6, 2)
	forged := Token{Stamp: b.Stamp, Proof: Prove(secretOf(5), b.Stamp)}
	for _, c := range []struct {
		name string
		tok  Token
		want []Action
	}{
		{"real", b, []Action{{Kind: SendAck, Stamp: b.Stamp}, {Kind: Visit, Token: b}}},
		{"forged", forged, []Action{{Kind: SendAck, Stamp: b.Stamp, Stale: true}, {Kind: Forged, Token: forged}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := storeAt(3)
			m.Receive(real(4, 1))
			m.Confirm(5, secretOf(5)) // clears 4/1
			m.Drain()
			m.Receive(c.tok)
			if got := m.Drain(); len(got) != 0 {
				t.Fatalf("%+v while a question is out", got)
			}
			m.Checked(m.asks, 6, secretOf(6))
			if diff := cmp.Diff(c.want, m.Drain()); diff != "" {
				t.Fatalf("an answer that confirms its generation (-want +got):\n%s", diff)
			}
		})
	}
	// The token asked about, of a generation the answer does not
	// confirm, is forged: dropped, not asked about again.
	m := storeAt(3)
	m.Receive(real(6, 2))
	m.Drain()
	m.Checked(m.asks, 5, secretOf(5))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Forged}) {
		t.Fatalf("the token asked about, above the answer: %v, want it refused as forged", got)
	}
	for range checkGapTicks + 1 {
		m.Tick()
	}
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("after the gap: %+v", got)
	}
}

// A question given up as lost (unanswered for checkLostTicks) is asked
// again under a new number. The lost one's answer, if it still comes, may
// have been read before the token's generation was issued: it judges no
// token (before, a real token was refused as forged by it, costing a
// regeneration), and its failure passes nothing on; the new question's
// answer judges.
func TestAnswerToAQuestionGivenUpJudgesNothing(t *testing.T) {
	for _, failed := range []bool{false, true} {
		m := storeAt(3)
		tok := real(4, 1)
		m.Receive(tok)
		if diff := cmp.Diff([]Action{{Kind: Check, Token: tok, Ask: 1}}, m.Drain()); diff != "" {
			t.Fatalf("the first question (-want +got):\n%s", diff)
		}
		for range checkGapTicks + checkLostTicks {
			m.Tick()
		}
		if diff := cmp.Diff([]Action{{Kind: Check, Token: tok, Ask: 2}}, m.Drain()); diff != "" {
			t.Fatalf("tick %d: asked again once given up (-want +got):\n%s", m.now, diff)
		}
		if failed {
			m.CheckFailed(1)
		} else {
			m.Checked(1, 3, secretOf(3)) // read before generation 4 was issued
		}
		if got := m.Drain(); len(got) != 0 || m.Holding() {
			t.Fatalf("failed %v: the lost question's answer judged the token: %+v (holding %v)", failed, got, m.Holding())
		}
		m.Checked(2, 4, secretOf(4))
		want := []Action{{Kind: SendAck, Stamp: tok.Stamp}, {Kind: Visit, Token: tok}}
		if diff := cmp.Diff(want, m.Drain()); diff != "" {
			t.Fatalf("failed %v: the new question's answer (-want +got):\n%s", failed, diff)
		}
	}
}

// A token held back while the store is asked about its generation, and
// dropped because the node resets before the answer (it found itself out
// of the ring, or rejoins), is refused and reported as unjudged: never
// taken, never recorded, and counted, so that a forged one sent just
// before a reset is not lost from the node's counters.
func TestResetWhileCheckingReportsTheTokenUnjudged(t *testing.T) {
	m := storeAt(3)
	forged := Token{Stamp: Stamp{Gen: 1<<63 - 1}}
	m.Receive(forged)
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check}) {
		t.Fatalf("got %v, want the store asked", got)
	}
	m.Reset()
	as := m.Drain()
	if got := kinds(as); !cmp.Equal(got, []ActionKind{SendAck, Unjudged}) {
		t.Fatalf("got %v, want a stale ack and the token reported unjudged", got)
	}
	if !as[0].Stale || as[1].Token.Stamp != forged.Stamp {
		t.Fatalf("got %+v", as)
	}
	if m.Last().Gen == forged.Gen {
		t.Fatal("the unjudged stamp was recorded")
	}
	// Nothing is left to judge: an answer now changes nothing.
	m.Checked(1, 3, secretOf(3))
	if got := kinds(m.Drain()); len(got) != 0 {
		t.Fatalf("an answer after the reset did %v", got)
	}
}
