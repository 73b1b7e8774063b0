package main

import (
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/protocol"
)

// TestNodeCache: the nodes a login listed are kept per ring, and a start
// given one node of a ring tries the ring's others after it.
func TestNodeCache(t *testing.T) {
	dir := t.TempDir()
	c := newNodeCache(func(k string) string { return map[string]string{"XDG_CACHE_HOME": dir}[k] })
	ringA := []protocol.NodeAddr{{Node: 1, Addr: "10.0.0.1:8001"}, {Node: 2, Addr: "10.0.0.2:8001"}, {Node: 3, Addr: "10.0.0.3:8001"}}
	ringB := []protocol.NodeAddr{{Node: 1, Addr: "127.0.0.1:9001"}, {Node: 2, Addr: "127.0.0.1:9002"}}
	c.save(ringA)
	c.save(ringB)
	if got, want := c.extend([]string{"10.0.0.2:8001"}), []string{"10.0.0.2:8001", "10.0.0.1:8001", "10.0.0.3:8001"}; !slices.Equal(got, want) {
		t.Fatalf("extend: %v, want %v", got, want)
	}
	if got := c.extend([]string{"192.0.2.1:8001"}); !slices.Equal(got, []string{"192.0.2.1:8001"}) {
		t.Fatalf("a node of no kept ring: %v", got)
	}
	// Ring A grows: the new list replaces the old one.
	c.save(append(slices.Clone(ringA), protocol.NodeAddr{Node: 4, Addr: "10.0.0.4:8001"}))
	if got := c.extend([]string{"10.0.0.1:8001"}); len(got) != 4 || got[3] != "10.0.0.4:8001" {
		t.Fatalf("after the ring grew: %v", got)
	}
	if got := len(c.load().Rings); got != 2 {
		t.Fatalf("%d rings kept, want 2", got)
	}
	if none := newNodeCache(func(string) string { return "" }); none.path != "" || len(none.extend([]string{"a:1"})) != 1 {
		t.Fatalf("without HOME: %+v", none)
	}
}
