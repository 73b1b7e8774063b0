package token

// Tests that would notice wrong safety code (issue 27, item 8): each one
// asserts a behaviour of the token machine that a surviving mutant of
// gremlins v0.6.0 broke without any test noticing.
//
// Score (gremlins' "Test efficacy": killed / (killed + lived)) of the
// package's own tests, with
//
//	gremlins unleash --workers 1 --invert-logical --invert-loopctrl \
//	  --remove-self-assignments --invert-assignments ./internal/token
//
// before these tests: 63.45 % (killed 92, lived 53, not covered 61,
// timed out 1); with them and --timeout-coefficient 10 added: 94.41 %
// (killed 152, lived 9, not covered 46, timed out 0). Without that flag
// a loaded machine's mutant builds outlast gremlins' default timeout (3
// times a test run of a few milliseconds): 95.07 %, 19 TIMED OUT, each of
// them killed when run by hand.
//
// Measured again at 3a07d84 (the link proofs, Genuine, the past
// generations' secrets and Keys since), with `make mutation
// PKG=internal/token` (4 min here): 93.33 % (killed 196, lived 14). One
// survivor, machine.go:248 Genuine's first `&&` → `||` (a token proven
// under the empty secret, or under another generation's secret, taken as
// genuine), is killed since by TestGenuine's new cases (checked by hand).
//
// Surviving mutants, all equivalent (no input tells them apart):
//
//   - token.go:25 Newer `s.Gen > t.Gen` → `>=`: reached only when
//     s.Gen != t.Gen.
//   - token.go:129, 138, 148, 163 and machine.go:669 `n < 1` → `n <= 1`
//     (RotationBound, HurriedRotation, LapBound, LossBound, SetRingSize):
//     n == 1 is set to 1.
//   - token.go:76 the capacity `len(label)+1+16` of prove's buffer
//     changed: append grows it.
//   - machine.go:519 raiseMinGen `g <= m.minGen` → `g < m.minGen`: raising
//     to the current minimum again finds nothing to drop (a held or held
//     back token below it was refused or dropped when it was raised, and
//     tokens taken since are of a generation at least as high).
//   - machine.go:709 suspectWithin `soon < m.lossDeadline` → `<=`: when
//     equal, the deadline is set to the value it has.
//   - machine.go:800 Skip `to > m.now` → `to >= m.now`: skipping to now
//     sets now to itself.
//   - machine.go:488 VisitFenced `t.Gen > m.known || t.Gen == maxGen` →
//     `&&`: only tokens of a confirmed generation visit, so t.Gen >
//     m.known never holds there.
//   - machine.go:508 Confirm's inner `g > m.known && m.secret != ""`:
//     `>=` is reached only with g > m.known or with no secret yet; `||`
//     also keeps a generation without a secret in past, which happens
//     only at the first confirmation (past is empty then) and proves
//     nothing (Secrets and ProvesLink skip an empty secret).
//
// gremlins reports the mutants of a switch's case expressions (accept,
// Checked, VisitFenced, forward, Tick, NextDeadline) as NOT COVERED (its
// coverage reading skips case lines) and never runs them. Each was run by
// hand (the mutated machine.go given to go test -overlay): all are killed
// but machine.go:229 `||` → `&&`, which go vet refuses to build
// (`x == a && x == b`).

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A duplicate of a token of the store's current generation (a resend after
// a lost ack), or an older hop of it, is acknowledged and never visited
// again: only the newest stamp is taken.
func TestOldHopOfTheConfirmedGenerationNotTaken(t *testing.T) {
	m := storeAt(3)
	visitAndPass(t, m, real(3, 5))
	m.Receive(real(3, 5))
	if diff := cmp.Diff([]Action{{Kind: SendAck, Stamp: Stamp{Gen: 3, Seq: 5}}}, m.Drain()); diff != "" {
		t.Fatalf("a duplicate of the current generation (-want +got):\n%s", diff)
	}
	m.Receive(real(3, 2))
	if diff := cmp.Diff([]Action{{Kind: SendAck, Stamp: Stamp{Gen: 3, Seq: 2}, Stale: true}}, m.Drain()); diff != "" {
		t.Fatalf("an older hop of the current generation (-want +got):\n%s", diff)
	}
	if m.Holding() {
		t.Fatal("an old hop is held")
	}
}

