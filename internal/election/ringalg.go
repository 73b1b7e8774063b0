package election

import "slices"

// This file holds what the two ring methods share — reliable hops to the
// next live node and the ELECTED announcement round — and the ring-based
// algorithm itself.
//
// Ring-based (the textbook candidate list): the initiator sends
// ELECTION{Cands: [self]} to its successor; every node appends itself and
// forwards. The node that finds itself in the list already (normally the
// initiator; another node when the initiator died, since the list then
// passes a node that is in it) completes the round: the winner is the
// highest id of the list. If that is itself it wins; else it sends
// ELECTED{Leader: W, Cands: [itself, the others]} round the ring. The
// announcement pauses at W, which wins and continues it once the host has
// claimed the role (Claimed); it stops at the node whose successor is its
// origin, so it makes n−1 hops.

// hop is a ring message awaiting its ACK.
type hop struct {
	msg   Msg
	sends int
	next  int64 // resend (or give up) at
}

// nextHop is the first ring member after this node that is not taken for
// dead in round r; keep is never skipped (the candidate or leader a message is bound
// for: trying it is how a stale dead mark is corrected). It is this node
// when no other is left.
func (m *Machine) nextHop(keep int64, r Round) int64 {
	self := m.cfg.ID
	n := len(m.peers)
	i, _ := slices.BinarySearch(m.peers, self+1)
	for k := range n {
		id := m.peers[(i+k)%n]
		if id == self {
			return self
		}
		if id == keep || !m.isDead(id, r) {
			return id
		}
	}
	return self
}

// sendHop sends msg to node to, reliably: it is resent every TimeoutTicks
// until to acknowledges it, Retries sends in all.
func (m *Machine) sendHop(msg Msg, to int64) {
	m.seq++
	msg.Seq = m.seq
	msg.To = to
	msg.From = m.cfg.ID
	if len(m.hops) >= maxHops {
		m.hops = slices.Delete(m.hops, 0, 1)
	}
	m.hops = append(m.hops, &hop{msg: msg, sends: 1, next: m.now + int64(m.cfg.TimeoutTicks)})
	m.emit(msg)
}

// stepHop acknowledges a ring-method message and reports whether it is new
// and to be handled (false for ACKs, OKs and duplicates).
func (m *Machine) stepHop(msg Msg) bool {
	switch msg.Kind {
	case KindAck:
		for i, h := range m.hops {
			if h.msg.Seq == msg.Seq && h.msg.To == msg.From {
				m.hops = slices.Delete(m.hops, i, i+1)
				break
			}
		}
		return false
	case KindOK:
		return false
	}
	m.emit(Msg{Method: msg.Method, Kind: KindAck, Round: msg.Round, Seq: msg.Seq, To: msg.From})
	k := seenKey{from: msg.From, seq: msg.Seq, method: msg.Method, kind: msg.Kind, round: msg.Round,
		cand: msg.Cand, leader: msg.Leader, hops: msg.Hops, ncands: len(msg.Cands)}
	return m.seen.add(k, m.now, m.ttl())
}

// tickHops resends unacknowledged hops and gives up on those sent Retries
// times: the addressee is taken for dead and the message goes on past it.
func (m *Machine) tickHops() {
	var failed []Msg
	kept := m.hops[:0]
	for _, h := range m.hops {
		switch {
		case m.now < h.next:
			kept = append(kept, h)
		case h.sends < m.cfg.Retries:
			h.sends++
			h.next = m.now + int64(m.cfg.TimeoutTicks)
			m.emit(h.msg)
			kept = append(kept, h)
		default:
			failed = append(failed, h.msg)
		}
	}
	clear(m.hops[len(kept):])
	m.hops = kept
	for _, msg := range failed {
		m.markDead(msg.To)
		m.hopFailed(msg)
	}
	if len(failed) > 0 && !m.Electing() {
		clear(m.dead) // the marks served the announcement; none outlives an election
	}
}

// hopFailed sends msg on past its dead addressee.
func (m *Machine) hopFailed(msg Msg) {
	to := msg.To
	msg.To, msg.Seq = 0, 0
	switch {
	case msg.Kind == KindElected:
		if to == msg.Leader {
			m.restart(msg.Method) // the announced winner is dead
			return
		}
		msg.Hops-- // forwardElected counts the hop again
		m.forwardElected(msg)
	case !m.parts[partIndex(msg.Method)].active && m.settled():
		// the election is over here: nobody needs this candidacy any more
	case msg.Method == Ring:
		m.sendRingElection(msg)
	case msg.Method == ChangRoberts:
		if msg.Cand == to {
			msg.Cand = m.cfg.ID // the candidate died: this node stands instead
			m.sentCand(m.join(ChangRoberts, msg.Round), m.cfg.ID)
			m.rec(msg.Round).fwdCand = m.cfg.ID
		}
		m.sendCR(msg)
	}
}

