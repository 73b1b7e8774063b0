// Package ring holds the logical ring: its topology as the store records it
// and, as a pure state machine, the protocol that forms and repairs it.
package ring

import (
	"fmt"
	"slices"
)

// Order walks the successor pointers (node id -> successor id; nodes not in
// the ring are absent) and returns the ring order starting at the lowest id.
// A healthy ring is one cycle through every node that has a successor; each
// way it is not is described in problems, and order then holds the walk from
// the lowest id up to the point where it broke.
func Order(successors map[int64]int64) (order []int64, problems []string) {
	if len(successors) == 0 {
		return nil, nil
	}
	ids := make([]int64, 0, len(successors))
	for id := range successors {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	start := ids[0]
	seen := map[int64]bool{}
	for cur := start; ; {
		order = append(order, cur)
		seen[cur] = true
		next := successors[cur]
		if _, ok := successors[next]; !ok {
			problems = append(problems, fmt.Sprintf("node %d points to node %d, which is not in the ring", cur, next))
			break
		}
		if next == start {
			break
		}
		if seen[next] {
			problems = append(problems, fmt.Sprintf("node %d points back to node %d: the walk from node %d never returns", cur, next, start))
			break
		}
		cur = next
	}
	var outside []int64
	for _, id := range ids {
		if !seen[id] {
			outside = append(outside, id)
		}
	}
	if len(outside) > 0 {
		problems = append(problems, fmt.Sprintf("nodes %v have successors but are not on the ring through node %d", outside, start))
	}
	return order, problems
}