// The counters a token carries are bounded by the ring size on arrival, as
// the visit sees them: a forged Quiet far above two laps rests the token
// once (not forever, nor round through an overflow), and a negative one
// counts as none.
func TestTokenCountersBoundedOnArrival(t *testing.T) {
	m := storeAt(3)
	m.SetRingSize(3)
	tok := real(3, 1)
	tok.Quiet, tok.Busy = math.MaxInt, -7
	m.Receive(tok)
	got := m.Drain()
	if len(got) != 2 || got[1].Kind != Visit {
		t.Fatalf("got %+v, want an ack and a visit", got)
	}
	v := got[1].Token
	if v.Quiet != 6 || v.Busy != 0 {
		t.Fatalf("visit sees Quiet %d Busy %d, want 6 (two laps of 3) and 0", v.Quiet, v.Busy)
	}
	m.VisitDone(v, false)
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("a token quiet for two laps was not rested: %+v", got)
	}
	for range cfg().IdleHoldTicks {
		m.Tick()
	}
	got = m.Drain()
	if len(got) != 1 || got[0].Kind != SendToken || got[0].Token.Quiet != 0 {
		t.Fatalf("after the rest: %+v, want it sent on with Quiet 0", got)
	}
	m.Ack(got[0].Token.Stamp, false)

	tok = real(3, 10)
	tok.Quiet, tok.Busy = -5, math.MaxInt
	m.Receive(tok)
	got = m.Drain()
	if v := got[len(got)-1].Token; v.Quiet != 0 || v.Busy != 3 {
		t.Fatalf("visit sees Quiet %d Busy %d, want 0 and 3 (the ring size)", v.Quiet, v.Busy)
	}
}

// One token of an unconfirmed generation waits for the store's answer:
// the same one again (resent on a new link) changes nothing; a newer hop
// of its generation replaces it; a lower generation replaces a higher one
// (the nearer to what the store issued), whichever came first.
func TestHeldBackTokenChoice(t *testing.T) {
	t.Run("same again, then a newer hop", func(t *testing.T) {
		m := storeAt(3)
		m.Receive(real(4, 1))
		m.Drain()
		m.Receive(real(4, 1))
		if diff := cmp.Diff([]Action(nil), m.Drain()); diff != "" {
			t.Fatalf("the held-back token again (-want +got):\n%s", diff)
		}
		m.Receive(real(4, 3))
		want := []Action{{Kind: SendAck, Stamp: Stamp{Gen: 4, Seq: 1}, Stale: true}, {Kind: Forged, Token: real(4, 1)}}
		if diff := cmp.Diff(want, m.Drain()); diff != "" {
			t.Fatalf("a newer hop of the held-back generation (-want +got):\n%s", diff)
		}
		m.Checked(m.asks, 4, secretOf(4))
		got := m.Drain()
		if len(got) != 2 || got[0].Kind != SendAck || got[0].Stale || got[1].Kind != Visit || got[1].Token.Stamp != (Stamp{Gen: 4, Seq: 3}) {
			t.Fatalf("after the answer: %+v, want 4/3 acknowledged and visited", got)
		}
	})
	t.Run("a lower generation after a higher one", func(t *testing.T) {
		m := storeAt(3)
		far := real(9, 1)
		m.Receive(far)
		m.Drain()
		m.Receive(real(4, 1))
		want := []Action{{Kind: SendAck, Stamp: far.Stamp, Stale: true}, {Kind: Forged, Token: far}}
		if diff := cmp.Diff(want, m.Drain()); diff != "" {
			t.Fatalf("the real next generation after a forged far one (-want +got):\n%s", diff)
		}
		m.Checked(m.asks, 4, secretOf(4))
		got := m.Drain()
		if len(got) != 2 || got[0].Kind != SendAck || got[0].Stale || got[1].Kind != Visit || got[1].Token.Stamp != (Stamp{Gen: 4, Seq: 1}) {
			t.Fatalf("after the answer: %+v, want 4/1 acknowledged and visited", got)
		}
	})
}

