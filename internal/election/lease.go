package election

// Lease: the distributed mutex of reference 003 — the coordinator is the
// holder of a lease row in the store. Start asks for an Acquire; the holder
// renews every LeaseTicks/3 and counts its lease valid until LeaseTicks
// after it *issued* the successful operation (never from the answer: the
// store's clock started later, so the local view expires first). A renewal
// the store refuses, or no successful renewal before the local validity
// ends, loses the lease (Ready.LeaseLost: stop acting as coordinator); in
// the second case the node then asks for it again, as no other node knows
// that it stopped. A
// refused Acquire is retried when the store says the lease runs out, unless
// the holder is newer than what this node knew when it started (then the
// election is over). No messages are sent; one store operation is in flight
// at a time.

// leaseState is the lease method's state.
type leaseState struct {
	acquiring  bool
	holding    bool
	epoch      int64 // held
	validUntil int64 // holding while now < validUntil
	inflight   *LeaseOp
	issuedAt   int64
	nextAt     int64 // next operation (0: none)
	nextKind   LeaseOpKind
	base       int64 // epoch known when the acquisition started
	round      Round
}

// leaseOpTimeout: an operation unanswered this long counts as failed.
func (m *Machine) leaseOpTimeout() int64 { return int64(m.cfg.LeaseTicks) }

// startLease begins acquiring the lease.
func (m *Machine) startLease() {
	l := &m.lease
	l.acquiring = true
	l.base = m.epoch
	l.round = m.newRound()
	m.rec(l.round)
	l.nextAt, l.nextKind = 0, LeaseAcquire
	if l.inflight == nil {
		m.leaseOp(LeaseOp{Kind: LeaseAcquire})
	} else {
		l.nextAt = m.now // after the operation in flight
	}
}

func (m *Machine) leaseOp(op LeaseOp) {
	l := &m.lease
	l.inflight = &op
	l.issuedAt = m.now
	l.nextAt = 0
	m.out.LeaseOps = append(m.out.LeaseOps, op)
}

// LeaseDone is the store's answer to the LeaseOp in flight. Answers that
// match no operation in flight are ignored.
func (m *Machine) LeaseDone(r LeaseResult) {
	l := &m.lease
	if l.inflight == nil || r.Op.Kind != l.inflight.Kind || (r.Op.Kind == LeaseRenew && r.Op.Epoch != l.inflight.Epoch) {
		return
	}
	issued := l.issuedAt
	l.inflight = nil
	if m.resigned {
		return
	}
	if r.Op.Kind == LeaseAcquire {
		m.acquireDone(r, issued)
	} else {
		m.renewDone(r, issued)
	}
}

// acquireDone handles the answer to an Acquire issued at tick issued: a
// grant in time wins the lease; a failed operation is retried after a
// timeout; a refusal ends the election if the holder is newer than the
// one known at the start, and is otherwise retried when the lease runs
// out.
func (m *Machine) acquireDone(r LeaseResult, issued int64) {
	l := &m.lease
	switch {
	case r.OK:
		if m.now >= issued+int64(m.cfg.LeaseTicks) {
			l.nextAt, l.nextKind = m.now, LeaseAcquire // answered too late to be trusted: ask again
			return
		}
		l.acquiring, l.holding, l.epoch = false, true, r.Epoch
		l.validUntil = issued + int64(m.cfg.LeaseTicks)
		l.nextAt, l.nextKind = m.renewAt(issued), LeaseRenew
		m.out.LeaseWon, m.out.LeaseEpoch = true, r.Epoch
		m.counters.Won++
		if r.Epoch >= m.epoch {
			m.coord, m.epoch = m.cfg.ID, r.Epoch
		}
		m.report(Lease, l.round, m.cfg.ID, true)
	case r.Failed:
		if l.acquiring {
			l.nextAt, l.nextKind = m.now+int64(m.cfg.TimeoutTicks), LeaseAcquire
		}
	case r.Holder != m.cfg.ID && r.Holder > 0 && r.Epoch > l.base:
		l.acquiring = false // a holder newer than the one we knew: the election is over
		m.report(Lease, l.round, r.Holder, false)
	case l.acquiring:
		l.nextAt, l.nextKind = m.now+int64(max(r.RemainingTicks, 0))+1, LeaseAcquire
	}
}

