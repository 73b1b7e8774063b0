package ring

// A SUCCESSOR_REQUEST naming a failed successor makes the coordinator take
// that node out of the ring, and a LEAVE takes out its sender: in another
// node's name, either took a working node out until it noticed and joined
// again (a key holder could forge them: the cluster key authenticates the
// frame, not who made it). Frames only propose: such a request carries a
// proof, made by the node it is for, under the secret of a token
// generation the store confirmed to it (token.ProveRequest), which a key
// holder who cannot read the store cannot make. It names the request's
// kind, its node, the successor it reports and whether it came through a
// relay, so that a proof seen on the wire proves no other request. A JOIN
// needs none: a node that joins may not have read any secret yet, and a
// JOIN of a member places it where it is.

// proveRequest returns m with the proof of this node's request. A node
// that has no secret yet (it has seen no token since it started) sends it
// without one and reads the store's newest generation, so that its next
// try carries the proof.
func (n *Machine) proveRequest(m Msg) Msg {
	if m.Type != MsgSuccessorRequest && m.Type != MsgLeave {
		return m
	}
	gen, proof, ok := n.tok.RequestProof(string(m.Type), n.id, m.Failed, m.Relay)
	if !ok {
		n.enqueue(Op{Kind: OpReadFence})
		return m
	}
	m.Gen, m.Proof = gen, proof
	return m
}

// requestProven reports whether the coordinator may act on request m: a
// JOIN, or a request with the proof of the node it is for (its sender, or
// the node a relay passed it on for) under the secret of a generation this
// node knows. A coordinator that knows none yet (a ring whose first token
// is not made) has nothing to check against and takes it. A proof under a
// newer generation than this node's makes it read the store's, as a token
// of one does; the requester's next try is judged by that.
func (n *Machine) requestProven(m Msg) bool {
	if m.Type != MsgSuccessorRequest && m.Type != MsgLeave {
		return true
	}
	who, relay := m.From, false
	if m.For != 0 && m.For != n.id {
		who, relay = m.For, true
	}
	if n.tok.ProvesRequest(m.Gen, m.Proof, string(m.Type), who, m.Failed, relay) {
		return true
	}
	known, secret := n.tok.Confirmed()
	if secret == "" {
		return true
	}
	n.note(EventRequestUnproven, who)
	if m.Gen > known && n.now >= n.requestReadAt {
		// At most one read per RetryTicks: a flood of forged requests at
		// a high generation costs the store no more than a requester's
		// retries do.
		n.requestReadAt = n.now + int64(n.cfg.RetryTicks)
		n.enqueue(Op{Kind: OpReadFence})
	}
	return false
}