// regenAt ticks m until it asks for a regeneration (at most limit ticks)
// and returns the tick, or -1.
func regenAt(m *Machine, limit int) int64 {
	for range limit {
		m.Tick()
		for _, a := range m.Drain() {
			if a.Kind == Regenerate {
				return m.now
			}
		}
	}
	return -1
}

// A node that becomes coordinator of a ring that has a token waits a full
// loss bound before it makes a new one; becoming coordinator again (a new
// term, a new ring size) does not restart the wait.
// A coordinator of a ring just formed without a token makes one at once.
func TestCoordinatorLossTimer(t *testing.T) {
	c := cfg()
	bound := int64(c.LossBound(3))
	t.Run("new coordinator", func(t *testing.T) {
		m := storeAt(3)
		m.SetCoordinator(true, 3, false)
		if at := regenAt(m, 3*int(bound)); at != bound {
			t.Fatalf("regenerated at tick %d, want %d (the loss bound)", at, bound)
		}
	})
	t.Run("again coordinator", func(t *testing.T) {
		m := storeAt(3)
		m.SetCoordinator(true, 3, false)
		for range bound - 1 {
			m.Tick()
		}
		m.Drain()
		m.SetCoordinator(true, 3, false)
		if at := regenAt(m, 1); at != bound {
			t.Fatalf("regenerated at tick %d, want %d: becoming coordinator again restarted the wait", at, bound)
		}
	})
	t.Run("fresh ring", func(t *testing.T) {
		m := storeAt(3)
		m.SetCoordinator(true, 3, true)
		if next := m.NextDeadline(); next != m.now+1 {
			t.Fatalf("NextDeadline %d at tick %d, want the next tick", next, m.now)
		}
		if at := regenAt(m, 1); at != 1 {
			t.Fatalf("a fresh ring's coordinator regenerated at tick %d, want 1", at)
		}
	})
	t.Run("fresh ring, token held", func(t *testing.T) {
		// A token taken before the ring was formed: the coordinator does
		// not make another while it is on its way, even once its visit is
		// refused (a newer token then gets a rotation and a hop to come).
		m := storeAt(3)
		m.Receive(real(3, 1))
		m.Drain()
		m.SetCoordinator(true, 3, true)
		m.VisitFenced(real(3, 1), &Stamp{Gen: 3, Seq: 9})
		m.Drain()
		soon := int64(c.RotationBound(3) + c.HopTicks)
		if at := regenAt(m, 3*int(bound)); at != soon {
			t.Fatalf("regenerated at tick %d, want %d", at, soon)
		}
	})
}

// A refused visit's report counts only for the token held: a late report
// of a superseded visit, or one when nothing is held, changes nothing. A
// refusal whose fence could not be read ends the token's generation here.
func TestVisitFencedOnlyForTheHeldToken(t *testing.T) {
	m := storeAt(3)
	m.VisitFenced(real(3, 1), &Stamp{Gen: 3, Seq: 9})
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("nothing held: %+v", got)
	}
	m.Receive(real(3, 1))
	m.Receive(real(3, 9)) // supersedes 3/1 while it is visited
	m.Drain()
	m.VisitFenced(real(3, 1), &Stamp{Gen: 3, Seq: 9})
	if h, ok := m.Held(); !ok || h.Stamp != (Stamp{Gen: 3, Seq: 9}) || len(m.Drain()) != 0 {
		t.Fatalf("a superseded visit's refusal: held %s %v, want 3/9 still", h.Stamp, ok)
	}
	m.VisitDone(real(3, 9), true)
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendToken}) {
		t.Fatalf("3/9 after its visit: %v", got)
	}

	m = storeAt(3)
	m.Receive(real(3, 1))
	m.Drain()
	m.VisitFenced(real(3, 1), nil)
	if m.Holding() || !cmp.Equal(kinds(m.Drain()), []ActionKind{Dropped}) {
		t.Fatal("a refused token is still held")
	}
	m.Receive(real(3, 20))
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("a copy of the refused generation: %+v", a)
	}
}