// renewDone handles the answer to a renewal issued at tick issued, for the
// lease still held: a grant extends it, a failed operation is retried
// after a timeout, and a refusal loses the lease to the holder the store
// names.
func (m *Machine) renewDone(r LeaseResult, issued int64) {
	l := &m.lease
	switch {
	case !l.holding || r.Op.Epoch != l.epoch:
	case r.OK:
		l.validUntil = max(l.validUntil, issued+int64(m.cfg.LeaseTicks))
		l.nextAt, l.nextKind = m.renewAt(issued), LeaseRenew
	case r.Failed:
		l.nextAt, l.nextKind = m.now+int64(m.cfg.TimeoutTicks), LeaseRenew
	default:
		m.loseLease() // taken
		if r.Holder > 0 && r.Epoch > m.epoch {
			m.coord, m.epoch = r.Holder, r.Epoch
		}
	}
}

// renewAt is the tick of the renewal after a successful operation issued
// at tick issued: a third of the lease later, and never before the next
// tick.
func (m *Machine) renewAt(issued int64) int64 {
	return max(issued+int64(m.cfg.LeaseTicks/3), m.now+1)
}

// loseLease stops holding. A LeaseWon not yet collected is withdrawn
// instead of being followed by LeaseLost.
func (m *Machine) loseLease() {
	l := &m.lease
	if !l.holding {
		return
	}
	l.holding = false
	if l.nextKind == LeaseRenew {
		l.nextAt = 0
	}
	if m.out.LeaseWon {
		m.out.LeaseWon, m.out.LeaseEpoch = false, 0
	} else {
		m.out.LeaseLost = true
	}
}

// tickLease acts on the lease deadlines.
func (m *Machine) tickLease() {
	l := &m.lease
	if l.holding && m.now >= l.validUntil {
		// No renewal answered in time. The store may still hold the lease
		// for this node (a late answer, a slow store): the others see a
		// live coordinator and never try, so this node asks for it again
		// (granted if it is still its own or has expired).
		m.loseLease()
		if !m.resigned && !m.Electing() {
			m.counters.Started++
			m.startLease()
		}
	}
	if l.inflight != nil && m.now >= l.issuedAt+m.leaseOpTimeout() {
		l.nextAt, l.nextKind = m.now, l.inflight.Kind
		l.inflight = nil
	}
	if l.inflight != nil || l.nextAt == 0 || m.now < l.nextAt {
		return
	}
	switch {
	case l.nextKind == LeaseRenew && l.holding:
		m.leaseOp(LeaseOp{Kind: LeaseRenew, Epoch: l.epoch})
	case l.acquiring: // (a renewal that timed out after the lease was lost included)
		m.leaseOp(LeaseOp{Kind: LeaseAcquire})
	default:
		l.nextAt = 0
	}
}

// leaseDeadlines reports the lease's deadlines to at.
func (m *Machine) leaseDeadlines(at func(int64)) {
	l := &m.lease
	if l.holding {
		at(l.validUntil)
	}
	if l.inflight != nil {
		at(l.issuedAt + m.leaseOpTimeout())
	} else if l.nextAt != 0 {
		at(l.nextAt)
	}
}

// observeLease: a coordinator with a newer epoch than the lease held means
// it is gone; one newer than when this node started acquiring ends the
// acquisition.
func (m *Machine) observeLease(coord, epoch int64) {
	l := &m.lease
	if coord == m.cfg.ID {
		return
	}
	if l.holding && epoch > l.epoch {
		m.loseLease()
	}
	if l.acquiring && epoch > l.base {
		l.acquiring = false
		if l.nextKind == LeaseAcquire {
			l.nextAt = 0
		}
		m.report(Lease, l.round, coord, false)
	}
}

// resignLease gives the lease up for good.
func (m *Machine) resignLease() {
	m.loseLease()
	m.lease.acquiring = false
	m.lease.nextAt = 0
}

// Holding reports whether this node holds a lease it believes valid.
func (m *Machine) Holding() bool { return m.lease.holding && m.now < m.lease.validUntil }
