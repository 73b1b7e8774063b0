package token

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func cfg() Config { return Config{AckTicks: 3, IdleHoldTicks: 2, MaxHoldTicks: 4, HopTicks: 1} }

func kinds(as []Action) []ActionKind {
	var out []ActionKind
	for _, a := range as {
		out = append(out, a.Kind)
	}
	return out
}

func TestAckBeforeWork(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	m.Receive(Token{Stamp: Stamp{Gen: 1, Seq: 4}})
	got := m.Drain()
	if diff := cmp.Diff([]ActionKind{SendAck, Visit}, kinds(got)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	if got[0].Stamp != (Stamp{Gen: 1, Seq: 4}) || got[0].Stale {
		t.Errorf("ack = %+v", got[0])
	}
}

func TestStaleAndDuplicateTokens(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	m.Receive(Token{Stamp: Stamp{Gen: 2, Seq: 5}})
	m.Drain()
	m.Receive(Token{Stamp: Stamp{Gen: 2, Seq: 5}}) // duplicate (a resend after a lost ack)
	m.Receive(Token{Stamp: Stamp{Gen: 1, Seq: 9}}) // an older generation
	m.Receive(Token{Stamp: Stamp{Gen: 2, Seq: 3}}) // an older hop
	want := []Action{
		{Kind: SendAck, Stamp: Stamp{Gen: 2, Seq: 5}},
		{Kind: SendAck, Stamp: Stamp{Gen: 1, Seq: 9}, Stale: true},
		{Kind: SendAck, Stamp: Stamp{Gen: 2, Seq: 3}, Stale: true},
	}
	if diff := cmp.Diff(want, m.Drain()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestForwardKeepsTokenUntilAcked(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	tok := Token{Stamp: Stamp{Gen: 1, Seq: 1}}
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, true) // worked: forward at once with Busy set
	got := m.Drain()
	if len(got) != 1 || got[0].Kind != SendToken || got[0].Token.Seq != 2 {
		t.Fatalf("after work: %+v", got)
	}
	if !m.Holding() {
		t.Fatal("token released before its ack")
	}
	m.Ack(Stamp{Gen: 1, Seq: 1}, false) // an ack for another stamp changes nothing
	if !m.Holding() {
		t.Fatal("released on a wrong ack")
	}
	m.Ack(Stamp{Gen: 1, Seq: 2}, false)
	if m.Holding() {
		t.Fatal("still holding after the ack")
	}
}

func TestAckTimeoutAndResendOnNewLink(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	tok := Token{Stamp: Stamp{Gen: 1, Seq: 1}}
	m.Receive(tok)
	m.VisitDone(tok, true)
	m.Drain()
	for range 3 {
		m.Tick()
	}
	if diff := cmp.Diff([]ActionKind{SuccessorFailed}, kinds(m.Drain())); diff != "" {
		t.Fatalf("after the ack timeout (-want +got):\n%s", diff)
	}
	m.LinkUp() // the coordinator assigned a new successor
	got := m.Drain()
	if len(got) != 1 || got[0].Kind != SendToken || got[0].Token.Stamp != (Stamp{Gen: 1, Seq: 2}) {
		t.Fatalf("resend = %+v", got)
	}
}

func TestIdleHoldThenForward(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	tok := Token{Stamp: Stamp{Gen: 1, Seq: 1}}
	m.Receive(tok)
	m.Drain()
	m.VisitDone(tok, false)
	m.Tick()
	if got := m.Drain(); len(got) != 0 {
		t.Fatalf("an idle token moved before its hold: %+v", got)
	}
	m.Tick()
	if diff := cmp.Diff([]ActionKind{SendToken}, kinds(m.Drain())); diff != "" {
		t.Fatalf("after the hold (-want +got):\n%s", diff)
	}
}

func TestHurryMovesIdleToken(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	tok := Token{Stamp: Stamp{Gen: 1, Seq: 1}}
	m.Receive(tok)
	m.VisitDone(tok, false)
	m.Drain()
	m.Hurry()
	if diff := cmp.Diff([]ActionKind{SendToken}, kinds(m.Drain())); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestCoordinatorRegeneratesOnceAfterLoss(t *testing.T) {
	c := cfg()
	m := NewMachine(c)
	m.LinkUp()
	m.SetCoordinator(true, 3, false)
	bound := c.LossBound(3)
	regen := 0
	for range 3 * bound {
		m.Tick()
		for _, a := range m.Drain() {
			if a.Kind == Regenerate {
				regen++
			}
		}
	}
	if regen != 1 {
		t.Fatalf("%d regenerations while one was pending, want 1", regen)
	}
	m.Generated(Stamp{Gen: 7})
	got := m.Drain()
	if diff := cmp.Diff([]ActionKind{Visit}, kinds(got)); diff != "" || got[0].Token.Gen != 7 {
		t.Fatalf("after generation (-want +got):\n%s", diff)
	}
	// The new generation makes every older token stale.
	m.Receive(Token{Stamp: Stamp{Gen: 6, Seq: 99}})
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("old generation accepted: %+v", a)
	}
}

func TestFencedVisitDropsToken(t *testing.T) {
	m := NewMachine(cfg())
	m.LinkUp()
	tok := Token{Stamp: Stamp{Gen: 3, Seq: 1}}
	m.Receive(tok)
	m.Drain()
	m.VisitFenced(tok)
	if m.Holding() || !cmp.Equal([]ActionKind{Dropped}, kinds(m.Drain())) {
		t.Fatal("a fenced-off token is still held")
	}
	m.Receive(Token{Stamp: Stamp{Gen: 3, Seq: 8}})
	if a := m.Drain(); len(a) != 1 || !a[0].Stale {
		t.Fatalf("a token of the fenced generation was accepted: %+v", a)
	}
}