// The store's secret of a generation, once known, is kept: a later read
// that names the generation without its secret does not make real tokens
// look forged; a read that brings the secret of a generation known only
// by number fills it in; an older generation never replaces a newer one.
func TestConfirmKeepsTheGenerationsSecret(t *testing.T) {
	m := storeAt(3)
	m.Confirm(3, "")
	m.Receive(real(3, 5))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("after a read without the secret: %v, want the real token taken", got)
	}

	m = NewMachine(cfg())
	m.LinkUp()
	m.Confirm(3, "")
	m.Confirm(3, secretOf(3))
	m.Receive(real(3, 5))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("after the secret came: %v, want the real token taken", got)
	}

	m = storeAt(5)
	m.Confirm(3, secretOf(3))
	m.Receive(real(5, 1))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("after an older generation's read: %v", got)
	}
}

// A token this node passes on unconfirmed (it could not ask the store) is
// not dropped when the store then names its generation: it is still
// resent if its successor fails.
func TestPassedOnTokenKeptWhenItsGenerationIsConfirmed(t *testing.T) {
	m := storeAt(3)
	m.Receive(real(4, 1))
	m.Drain()
	m.CheckFailed(m.asks)
	m.Drain()
	m.LinkDown()
	m.Confirm(4, secretOf(4))
	if !m.Holding() || len(m.Drain()) != 0 {
		t.Fatal("the token being passed on was dropped")
	}
	m.LinkUp()
	got := m.Drain()
	if len(got) != 1 || got[0].Kind != SendToken || got[0].Token.Stamp != (Stamp{Gen: 4, Seq: 1}) {
		t.Fatalf("on the new link: %+v, want 4/1 resent", got)
	}
}

// An ack that arrives after the successor link went down still releases
// the token: it is not sent again on the next link.
func TestAckWhileBlockedReleases(t *testing.T) {
	for _, stale := range []bool{false, true} {
		m := storeAt(3)
		m.Receive(real(3, 1))
		m.VisitDone(real(3, 1), true)
		m.Drain()
		m.LinkDown()
		m.Ack(Stamp{Gen: 3, Seq: 2}, stale)
		if m.Holding() {
			t.Fatalf("stale %v: still held after its ack", stale)
		}
		m.Drain()
		m.LinkUp()
		if got := m.Drain(); len(got) != 0 {
			t.Fatalf("stale %v: sent again after its ack: %+v", stale, got)
		}
	}
}

// A question to the store is not asked again while its answer may still
// come, and is asked again at the deadline NextDeadline names, so a
// runtime that sleeps until then loses no time.
func TestLostQuestionAskedAgainAtItsDeadline(t *testing.T) {
	m := storeAt(3)
	m.Receive(real(4, 1))
	m.Drain() // asked at tick 0
	want := int64(checkGapTicks + checkLostTicks)
	if next := m.NextDeadline(); next != want {
		t.Fatalf("NextDeadline %d with the question out, want %d", next, want)
	}
	for m.now < want-1 {
		m.Tick()
		if got := m.Drain(); len(got) != 0 {
			t.Fatalf("tick %d: %+v while the answer may still come", m.now, got)
		}
	}
	m.Tick()
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Check}) {
		t.Fatalf("tick %d: %v, want the question asked again", m.now, got)
	}
}

// The coordinator's new generation is taken even when a fence read told
// the node of that generation first; a token held back as of it or below
// came before the store issued it, and is discarded then; a token passed
// on unconfirmed is reported dropped.
func TestGeneratedAgainstWhatTheNodeHeard(t *testing.T) {
	coord := func() *Machine {
		m := storeAt(3)
		m.SetCoordinator(true, 3, false)
		return m
	}
	m := coord()
	m.Confirm(4, secretOf(4))
	m.Generated(Stamp{Gen: 4}, secretOf(4))
	if h, ok := m.Held(); !ok || h.Stamp != (Stamp{Gen: 4}) {
		t.Fatalf("held %s %v, want the new generation 4/0", h.Stamp, ok)
	}

	m = coord()
	early := Token{Stamp: Stamp{Gen: 4, Seq: 7}}
	m.Receive(early)
	m.Drain()
	m.Generated(Stamp{Gen: 4}, secretOf(4))
	got := m.Drain()
	if len(got) != 3 || !cmp.Equal(got[0], Action{Kind: SendAck, Stamp: early.Stamp, Stale: true}) ||
		!cmp.Equal(got[1], Action{Kind: Forged, Token: early}) || got[2].Kind != Visit {
		t.Fatalf("got %+v, want the early token discarded as forged and a visit", got)
	}
	for range 2 * checkLostTicks {
		m.Tick()
		for _, a := range m.Drain() {
			if a.Kind == Check {
				t.Fatalf("tick %d: the store asked about %s", m.now, a.Token.Stamp)
			}
		}
	}

	m = coord()
	m.Receive(real(5, 1))
	m.Drain()
	m.CheckFailed(m.asks)
	m.Drain()
	m.Generated(Stamp{Gen: 4}, secretOf(4))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Dropped, Visit}) {
		t.Fatalf("got %v, want the passed-on token reported dropped, then a visit", got)
	}
}

