package procutil

import "testing"

// TestFreePortIsBelowTheEphemeralRange: a free port comes from below the
// kernel's ephemeral range (where no outgoing connection takes it between
// the search and the node's bind), and is free for TCP and UDP.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	lo, hi, ok := portBand()
	if !ok {
		t.Skip("the ephemeral range cannot be read here")
	}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
		if !bindable(p) {
			t.Fatalf("port %d is not free", p)
		}
	}
}