// startRing begins a ring-based round.
func (m *Machine) startRing() {
	r := m.newRound()
	m.join(Ring, r)
	m.rec(r).fwdCand = m.cfg.ID
	m.sendRingElection(Msg{Method: Ring, Kind: KindElection, Round: r, Cands: []int64{m.cfg.ID}})
}

// sendRingElection sends a candidate list (that holds this node) to the
// next live node; with none left, the round completes here.
func (m *Machine) sendRingElection(msg Msg) {
	to := m.nextHop(0, msg.Round)
	if to == m.cfg.ID {
		if !m.settled() { // all others seem dead, unless a result came in a moment ago
			m.ringComplete(msg.Round, msg.Cands)
		}
		return
	}
	m.sendHop(msg, to)
}

// stepRingElection handles a ring ELECTION (a new one: acked, deduplicated).
func (m *Machine) stepRingElection(msg Msg) {
	if len(msg.Cands) == 0 || msg.Hops > m.hopLimit() {
		return
	}
	rec := m.rec(msg.Round)
	rec.addID(msg.From)
	for _, c := range msg.Cands {
		rec.addID(c)
	}
	if slices.Contains(msg.Cands, m.cfg.ID) {
		m.ringComplete(msg.Round, msg.Cands)
		return
	}
	if rec.fwdCand != 0 || len(msg.Cands) >= MaxPeers {
		return // forwarded already (the list came by two paths)
	}
	p := m.join(Ring, msg.Round)
	p.best = max(p.best, slices.Max(msg.Cands))
	rec.fwdCand = m.cfg.ID
	out := msg
	if !m.deferring { // a deferring node (Defer) passes the list on without itself
		out.Cands = append(slices.Clone(msg.Cands), m.cfg.ID)
	}
	out.Hops++
	m.sendRingElection(out)
}

// ringComplete ends the candidate list's circle at this node.
func (m *Machine) ringComplete(r Round, cands []int64) {
	rec := m.rec(r)
	if rec.completed {
		return
	}
	rec.completed = true
	w := max(slices.Max(cands), m.cfg.ID)
	p := m.join(Ring, r)
	p.best = max(p.best, w)
	if w == m.cfg.ID {
		m.won(Ring, r, nil, cands)
		return
	}
	rec.elected = true
	p.leader = w
	p.deadline = max(p.deadline, m.now+int64(m.cfg.ResultTicks))
	m.forwardElected(Msg{Method: Ring, Kind: KindElected, Round: r, Leader: w, Cands: originFirst(m.cfg.ID, cands)})
	m.report(Ring, r, w, false)
	if m.coord == w {
		m.endPart(partIndex(Ring), w)
	}
}

// announce sends the ELECTED messages of won rounds.
func (m *Machine) announce(rounds []winRound) {
	bullyDone := false
	for _, wr := range rounds {
		switch wr.method {
		case Ring, ChangRoberts:
			msg := Msg{Method: wr.method, Kind: KindElected, Round: wr.round, Leader: m.cfg.ID,
				Cands: originFirst(m.cfg.ID, wr.cands)}
			if wr.cont != nil {
				msg = *wr.cont
			}
			m.rec(wr.round).elected = true
			m.forwardElected(msg)
		case Bully:
			if !bullyDone {
				bullyDone = true
				m.broadcastElected(wr.round)
			}
		}
	}
}

// electionOver: this node takes part in no election any more. Dead marks
// serve one election (a stale one would skip a live node the next time),
// and candidacies still being resent belong to an election whose result is
// known here: both go. Announcements (ELECTED) still on their way go on.
func (m *Machine) electionOver() {
	clear(m.dead)
	m.hops = slices.DeleteFunc(m.hops, func(h *hop) bool { return h.msg.Kind == KindElection })
}

// forwardElected sends an ELECTED on to the next live node, unless that is
// the announcement's origin (Cands[0]): then the circle is complete.
func (m *Machine) forwardElected(msg Msg) {
	origin := msg.Leader
	if len(msg.Cands) > 0 {
		origin = msg.Cands[0]
	}
	to := m.nextHop(msg.Leader, msg.Round)
	if to == m.cfg.ID || to == origin {
		return
	}
	msg.Cands = slices.Clone(msg.Cands)
	msg.Hops++
	m.sendHop(msg, to)
}

// stepElected handles a ring or chang-roberts ELECTED.
func (m *Machine) stepElected(msg Msg) {
	if msg.Hops > m.hopLimit() {
		return
	}
	rec := m.rec(msg.Round)
	rec.addID(msg.From)
	for _, c := range msg.Cands {
		rec.addID(c)
	}
	if rec.elected {
		return
	}
	rec.elected = true
	if msg.Leader == m.cfg.ID {
		if len(msg.Cands) > 0 && msg.Cands[0] != m.cfg.ID {
			m.won(msg.Method, msg.Round, &msg, nil) // ring: the announcement reached the winner
		}
		return
	}
	p := m.join(msg.Method, msg.Round)
	p.leader = msg.Leader
	p.best = max(p.best, msg.Leader)
	p.deadline = max(p.deadline, m.now+int64(m.cfg.ResultTicks))
	m.forwardElected(msg)
	m.report(msg.Method, msg.Round, msg.Leader, false)
	if m.coord == msg.Leader {
		m.endPart(partIndex(msg.Method), msg.Leader)
	}
}