// NextDeadline: a node with nothing to do sleeps; a coordinator without
// the token wakes when it must make one (and a runtime that skips to that
// deadline makes it then); the deadline is never in the past.
func TestNextDeadlineWakesForWhatTickDoes(t *testing.T) {
	m := storeAt(3)
	if next := m.NextDeadline(); next < never {
		t.Fatalf("an idle node's NextDeadline %d, want none", next)
	}
	m.SetCoordinator(true, 3, false)
	m.Skip(10)
	m.Skip(4) // never backwards
	if m.now != 10 {
		t.Fatalf("now %d after skipping to 10 then 4", m.now)
	}
	bound := int64(cfg().LossBound(3))
	if next := m.NextDeadline(); next != bound {
		t.Fatalf("a coordinator without the token: NextDeadline %d, want %d", next, bound)
	}
	m.Skip(bound - 1)
	m.Tick()
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{Regenerate}) {
		t.Fatalf("at the deadline: %v", got)
	}
	if next := m.NextDeadline(); next <= m.now {
		t.Fatalf("NextDeadline %d at tick %d", next, m.now)
	}
}

// A visit reported done twice moves the token once: the second report
// neither sends a resting token on nor prolongs its rest.
func TestVisitDoneTwice(t *testing.T) {
	m := storeAt(3)
	m.SetCoordinator(true, 3, false)
	tok := real(3, 1)
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, false) // rests here
	m.Tick()
	m.VisitDone(tok, true)
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("a second report moved the token: %+v", got)
	}
	m.Tick() // the rest (2 ticks) ends
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendToken}) {
		t.Fatalf("at the end of the rest: %v", got)
	}
}

// The bounds are the sums their documentation gives, for rings of any
// size (fewer than one node counts as one).
func TestBounds(t *testing.T) {
	c := Config{AckTicks: 3, IdleHoldTicks: 5, MaxHoldTicks: 7, HopTicks: 2}
	for _, tc := range []struct{ n, rot, hurried, lap, loss int }{
		{n: 4, rot: 5 + 4*2, hurried: 4 * 2, lap: 4*(2+7) + 3, loss: 5 + 4*2 + 5 + 4*7 + 3},
		{n: 1, rot: 5 + 2, hurried: 2, lap: 2 + 7 + 3, loss: 5 + 2 + 5 + 7 + 3},
		{n: 0, rot: 5 + 2, hurried: 2, lap: 2 + 7 + 3, loss: 5 + 2 + 5 + 7 + 3},
		{n: -3, rot: 5 + 2, hurried: 2, lap: 2 + 7 + 3, loss: 5 + 2 + 5 + 7 + 3},
	} {
		got := [4]int{c.RotationBound(tc.n), c.HurriedRotation(tc.n), c.LapBound(tc.n), c.LossBound(tc.n)}
		want := [4]int{tc.rot, tc.hurried, tc.lap, tc.loss}
		if got != want {
			t.Errorf("n=%d: rotation, hurried, lap, loss = %v, want %v", tc.n, got, want)
		}
	}
}

