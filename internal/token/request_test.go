package token

import "testing"

// TestRequestProof: the documented example (PROTOCOL.md) and what the
// proof binds: the kind, the node, the successor reported, the path and
// the generation. Only the confirmed generation and the 4 before it are
// checked; before any, nothing proves.
func TestRequestProof(t *testing.T) {
	const secret = "5f1c0a9e8d7b6a594837261504f3e2d1c0b9a8978675645342312f1e0d0c0b0a"
	p := ProveRequest(secret, 4, "SUCCESSOR_REQUEST", 3, 4, false)
	if p != "9c493a83b4d9d318" {
		t.Fatalf("proof %s, want the documented 9c493a83b4d9d318", p)
	}
	for name, q := range map[string]string{
		"kind":       ProveRequest(secret, 4, "LEAVE", 3, 4, false),
		"node":       ProveRequest(secret, 4, "SUCCESSOR_REQUEST", 2, 4, false),
		"successor":  ProveRequest(secret, 4, "SUCCESSOR_REQUEST", 3, 5, false),
		"relay":      ProveRequest(secret, 4, "SUCCESSOR_REQUEST", 3, 4, true),
		"generation": ProveRequest(secret, 5, "SUCCESSOR_REQUEST", 3, 4, false),
		"secret":     ProveRequest("other", 4, "SUCCESSOR_REQUEST", 3, 4, false),
	} {
		if q == p {
			t.Errorf("the proof does not bind the %s", name)
		}
	}

	m := NewMachine(DefaultConfig())
	if _, _, ok := m.RequestProof("LEAVE", 3, 0, false); ok {
		t.Error("a proof before any secret")
	}
	if m.ProvesRequest(4, p, "SUCCESSOR_REQUEST", 3, 4, false) {
		t.Error("proven before any secret was confirmed")
	}
	m.Confirm(4, secret)
	for g := int64(5); g <= 9; g++ {
		m.Confirm(g, "s")
	}
	if gen, q, ok := m.RequestProof("LEAVE", 3, 0, false); !ok || gen != 9 || q != ProveRequest("s", 9, "LEAVE", 3, 0, false) {
		t.Errorf("RequestProof = %d %s %v, want generation 9's", gen, q, ok)
	}
	if !m.ProvesRequest(5, ProveRequest("s", 5, "LEAVE", 3, 0, false), "LEAVE", 3, 0, false) {
		t.Error("a proof under the fourth generation before the confirmed one refused")
	}
	if m.ProvesRequest(4, p, "SUCCESSOR_REQUEST", 3, 4, false) {
		t.Error("a proof under the fifth generation before the confirmed one taken")
	}
	if m.ProvesRequest(0, "", "LEAVE", 3, 0, false) {
		t.Error("no proof taken")
	}
}
