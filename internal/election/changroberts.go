package election

// Chang–Roberts: the initiator sends ELECTION{Cand: self} to its successor
// (reliable hops as for the ring method). A node forwards a better
// candidate unchanged, replaces a worse one by itself unless it has already
// sent itself or a better candidate, or saw an election end with a leader
// above it within ResultTicks (then the worse one dies: extinction), and
// wins when its own candidacy comes back. Extinction compares candidates,
// not rounds: when every node starts at once, each lower candidacy dies at
// the next node (the ring ascends) and only the best goes round. The winner
// announces with ELECTED round the ring after Claimed (n−1 hops).
//
// Against dead nodes: a node that gives up on a hop to the candidate itself
// stands instead (Cand = self); a candidacy that has made more than
// 2·len(peers)+2 hops is dropped; and a participant that sees no result
// within ResultTicks starts a new round.

// startCR begins a chang-roberts round with this node as candidate.
func (m *Machine) startCR() {
	r := m.newRound()
	m.sentCand(m.join(ChangRoberts, r), m.cfg.ID)
	m.rec(r).fwdCand = m.cfg.ID
	m.sendCR(Msg{Method: ChangRoberts, Kind: KindElection, Round: r, Cand: m.cfg.ID})
}

// sendCR sends a candidacy to the next live node (the candidate itself is
// never skipped). With no other live node this node wins.
func (m *Machine) sendCR(msg Msg) {
	to := m.nextHop(msg.Cand, msg.Round)
	if to == m.cfg.ID {
		rec := m.rec(msg.Round)
		if !rec.completed && !m.settled() { // all others seem dead, unless a result came in a moment ago
			rec.completed = true
			m.won(ChangRoberts, msg.Round, nil, nil)
		}
		return
	}
	m.sendHop(msg, to)
}

// maxSentLive is the best candidate this node has sent, ignoring one it
// has since found dead.
func (m *Machine) maxSentLive(p *part) int64 {
	if t, dead := m.dead[p.maxSent]; dead && p.maxSent != m.cfg.ID && m.now-t < m.deadTTL() {
		return 0
	}
	return p.maxSent
}

// sentCand records that this node sent candidate c.
func (m *Machine) sentCand(p *part, c int64) {
	if m.maxSentLive(p) < c {
		p.maxSent = c
	}
}

// stepCRElection handles a chang-roberts ELECTION (new: acked,
// deduplicated). A message that is dropped does not make this node a
// participant (a late one must not set a result timer going).
func (m *Machine) stepCRElection(msg Msg) {
	if msg.Cand < 1 || msg.Hops > m.hopLimit() {
		return
	}
	self := m.cfg.ID
	rec := m.rec(msg.Round)
	rec.addID(msg.From)
	rec.addID(msg.Cand)
	p := &m.parts[partIndex(ChangRoberts)]
	out := msg
	out.Hops++
	switch {
	case msg.Cand == self:
		if rec.completed {
			return
		}
		rec.completed = true
		m.join(ChangRoberts, msg.Round)
		m.won(ChangRoberts, msg.Round, nil, nil)
		return
	case msg.Cand > self || m.deferring:
		// A deferring node (Defer) forwards a lower candidacy too, unchanged:
		// it does not stand.
		if rec.fwdCand == msg.Cand {
			return // this candidacy passed here already (by another path)
		}
		// Forwarded even if a better one passed here before: only the
		// node in front of a dead candidate knows it is dead.
	default:
		if (p.active && m.maxSentLive(p) >= self) || m.settled() {
			return // extinction: this node already sent itself or better
		}
		out.Cand = self
	}
	p = m.join(ChangRoberts, msg.Round)
	p.best = max(p.best, msg.Cand)
	m.sentCand(p, out.Cand)
	rec.fwdCand = out.Cand
	m.sendCR(out)
}