// Validate accepts the smallest working values and refuses any below.
func TestValidate(t *testing.T) {
	ok := Config{AckTicks: 1, IdleHoldTicks: 0, MaxHoldTicks: 1, HopTicks: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the default: %v", err)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.AckTicks = 0 },
		func(c *Config) { c.IdleHoldTicks = -1 },
		func(c *Config) { c.MaxHoldTicks = 0 },
		func(c *Config) { c.HopTicks = 0 },
	} {
		c := ok
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// The store's answer takes a held-back token only if it proves its stamp
// under the generation's secret, and only if no newer token was taken
// meanwhile (else two tokens would go round).
func TestCheckedTakesOnlyAProvenNewestToken(t *testing.T) {
	m := storeAt(3)
	bad := Token{Stamp: Stamp{Gen: 4, Seq: 1}, Proof: Prove(secretOf(3), Stamp{Gen: 4, Seq: 1})}
	m.Receive(bad)
	m.Drain()
	m.Checked(m.asks, 4, secretOf(4))
	if diff := cmp.Diff([]Action{{Kind: SendAck, Stamp: bad.Stamp, Stale: true}, {Kind: Forged, Token: bad}}, m.Drain()); diff != "" {
		t.Fatalf("a wrong proof of an issued generation (-want +got):\n%s", diff)
	}

	m = storeAt(3)
	m.Receive(real(4, 1))
	m.Drain()
	m.Confirm(4, secretOf(4)) // a member check names generation 4
	m.Receive(real(4, 9))     // and the newer hop arrives, taken at once
	m.Drain()
	m.Checked(m.asks, 4, secretOf(4))
	if diff := cmp.Diff([]Action{{Kind: SendAck, Stamp: Stamp{Gen: 4, Seq: 1}, Stale: true}}, m.Drain()); diff != "" {
		t.Fatalf("the superseded held-back token after the answer: refused as stale, nothing else (-want +got):\n%s", diff)
	}
	if h, _ := m.Held(); h.Stamp != (Stamp{Gen: 4, Seq: 9}) {
		t.Fatalf("holding %s, want 4/9", h.Stamp)
	}
}

// Rests and ack timeouts are measured from when they began, whatever the
// clock says, and NextDeadline names their end.
func TestRestAndAckTimeoutFromTheirStart(t *testing.T) {
	c := cfg()
	m := storeAt(3)
	m.SetCoordinator(true, 3, false)
	m.Skip(100)
	tok := real(3, 1)
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, false) // rests from tick 100
	if next := m.NextDeadline(); next != 100+int64(c.IdleHoldTicks) {
		t.Fatalf("resting: NextDeadline %d, want %d", next, 100+c.IdleHoldTicks)
	}
	for range c.IdleHoldTicks - 1 {
		m.Tick()
		if got := m.Drain(); len(got) != 0 {
			t.Fatalf("tick %d: %+v during the rest", m.now, got)
		}
	}
	m.Tick()
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendToken}) || !m.AwaitingAck() {
		t.Fatalf("tick %d: %v (awaiting ack %v), want the token sent on", m.now, got, m.AwaitingAck())
	}
	start := m.now
	if next := m.NextDeadline(); next != start+int64(c.AckTicks) {
		t.Fatalf("sending: NextDeadline %d, want %d", next, start+int64(c.AckTicks))
	}
	for range c.AckTicks - 1 {
		m.Tick()
		if got := m.Drain(); len(got) != 0 {
			t.Fatalf("tick %d: %+v before the ack timeout", m.now, got)
		}
	}
	m.Tick()
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SuccessorFailed}) || m.AwaitingAck() {
		t.Fatalf("tick %d: %v, want the successor failed", m.now, got)
	}
}

// Urgent makes a quiet token skip its rest here for a hurried rotation;
// Leave sends a resting token on at once.
func TestUrgentAndLeaveMoveTheToken(t *testing.T) {
	m := storeAt(3)
	m.SetCoordinator(true, 3, false)
	m.Skip(50)
	m.Urgent()
	tok := real(3, 1)
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, false)
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendToken}) {
		t.Fatalf("an urgent ring: %v, want the token sent on without a rest", got)
	}

	m = storeAt(3)
	m.SetCoordinator(true, 3, false)
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, false)
	m.Drain()
	m.Leave()
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendToken}) {
		t.Fatalf("leaving with a resting token: %v, want it sent on", got)
	}
}