// hopLimit bounds the hops of a ring message (a candidacy may go round
// twice: once to reach the best candidate, once round it).
func (m *Machine) hopLimit() int { return 2*len(m.peers) + 2 }

// isDead reports whether id was taken for dead during round r: marks made
// before this node first saw r do not count (the round probes again, so a
// mark left from lost datagrams cannot keep a live node out of a new
// election).
func (m *Machine) isDead(id int64, r Round) bool {
	t, ok := m.dead[id]
	return ok && m.now-t < m.deadTTL() && t >= m.rec(r).first
}

func (m *Machine) markDead(id int64) {
	if id != m.cfg.ID {
		m.dead[id] = m.now
	}
}

// seenKey fingerprints a hop message for deduplication.
type seenKey struct {
	from         int64
	seq          uint64
	method       Method
	kind         Kind
	round        Round
	cand, leader int64
	hops, ncands int
}

// seenLog remembers the last maxSeen hop messages for ttl ticks.
type seenLog struct {
	at   map[seenKey]int64
	ring []seenKey
	next int
}

// add records k and reports whether it is new.
func (s *seenLog) add(k seenKey, now, ttl int64) bool {
	if t, ok := s.at[k]; ok && now-t <= ttl {
		return false
	}
	if s.at == nil {
		s.at = map[seenKey]int64{}
	}
	if len(s.ring) < maxSeen {
		s.ring = append(s.ring, k)
	} else {
		delete(s.at, s.ring[s.next])
		s.ring[s.next] = k
		s.next = (s.next + 1) % maxSeen
	}
	s.at[k] = now
	return true
}

func originFirst(origin int64, cands []int64) []int64 {
	out := make([]int64, 0, len(cands)+1)
	out = append(out, origin)
	for _, c := range cands {
		if c != origin && len(out) < MaxPeers {
			out = append(out, c)
		}
	}
	return out
}

// Round records, messages sent and reports serve every voting method.

// emit queues msg for sending and counts it.
func (m *Machine) emit(msg Msg) {
	msg.From = m.cfg.ID
	m.out.Msgs = append(m.out.Msgs, msg)
	m.counters.Sent[msg.Method]++
	m.rec(msg.Round).sent++
}

// report emits the Report of round once.
func (m *Machine) report(meth Method, r Round, leader int64, won bool) {
	rec := m.rec(r)
	if rec.reported || leader < 1 {
		return
	}
	rec.reported = true
	rec.addID(leader)
	m.out.Reports = append(m.out.Reports, Report{Method: meth, Round: r, Leader: leader, Won: won,
		Participants: len(rec.ids), MsgsSent: rec.sent, Ticks: m.now - rec.first})
}

// roundRec is what a node keeps about one round.
type roundRec struct {
	first, last int64
	sent        int     // messages this node sent in the round, acks included
	ids         []int64 // nodes known to have taken part, sorted
	fwdCand     int64   // ring: ≠0 once forwarded; chang-roberts: candidate forwarded
	completed   bool    // ring: the list came back here; chang-roberts: won here
	elected     bool    // the ELECTED of the round passed here
	reported    bool
}

func (r *roundRec) addID(id int64) {
	if id < 1 || len(r.ids) >= MaxPeers {
		return
	}
	if i, ok := slices.BinarySearch(r.ids, id); !ok {
		r.ids = slices.Insert(r.ids, i, id)
	}
}

// roundLog keeps the last maxRounds rounds; a record untouched for ttl
// ticks is forgotten (a restarted node may reuse its round numbers).
type roundLog struct {
	recs  map[Round]*roundRec
	order []Round
}

// rec returns the record of round r, creating it.
func (m *Machine) rec(r Round) *roundRec {
	l := &m.rounds
	if rec, ok := l.recs[r]; ok {
		if m.now-rec.last <= m.ttl() {
			rec.last = m.now
			return rec
		}
		*rec = roundRec{first: m.now, last: m.now}
		rec.addID(m.cfg.ID)
		return rec
	}
	if l.recs == nil {
		l.recs = map[Round]*roundRec{}
	}
	if len(l.order) >= maxRounds {
		delete(l.recs, l.order[0])
		l.order = slices.Delete(l.order, 0, 1)
	}
	rec := &roundRec{first: m.now, last: m.now}
	rec.addID(m.cfg.ID)
	l.recs[r] = rec
	l.order = append(l.order, r)
	return rec
}
