package election

import "testing"

func TestParseMethod(t *testing.T) {
	for in, want := range map[string]Method{
		"ring": Ring, "RING_BASED": Ring, "chang-roberts": ChangRoberts, "CHANG_ROBERTS": ChangRoberts,
		"BULLY": Bully, " lease ": Lease,
	} {
		if got, err := ParseMethod(in); err != nil || got != want {
			t.Errorf("ParseMethod(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "paxos", "raft"} {
		if _, err := ParseMethod(bad); err == nil {
			t.Errorf("ParseMethod(%q) accepted", bad)
		}
	}
}