// A failed node may have taken the token: the coordinator makes a new one
// within two hurried rotations and an ack timeout (Suspect), or a hurried
// rotation and a hop after taking over from a failed coordinator
// (SuspectLost), at once then if the token has not passed here for longer
// than that; a suspicion never puts a nearer deadline off.
func TestSuspicionBringsTheDeadlineIn(t *testing.T) {
	c := cfg()
	hr := c.HurriedRotation(3)
	lost := hr + c.HopTicks
	passedAt := func(at int64) func(*Machine) {
		return func(m *Machine) {
			m.Skip(at)
			tok := real(3, 1)
			m.Receive(tok)
			m.VisitDone(tok, true)
			for _, a := range m.Drain() {
				if a.Kind == SendToken {
					m.Ack(a.Token.Stamp, false)
				}
			}
			if m.Holding() {
				t.Fatal("the token passed on is still held")
			}
		}
	}
	for _, tc := range []struct {
		name    string
		prep    func(*Machine)
		suspect func(*Machine)
		within  int
	}{
		{"Suspect", passedAt(9), (*Machine).Suspect, 2*hr + c.AckTicks},
		{"SuspectLost, passed here a hurried rotation and a hop ago", passedAt(int64(10 - lost)), (*Machine).SuspectLost, lost},
		{"SuspectLost, passed here longer ago", passedAt(int64(10 - lost - 1)), (*Machine).SuspectLost, 1},
		{"SuspectLost, never here", func(*Machine) {}, (*Machine).SuspectLost, 1},
	} {
		m := storeAt(3)
		m.SetCoordinator(true, 3, false)
		tc.prep(m)
		m.Skip(10)
		tc.suspect(m)
		if at := regenAt(m, 3*c.LossBound(3)); at != int64(10+tc.within) {
			t.Errorf("%s at tick 10: regenerated at tick %d, want %d", tc.name, at, 10+tc.within)
		}
		m = storeAt(3)
		m.SetCoordinator(true, 3, true) // deadline now
		tc.suspect(m)
		if at := regenAt(m, 1); at != 1 {
			t.Errorf("%s put a due regeneration off to tick %d", tc.name, at)
		}
	}
}

// A coordinator that resets while holding the token knows it is gone and
// makes a new one at its next tick.
func TestCoordinatorResetRegeneratesAtOnce(t *testing.T) {
	m := storeAt(3)
	m.SetCoordinator(true, 3, false)
	m.Receive(real(3, 1))
	m.Drain()
	m.Reset()
	if m.Holding() || !cmp.Equal(kinds(m.Drain()), []ActionKind{Dropped}) {
		t.Fatal("the token was not dropped")
	}
	if at := regenAt(m, 1); at != 1 {
		t.Fatalf("regenerated at tick %d, want 1", at)
	}
}

// With no rest configured a quiet token never waits, not even a tick.
func TestNoRestConfigured(t *testing.T) {
	c := cfg()
	c.IdleHoldTicks = 0
	m := NewMachine(c)
	m.LinkUp()
	m.Confirm(3, secretOf(3))
	m.SetCoordinator(true, 3, false)
	m.Receive(real(3, 1))
	m.Drain()
	m.VisitDone(real(3, 1), false)
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendToken}) {
		t.Fatalf("got %v, want the token sent on at once", got)
	}
}

// Statement deletions (not a gremlins v0.6.0 operator, run by hand: each
// return and assignment of machine.go removed in turn). The tests below
// kill those that survived; Ack's `return` after a stale ack's drop is
// equivalent (drop already clears what the lines after it clear).

// A token the fence read shows the store never issued (its generation is
// above the store's newest) is discarded without raising the bar: the
// real tokens of the generations the store did issue are still taken.
func TestForgedGenerationAtTheFenceDoesNotFenceOutRealTokens(t *testing.T) {
	m := storeAt(5)
	m.Receive(real(5, 1))
	m.Drain()
	m.VisitFenced(real(5, 1), &Stamp{Gen: 4, Seq: 9})
	if diff := cmp.Diff([]Action{{Kind: Forged, Token: real(5, 1)}}, m.Drain()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	m.Receive(real(5, 3))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, Visit}) {
		t.Fatalf("the next real token: %v, want it taken", got)
	}
}

// The minimum generation never goes back: a late read naming an older
// generation does not let a token of a generation that ended be taken.
func TestMinimumGenerationNeverGoesBack(t *testing.T) {
	m := storeAt(3)
	m.Receive(real(3, 1))
	m.Drain()
	m.VisitFenced(real(3, 1), &Stamp{Gen: 3, Seq: 9}) // generation 3 ends here
	m.Drain()
	m.Confirm(3, secretOf(3)) // a late read
	m.Receive(real(3, 20))
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("a token of the ended generation after a late read: %+v", a)
	}
}

