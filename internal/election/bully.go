package election

// Bully: a node starts by sending ELECTION to every node with a higher id
// (a dead mark does not exempt any: each is tried). If there is none it
// wins at once; if no OK comes within TimeoutTicks it sends again, Retries
// sends in all, and then wins. An OK means a higher node takes over: the
// node waits ResultTicks for the ELECTED (or for Observe of a coordinator
// at least as good as the OK's sender) and else starts again. A node that
// receives ELECTION from a lower one always answers OK — also while it is
// electing itself, which is where the original system went wrong — and
// starts its own election unless it already runs one, or saw an election
// end with a higher leader within ResultTicks (a late ELECTION of that
// election; the asker learns the result from the same announcement). A
// node that claimed the role moments ago answers with OK and its ELECTED.
// The winner sends ELECTED to every other node after Claimed.

const (
	bullyIdle        = iota
	bullyWaitOK      // ELECTION sent to the higher nodes, no OK yet
	bullyWaitElected // an OK came: a higher node takes over
)

// bullyState is this node's own bully election.
type bullyState struct {
	phase int
	round Round
	sends int
	next  int64 // waitOK: resend or win at
}

// startBully begins a bully round.
func (m *Machine) startBully() {
	r := m.newRound()
	m.join(Bully, r)
	m.bully = bullyState{}
	if m.peers[len(m.peers)-1] == m.cfg.ID {
		m.won(Bully, r, nil, nil)
		return
	}
	m.bully = bullyState{phase: bullyWaitOK, round: r, sends: 1, next: m.now + int64(m.cfg.TimeoutTicks)}
	m.sendHigher(r)
}

// sendHigher sends ELECTION to every node with a higher id.
func (m *Machine) sendHigher(r Round) {
	for _, id := range m.peers {
		if id > m.cfg.ID {
			m.emit(Msg{Method: Bully, Kind: KindElection, Round: r, To: id})
		}
	}
}

// broadcastElected sends the winner's ELECTED to every other node.
func (m *Machine) broadcastElected(r Round) {
	for _, id := range m.peers {
		if id != m.cfg.ID {
			m.emit(Msg{Method: Bully, Kind: KindElected, Round: r, Leader: m.cfg.ID, To: id})
		}
	}
}

// tickBully resends ELECTION or, after Retries sends without an OK, wins.
func (m *Machine) tickBully() {
	b := &m.bully
	if b.phase != bullyWaitOK || m.now < b.next {
		return
	}
	if b.sends < m.cfg.Retries {
		b.sends++
		b.next = m.now + int64(m.cfg.TimeoutTicks)
		m.sendHigher(b.round)
		return
	}
	r := b.round
	*b = bullyState{}
	m.won(Bully, r, nil, nil)
}

// stepBully handles a bully message.
func (m *Machine) stepBully(msg Msg) {
	self := m.cfg.ID
	rec := m.rec(msg.Round)
	rec.addID(msg.From)
	bi := partIndex(Bully)
	switch msg.Kind {
	case KindElection:
		if msg.From > self || m.deferring {
			// Only lower nodes ask this one; a deferring node (Defer) does
			// not answer: the asker wins once its tries run out.
			return
		}
		m.emit(Msg{Method: Bully, Kind: KindOK, Round: msg.Round, To: msg.From})
		if m.recentlyClaimed() {
			m.emit(Msg{Method: Bully, Kind: KindElected, Round: msg.Round, Leader: self, To: msg.From})
			return
		}
		if !m.parts[bi].active && m.win == nil && !m.settled() {
			m.counters.Started++
			m.challengeAt = 0
			m.startBully()
		}
	case KindOK:
		p := &m.parts[bi]
		if msg.Round.Initiator != self || msg.From < self || !p.active {
			return
		}
		p.best = max(p.best, msg.From)
		if m.bully.phase == bullyWaitOK {
			m.bully.phase = bullyWaitElected
			p.deadline = m.now + int64(m.cfg.ResultTicks)
		}
	case KindElected:
		if msg.Leader == self {
			return
		}
		rec.addID(msg.Leader)
		if rec.elected {
			return
		}
		rec.elected = true
		p := m.join(Bully, msg.Round)
		p.leader = msg.Leader
		p.best = max(p.best, msg.Leader)
		p.deadline = max(p.deadline, m.now+int64(m.cfg.ResultTicks))
		m.bully = bullyState{} // stop electing: wait for the coordinator
		m.report(Bully, msg.Round, msg.Leader, false)
		if m.coord == msg.Leader {
			m.endPart(bi, msg.Leader)
		}
	}
}
