package ring

// A coordinator that takes the role over from one cut off with its next
// nodes (a split: the old coordinator and the two after it on one side,
// the store on the other) repairs the ring one dead successor at a time:
// it takes the old coordinator out, is linked to the next, which is cut
// off too, and each such link waited for the successor watchdog (0.6 s)
// before it was given up: ringsim put every such split at 2.5 s without
// a delivery on the side with the store.
//
// The coordinator has a second witness by then. Its first sync sent every
// member its successor by datagram, and a member cut off answers none of
// the resends. A successor that has left this term's assignments
// unanswered for UnheardTicks, and whose link has not come up in
// UnheardLinkTicks, is given up then. Either witness alone is not enough:
// a node rejoining at a heal answers by datagram at once while a store
// operation it began during the cut may still hold its link back (a faster
// watchdog alone slowed heals), and a lossy link can lose three datagrams
// in a row. A frame in the node's name only proposes: a forged one makes
// the coordinator wait the full watchdog, as before.

// watchdogAt is the last tick the successor link, down since downSince,
// is waited for: twice FailTicks, or sooner for a coordinator whose
// successor has not been heard from since it was sent an assignment.
func (n *Machine) watchdogAt() int64 {
	at := n.downSince + int64(2*n.cfg.FailTicks)
	if !n.isCoord {
		return at
	}
	if sent, ok := n.unheard[n.succ]; ok {
		at = min(at, max(n.downSince+int64(n.cfg.UnheardLinkTicks), sent+int64(n.cfg.UnheardTicks)))
	}
	return at
}
