package token

import "testing"

// A node counts its predecessor in touch only on what a node that read the
// generation's secret from the store can make: a genuine token, or a PING
// with the link proof. A key holder alone can make neither.

func TestLinkProof(t *testing.T) {
	fresh := NewMachine(cfg())
	if _, _, ok := fresh.LinkProof(); ok {
		t.Fatal("a machine that knows no secret made a link proof")
	}
	// The forger's best guesses: the empty secret, a token's proof of the
	// same stamp, no proof at all.
	guesses := func(s Stamp) []string {
		return []string{ProveLink("", s), Prove(secretOf(s.Gen), s), "", "0000000000000000"}
	}
	for _, p := range guesses(Stamp{Gen: 1}) {
		if fresh.ProvesLink(Stamp{Gen: 1}, p) {
			t.Errorf("a machine that knows no secret took the link proof %q", p)
		}
	}

	pred, coord := storeAt(3), storeAt(3)
	s, proof, ok := pred.LinkProof()
	if !ok || s.Gen != 3 {
		t.Fatalf("link proof %v %q %v; want one of generation 3", s, proof, ok)
	}
	if !coord.ProvesLink(s, proof) {
		t.Fatalf("the link proof of generation 3 refused by a node that knows it")
	}
	for _, p := range guesses(s) {
		if coord.ProvesLink(s, p) {
			t.Errorf("forged link proof %q taken", p)
		}
	}
	if coord.ProvesLink(Stamp{Gen: 3, Seq: s.Seq + 1}, proof) {
		t.Error("a link proof taken for another stamp than the one it proves")
	}
	// The proof follows the newest stamp seen.
	visitAndPass(t, pred, real(3, 1))
	if s, proof, _ := pred.LinkProof(); s != (Stamp{Gen: 3, Seq: 1}) || !coord.ProvesLink(s, proof) {
		t.Errorf("link proof after token 3/1: %v, taken %v", s, coord.ProvesLink(s, proof))
	}

	// The coordinator moves on while the predecessor still knows
	// generation 3: its proof counts for pastGens generations more.
	for g := int64(4); g <= 3+pastGens; g++ {
		coord.Confirm(g, secretOf(g))
		if s, proof, _ := pred.LinkProof(); !coord.ProvesLink(s, proof) {
			t.Errorf("a link proof of generation 3 refused at generation %d", g)
		}
	}
	coord.Confirm(4+pastGens, secretOf(4+pastGens))
	if s, proof, _ := pred.LinkProof(); coord.ProvesLink(s, proof) {
		t.Errorf("a link proof of generation 3 taken at generation %d", 4+pastGens)
	}
	// A generation the coordinator never confirmed proves nothing, even
	// with the proof under the store's secret of it.
	ahead := Stamp{Gen: 10 + pastGens}
	if coord.ProvesLink(ahead, ProveLink(secretOf(ahead.Gen), ahead)) {
		t.Error("a link proof of an unconfirmed generation taken")
	}
}

func TestGenuine(t *testing.T) {
	m := storeAt(2)
	visitAndPass(t, m, real(2, 4))
	for _, tc := range []struct {
		tok  Token
		want bool
	}{
		{real(2, 5), true},
		{real(2, 4), false}, // the last one again: a replay
		{real(2, 3), false},
		{real(1, 9), false}, // an older generation
		{real(3, 1), false}, // a generation not yet confirmed here
		{Token{Stamp: Stamp{Gen: 2, Seq: 5}}, false},
		{Token{Stamp: Stamp{Gen: 2, Seq: 5}, Proof: Prove("", Stamp{Gen: 2, Seq: 5})}, false},
		{Token{Stamp: Stamp{Gen: 2, Seq: 5}, Proof: ProveLink(secretOf(2), Stamp{Gen: 2, Seq: 5})}, false}, // a PING's proof is not a token's
		{Token{Stamp: Stamp{Gen: 3, Seq: 1}, Proof: Prove(secretOf(2), Stamp{Gen: 3, Seq: 1})}, false},     // generation 2's secret proves no stamp of 3
	} {
		if got := m.Genuine(tc.tok); got != tc.want {
			t.Errorf("Genuine(%v proof %q) = %v, want %v", tc.tok.Stamp, tc.tok.Proof, got, tc.want)
		}
	}
	for _, g := range []int64{0, 1} {
		if s := (Stamp{Gen: g, Seq: 1}); NewMachine(cfg()).Genuine(Token{Stamp: s, Proof: Prove("", s)}) {
			t.Errorf("a machine that knows no secret took a token of generation %d as genuine", g)
		}
	}
}
