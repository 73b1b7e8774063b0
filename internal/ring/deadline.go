package ring

// NextDeadline is the first tick at which Tick may act; until then ticks
// only advance the clock. A runtime can sleep until it (AdvanceTo) instead
// of ticking, which is what keeps an idle node from waking up 50 times a
// second. It may be early (then Tick does nothing) but never late.
func (n *Machine) NextDeadline() int64 {
	next := min(n.tok.NextDeadline(), n.el.NextDeadline())
	at := func(t int64) { next = min(next, t) }
	n.linkDeadlines(at)
	if n.req != nil {
		at(n.req.nextAt)
	}
	if !n.isCoord && n.phase == PhaseInRing {
		at(n.nextCheck)
	}
	if n.isCoord {
		at(n.nextSync)
		if !n.leaseMethod() {
			at(n.nextAlive)
		}
		for _, p := range n.pendingSucc {
			at(p.nextAt)
		}
		if n.handoff != nil {
			at(n.handoff.nextAt)
		}
	}
	if n.relay && !n.isCoord {
		at(n.staleRetryAt)
	}
	if n.leaseCheck != 0 {
		at(n.leaseCheckAt)
	}
	n.troubleDeadlines(at)
	if n.retryOpAt != 0 {
		at(n.retryOpAt)
	}
	if n.phase == PhaseLeaving {
		at(n.leaveBy)
		if n.leaveOK && !n.tok.Holding() {
			at(n.now + 1)
		}
	}
	return max(next, n.now+1)
}

// linkDeadlines passes to at the deadlines of the ring links: giving up on
// a successor that is down, the next heartbeat (or the wait for its
// answer), and the predecessor's silence.
func (n *Machine) linkDeadlines(at func(int64)) {
	inRing := n.phase == PhaseInRing || n.phase == PhaseLeaving
	if inRing && !n.succUp && n.deferred == 0 && n.req == nil {
		at(n.watchdogAt() + 1)
	}
	if n.succ != 0 && n.succUp && inRing {
		if n.pingOut {
			at(n.pingAt + int64(n.cfg.FailTicks))
		} else {
			at(n.lastSent + n.heartbeatTicks())
		}
	}
	if n.pred != 0 {
		at(n.predHeard + int64(n.cfg.PredSilenceTicks) + 1)
	}
}

// AdvanceTo brings the clock to tick t, running Tick at every deadline on
// the way (and only there). It is equivalent to calling Tick t-Now() times.
func (n *Machine) AdvanceTo(t int64) {
	for n.now < t {
		next := n.NextDeadline()
		if next > t {
			n.now = t
			n.tok.Skip(t)
			n.el.AdvanceTo(t)
			return
		}
		n.now = next - 1
		n.tok.Skip(next - 1)
		n.Tick()
	}
}
