package electsim

import "github.com/ringchat/ringchat/internal/election"

// The host model: what the ring node does around its election machine.

// process carries out a machine's Ready.
func (s *Sim) process(n *Host) {
	rd := n.M.Ready()
	if s.Trace != nil {
		for _, msg := range rd.Msgs {
			if msg.Kind != election.KindAck {
				s.tracef("%d sends %s %s %s to %d", n.ID, msg.Method, msg.Kind, msg.Round, msg.To)
			}
		}
		if c := n.M.Counters(); c.Started != n.started || c.Restarts != n.restarts {
			s.tracef("%d: started %d, restarted %d", n.ID, c.Started, c.Restarts)
			n.started, n.restarts = c.Started, c.Restarts
		}
	}
	for _, msg := range rd.Msgs {
		s.send(msg)
	}
	if rd.Win && !n.claiming {
		s.tracef("%d wins, claims", n.ID)
		n.claiming = true
		s.claimLater(n)
	}
	for _, op := range rd.LeaseOps {
		s.Stats.LeaseOps++
		inc := n.inc
		s.after(s.cfg.StoreDelay, func() { s.leaseOp(n, inc, op) })
	}
	if rd.LeaseLost {
		s.tracef("%d lost the lease %d", n.ID, n.Believes)
		n.Believes = 0
	}
	if rd.LeaseWon {
		s.tracef("%d holds the lease %d", n.ID, rd.LeaseEpoch)
		n.Believes = rd.LeaseEpoch
		s.adopt(n, n.ID, rd.LeaseEpoch, true)
		s.broadcast(n.ID, rd.LeaseEpoch)
	}
	n.Reports = append(n.Reports, rd.Reports...)
}

// host does what the ring node does each tick: read the store now and
// then, and start an election when its coordinator is gone.
func (s *Sim) host(n *Host) {
	if every := int64(s.cfg.StoreReadEvery); every > 0 && (s.Now+n.ID)%every == 0 {
		s.readStore(n)
	}
	if s.cfg.DetectTicks < 0 {
		return
	}
	var suspect bool
	switch {
	case n.View == 0:
		suspect = s.cfg.BootDetect
	case n.View == n.ID:
		suspect = n.Believes != n.ViewEpoch
		if s.cfg.Method == election.Lease {
			suspect = !n.M.Holding()
		}
	default:
		c := s.byID[n.View]
		suspect = c == nil || !c.Up
	}
	switch {
	case !suspect:
		n.detectAt = 0
	case n.detectAt == 0:
		n.detectAt = s.Now + int64(s.cfg.DetectTicks) + n.ID%5
	case s.Now >= n.detectAt:
		n.detectAt = s.Now + int64(s.cfg.DetectTicks)
		s.tracef("%d detects coordinator %d down: Start", n.ID, n.View)
		s.Start(n.ID)
	}
}

// readStore: the host reads the coordinator (or the lease) from the store.
func (s *Sim) readStore(n *Host) {
	if s.cfg.Method == election.Lease {
		if s.Lease.Holder != 0 && s.Lease.ExpiresAt > s.Now {
			s.adopt(n, s.Lease.Holder, s.Lease.Epoch, true)
		} else if n.View != n.ID {
			n.View = 0 // no valid lease: no coordinator
		}
		return
	}
	if s.Store.Epoch > 0 {
		s.adopt(n, s.Store.Coord, s.Store.Epoch, true)
	}
}

// adopt: the host learns coordinator coord for epoch (a broadcast, a store
// read, a lost claim) and, if observe, tells its machine.
func (s *Sim) adopt(n *Host, coord, epoch int64, observe bool) {
	if epoch < n.ViewEpoch {
		return
	}
	n.View, n.ViewEpoch = coord, epoch
	if coord != n.ID && s.cfg.Method != election.Lease {
		n.Believes = 0
	}
	if observe {
		s.sync(n)
		n.M.Observe(coord, epoch)
		s.process(n)
	}
}

// claimLater runs the host's compare-and-set after StoreDelay.
func (s *Sim) claimLater(n *Host) {
	inc := n.inc
	s.after(s.cfg.StoreDelay, func() { s.claim(n, inc) })
}

// claim is the host's compare-and-set on the epoch it knows.
func (s *Sim) claim(n *Host, inc int) {
	if !n.Up || n.inc != inc {
		return
	}
	s.sync(n)
	if s.Store.Epoch == n.ViewEpoch {
		epoch := s.Store.Epoch + 1
		if prev, ok := s.Store.History[epoch]; ok {
			s.violate("epoch %d claimed twice (%d, %d)", epoch, prev, n.ID)
		}
		s.Store.Epoch, s.Store.Coord, s.Store.History[epoch] = epoch, n.ID, n.ID
		s.Stats.Claims++
		s.tracef("%d claimed epoch %d", n.ID, epoch)
		n.claiming = false
		n.View, n.ViewEpoch, n.Believes = n.ID, epoch, epoch
		n.M.Claimed(epoch)
		n.M.Observe(n.ID, epoch)
		s.process(n)
		s.broadcast(n.ID, epoch)
		return
	}
	s.Stats.ClaimsLost++
	coord, epoch := s.Store.Coord, s.Store.Epoch
	s.tracef("%d lost the claim to %d@%d", n.ID, coord, epoch)
	n.M.ClaimLost(coord, epoch)
	s.adopt(n, coord, epoch, false)
	s.process(n)
	if coord < n.ID {
		s.claimLater(n)
	} else {
		n.claiming = false
	}
}

// leaseOp runs a lease operation in the store and answers the machine.
func (s *Sim) leaseOp(n *Host, inc int, op election.LeaseOp) {
	if !n.Up || n.inc != inc {
		return
	}
	l := &s.Lease
	lt := int64(s.cfg.Elect.LeaseTicks)
	r := election.LeaseResult{Op: op}
	switch op.Kind {
	case election.LeaseAcquire:
		switch {
		case l.Holder == n.ID && l.ExpiresAt > s.Now:
			r.OK = true
		case l.Holder == 0 || l.ExpiresAt <= s.Now:
			l.Epoch++
			l.Holder = n.ID
			if prev, ok := l.History[l.Epoch]; ok {
				s.violate("lease epoch %d taken twice (%d, %d)", l.Epoch, prev, n.ID)
			}
			l.History[l.Epoch] = n.ID
			r.OK = true
		}
		if r.OK {
			l.ExpiresAt = s.Now + lt
		}
	case election.LeaseRenew:
		if l.Holder == n.ID && l.Epoch == op.Epoch && l.ExpiresAt > s.Now {
			l.ExpiresAt = s.Now + lt
			r.OK = true
		}
	}
	r.Holder, r.Epoch, r.RemainingTicks = l.Holder, l.Epoch, int(max(l.ExpiresAt-s.Now, 0))
	s.sync(n)
	n.M.LeaseDone(r)
	s.process(n)
}