// The coordinator's new stamp is the newest seen: a copy of it that comes
// again (a resend, a replay) is not visited a second time; a regeneration
// the store answered after a newer generation was known is ignored.
func TestGeneratedStampIsTheNewestSeen(t *testing.T) {
	m := storeAt(3)
	m.SetCoordinator(true, 3, false)
	visitAndPass(t, m, real(3, 50))
	m.Generated(Stamp{Gen: 4}, secretOf(4))
	if m.Last() != (Stamp{Gen: 4}) {
		t.Fatalf("last %s after generating 4/0", m.Last())
	}
	m.VisitDone(real(4, 0), true)
	sent := m.Drain()
	m.Ack(sent[len(sent)-1].Token.Stamp, false)
	m.Receive(real(4, 0))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck}) {
		t.Fatalf("4/0 again: %v, want only its ack", got)
	}

	m = storeAt(6)
	m.SetCoordinator(true, 3, false)
	m.Generated(Stamp{Gen: 5}, secretOf(5))
	if got := m.Drain(); len(got) != 0 || m.Holding() || m.Last() != (Stamp{}) {
		t.Fatalf("a late regeneration of 5 with 6 known: %+v, holding %v, last %s", got, m.Holding(), m.Last())
	}
}

// A token is sent only on a live successor link: without one it waits
// and goes on the next link (after a visit, and when passed on unchecked).
// A node that holds a confirmed token never swaps it for an unchecked one.
func TestTokenWaitsForASuccessorLink(t *testing.T) {
	m := storeAt(3)
	m.LinkDown()
	m.Receive(real(3, 1))
	m.Drain()
	m.VisitDone(real(3, 1), true)
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("sent without a link: %+v", got)
	}
	m.LinkUp()
	if got := m.Drain(); len(got) != 1 || got[0].Kind != SendToken || got[0].Token.Stamp != (Stamp{Gen: 3, Seq: 2}) {
		t.Fatalf("on the new link: %+v", got)
	}

	m = storeAt(3)
	m.LinkDown()
	m.Receive(real(4, 1))
	m.Drain()
	m.CheckFailed(m.asks)
	if got := m.Drain(); len(got) != 1 || got[0].Kind != SendAck || got[0].Stale {
		t.Fatalf("an unchecked token without a link: %+v, want only its acknowledgement", got)
	}
	m.LinkUp()
	if got := m.Drain(); len(got) != 1 || got[0].Kind != SendToken || got[0].Token.Stamp != (Stamp{Gen: 4, Seq: 1}) {
		t.Fatalf("on the new link: %+v", got)
	}

	m = storeAt(3)
	m.Receive(real(3, 1))
	m.Receive(real(4, 1))
	m.Drain()
	m.CheckFailed(m.asks)
	got := m.Drain()
	if h, ok := m.Held(); !ok || h.Stamp != (Stamp{Gen: 3, Seq: 1}) || !m.Visiting() ||
		!cmp.Equal(got, []Action{{Kind: SendAck, Stamp: Stamp{Gen: 4, Seq: 1}, Stale: true}}) {
		t.Fatalf("holding %s %v, actions %+v: the confirmed token was swapped for the unchecked one, or the unchecked one not refused", h.Stamp, ok, got)
	}
}

// A leaving node passes tokens straight on, without a critical section;
// a token at the largest sequence ends here rather than wrap round.
func TestLeavingAndLastSequence(t *testing.T) {
	m := storeAt(3)
	m.Leave()
	m.Receive(real(3, 1))
	if got := kinds(m.Drain()); !cmp.Equal(got, []ActionKind{SendAck, SendToken}) {
		t.Fatalf("a leaving node: %v, want the token passed straight on", got)
	}

	m = storeAt(3)
	last := real(3, math.MaxInt64)
	m.Receive(last)
	m.Drain()
	m.VisitDone(last, true)
	got := m.Drain()
	if len(got) != 1 || got[0].Kind != Dropped || got[0].Token.Stamp != last.Stamp || m.Holding() {
		t.Fatalf("the largest sequence: %+v, want it dropped here", got)
	}
}
