package ring

import "slices"

// Change sets one node's successor; Succ 0 takes the node out of the ring.
type Change struct {
	Node int64 `json:"node"`
	Succ int64 `json:"succ"`
}

// Topology maps every node in the ring to its successor, as the store
// records it. Nodes not in the ring are absent.
type Topology map[int64]int64

// Members returns the ids in the ring, ascending.
func (t Topology) Members() []int64 {
	ids := make([]int64, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Apply returns the topology after changes.
func (t Topology) Apply(changes []Change) Topology {
	out := make(Topology, len(t)+1)
	for k, v := range t {
		out[k] = v
	}
	for _, c := range changes {
		if c.Succ == 0 {
			delete(out, c.Node)
		} else {
			out[c.Node] = c.Succ
		}
	}
	return out
}

// Predecessor returns the node whose successor is x (0 if none).
func (t Topology) Predecessor(x int64) int64 { return t.predecessor(x) }

// predecessor returns the node whose successor is x (0 if none).
func (t Topology) predecessor(x int64) int64 {
	for _, id := range t.Members() {
		if t[id] == x {
			return id
		}
	}
	return 0
}

// PlanJoin splices j into the ring. The ring is kept in id order: j goes
// after the member with the largest id below j (or after the largest member
// if j is the lowest). A lone first node forms a ring with itself. A node
// that is already in the ring (it restarted) is told its successor again
// and its predecessor is told to link to it again.
func PlanJoin(t Topology, j int64) []Change {
	if len(t) == 0 {
		return []Change{{Node: j, Succ: j}}
	}
	if succ, ok := t[j]; ok {
		changes := []Change{{Node: j, Succ: succ}}
		if p := t.predecessor(j); p != 0 && p != j {
			changes = append(changes, Change{Node: p, Succ: j})
		}
		return changes
	}
	members := t.Members()
	pred := members[len(members)-1]
	for _, id := range members {
		if id < j {
			pred = id
		}
	}
	return []Change{{Node: j, Succ: t[pred]}, {Node: pred, Succ: j}}
}

// PlanJoinAvoiding is PlanJoin for a node that is not in the ring, placed
// where neither of its new links is one that failed lately: rank reports,
// for the link between two nodes (either way), 0 if it did not fail
// lately, and the later it failed the higher. The node goes to the first
// place without such a link after its id order's, going round the ring;
// if every place has one, to the place whose worse link failed longest
// ago (never behind the link failing now while another place's failed
// before it); its id order's place if nothing is known.
func PlanJoinAvoiding(t Topology, j int64, rank func(a, b int64) int) []Change {
	plan := PlanJoin(t, j)
	if _, in := t[j]; in || len(t) == 0 || rank == nil {
		return plan
	}
	pred := plan[1].Node
	best, bestRank := pred, -1
	for range len(t) {
		succ := t[pred]
		r := max(rank(pred, j), rank(j, succ))
		if r == 0 {
			best = pred
			break
		}
		if bestRank < 0 || r < bestRank {
			best, bestRank = pred, r
		}
		pred = succ
	}
	return []Change{{Node: j, Succ: t[best]}, {Node: best, Succ: j}}
}

// PlanRemove splices x out of the ring: its predecessor links to its
// successor. Removing a node not in the ring changes nothing.
func PlanRemove(t Topology, x int64) []Change {
	succ, ok := t[x]
	if !ok {
		return nil
	}
	changes := []Change{{Node: x, Succ: 0}}
	if p := t.predecessor(x); p != 0 && p != x {
		next := succ
		if next == x { // cannot happen in a well-formed ring; keep the predecessor alone
			next = p
		}
		changes = append(changes, Change{Node: p, Succ: next})
	}
	return changes
}

// PlanRepair answers a SUCCESSOR_REQUEST from r, whose successor failed. If
// r is not in the ring it must rejoin (notInRing). If failed is still r's
// successor it is spliced out; otherwise r missed an update and is told its
// current successor again.
func PlanRepair(t Topology, r, failed int64) (changes []Change, notInRing bool) {
	succ, ok := t[r]
	if !ok {
		return nil, true
	}
	if failed != 0 && succ == failed && failed != r {
		return PlanRemove(t, failed), false
	}
	return []Change{{Node: r, Succ: succ}}, false
}

// PlanSync re-asserts the whole ring: every member is told its successor.
// A new coordinator does this first, and every coordinator now and then, so
// that an assignment lost with a deposed coordinator cannot leave a node
// linked where the store says it is not.
func PlanSync(t Topology) []Change {
	changes := make([]Change, 0, len(t))
	for _, id := range t.Members() {
		changes = append(changes, Change{Node: id, Succ: t[id]})
	}
	return changes
}
