package token

import (
	"slices"
	"sync"
	"testing"
)

// TestKeys: the secrets a machine confirmed, published for the transport,
// prove HELLOs from one node to another under the newest and check them
// under any of the pastGens+1 published. A key holder's guesses, a proof
// of another link, and any proof once the generation has aged out, fail.
func TestKeys(t *testing.T) {
	var k Keys
	if p := k.HelloProofs(2, 1); p != nil {
		t.Fatalf("empty keys made HELLO proofs %v", p)
	}
	if k.ProvesHello(2, 1, 3, ProveHello(secretOf(3), 3, 2, 1)) {
		t.Fatal("empty keys took a HELLO proof")
	}
	m := NewMachine(cfg())
	if m.Secrets() != nil {
		t.Fatalf("a machine that knows no secret has secrets %v", m.Secrets())
	}
	for g := int64(3); g <= 3+pastGens; g++ {
		m.Confirm(g, secretOf(g))
	}
	got := m.Secrets()
	if len(got) != pastGens+1 || got[0] != (GenSecret{3 + pastGens, secretOf(3 + pastGens)}) || got[pastGens] != (GenSecret{3, secretOf(3)}) {
		t.Fatalf("Secrets() = %v, want generations %d down to 3, newest first", got, 3+pastGens)
	}
	if g, s := m.Confirmed(); g != 3+pastGens || s != secretOf(g) {
		t.Errorf("Confirmed() = %d %q", g, s)
	}
	if !k.Publish(got) || k.Publish(slices.Clone(got)) {
		t.Error("Publish: want true for new secrets, false for the same again")
	}
	proofs := k.HelloProofs(2, 1)
	if len(proofs) != pastGens+1 {
		t.Fatalf("HelloProofs(2, 1) = %v, want one per published generation", proofs)
	}
	for i, p := range proofs {
		if g := int64(3 + pastGens - i); p.Gen != g || p.Proof != ProveHello(secretOf(g), g, 2, 1) || !k.ProvesHello(2, 1, p.Gen, p.Proof) {
			t.Errorf("HelloProofs(2, 1)[%d] = %v, want generation %d's, taken", i, p, g)
		}
	}
	gen, proof := proofs[0].Gen, proofs[0].Proof
	if !k.ProvesHello(2, 1, 3, ProveHello(secretOf(3), 3, 2, 1)) {
		t.Error("a HELLO proof of the oldest published generation refused")
	}
	for _, bad := range []struct {
		name          string
		from, to, gen int64
		proof         string
	}{
		{"another sender", 4, 1, gen, proof},
		{"another receiver", 2, 5, gen, proof},
		{"another generation", 2, 1, gen - 1, proof},
		{"a guessed secret", 2, 1, gen, ProveHello("guess", gen, 2, 1)},
		{"a link proof", 2, 1, gen, ProveLink(secretOf(gen), Stamp{Gen: gen})},
		{"no proof", 2, 1, gen, ""},
		{"no generation", 2, 1, 0, ProveHello(secretOf(0), 0, 2, 1)},
		{"an unconfirmed generation", 2, 1, gen + 1, ProveHello(secretOf(gen+1), gen+1, 2, 1)},
	} {
		if k.ProvesHello(bad.from, bad.to, bad.gen, bad.proof) {
			t.Errorf("%s: HELLO proof taken", bad.name)
		}
	}
	// A newer generation pushes the oldest out.
	m.Confirm(4+pastGens, secretOf(4+pastGens))
	k.Publish(m.Secrets())
	if k.ProvesHello(2, 1, 3, ProveHello(secretOf(3), 3, 2, 1)) {
		t.Errorf("a HELLO proof of generation 3 taken at generation %d", 4+pastGens)
	}
	// Published once, read from many goroutines (go test -race).
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			p := k.HelloProofs(2, 1)
			if len(p) == 0 || !k.ProvesHello(2, 1, p[0].Gen, p[0].Proof) {
				t.Error("a proof made concurrently refused")
			}
		})
	}
	k.Publish(m.Secrets())
	wg.Wait()
}

// TestProveHelloBytes pins the bytes a HELLO proof covers (PROTOCOL.md's
// worked example).
func TestProveHelloBytes(t *testing.T) {
	const secret = "5f1c0a9e8d7b6a594837261504f3e2d1c0b9a8978675645342312f1e0d0c0b0a"
	if got, want := ProveHello(secret, 4, 3, 4), "7a370d3bd3991034"; got != want {
		t.Errorf("ProveHello(example) = %s, want %s", got, want)
	}
}
