package chat

import (
	"fmt"
	"slices"

	"github.com/ringchat/ringchat/internal/protocol"
)

// Health is what a node knows of itself that its clients must know: the
// server assembling the node sets it (SetHealth).
type Health struct {
	// StoreDown: the node cannot reach the store. Nothing sent here is
	// stored until it can.
	StoreDown bool
	// OutOfRing: the node was in the ring and is no longer (cut off from
	// the others, or on the side of a split that lost): nothing sent here
	// is delivered until it is back.
	OutOfRing bool
}

// OK reports a node that serves its clients.
func (h Health) OK() bool { return !h.StoreDown && !h.OutOfRing }

// notice is the NOTICE that tells h, from node id.
func (h Health) notice(id int64) protocol.NodeNoticeV2 {
	switch {
	case h.StoreDown:
		return protocol.NodeNoticeV2{MessageType: protocol.TypeNotice, Code: protocol.NoticeStoreUnreachable, Node: id,
			Message: fmt.Sprintf("node %d cannot reach the store: log in at another node", id)}
	case h.OutOfRing:
		return protocol.NodeNoticeV2{MessageType: protocol.TypeNotice, Code: protocol.NoticeOutOfRing, Node: id,
			Message: fmt.Sprintf("node %d is out of the ring: log in at another node", id)}
	}
	return protocol.NodeNoticeV2{MessageType: protocol.TypeNotice, Code: protocol.NoticeNodeOK, Node: id,
		Message: fmt.Sprintf("node %d serves again", id)}
}

// refusal is the LOGIN refusal of a node in health h, or nil.
func (h Health) refusal(id int64) *Error {
	switch {
	case h.StoreDown:
		return errorf(protocol.CodeUnavailable, "node %d cannot reach the store; log in at another node", id)
	case h.OutOfRing:
		return errorf(protocol.CodeUnavailable, "node %d is out of the ring; log in at another node", id)
	}
	return nil
}

// SetHealth records the node's health; on a change, every protocol-2
// session that asked for FeatureFailover is told at once (NOTICE). While
// the node is not OK, LOGIN is refused at once (UNAVAILABLE).
func (s *Server) SetHealth(h Health) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.health == h {
		return
	}
	was := s.health
	s.health = h
	line := encode(h.notice(s.cfg.NodeID))
	n := 0
	for _, sess := range s.sessions {
		if sess.ready && sess.version >= protocol.V2 && sess.features&featFailover != 0 {
			sess.c.sendLine(line)
			n++
		}
	}
	s.log.Info().Bool("store_down", h.StoreDown).Bool("out_of_ring", h.OutOfRing).
		Bool("was_store_down", was.StoreDown).Bool("was_out_of_ring", was.OutOfRing).Int("told", n).
		Msg("chat: node health changed; clients told")
}

// Health is the node's health as last set.
func (s *Server) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health
}

// SetNodes sets the ring's nodes the LOGIN answer lists (FeatureFailover).
func (s *Server) SetNodes(nodes []protocol.NodeAddr) {
	nodes = slices.Clone(nodes)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = nodes
}

// loginRefusal is the refusal of a LOGIN while the node is not OK, or nil.
func (s *Server) loginRefusal() *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health.refusal(s.cfg.NodeID)
}

// granted is what a LOGIN answer adds for a session with features f: the
// features granted (those that change the answer, and
// FeatureCumulativeAck, which a client must know it has), the ring's
// nodes (FeatureFailover) and the largest message (FeatureLimits).
func (s *Server) granted(f int) (features []string, nodes []protocol.NodeAddr, maxMessage int) {
	if f&featFailover != 0 {
		s.mu.Lock()
		features, nodes = append(features, protocol.FeatureFailover), s.nodes
		s.mu.Unlock()
	}
	if f&featLimits != 0 {
		features, maxMessage = append(features, protocol.FeatureLimits), protocol.MaxContentBytes
	}
	if f&featCumulativeAck != 0 {
		features = append(features, protocol.FeatureCumulativeAck)
	}
	return features, nodes, maxMessage
}

// leaving is the node a LOGIN says its client has left, for a session
// that asks for FeatureFailover (0: none). The user's presence at that
// node is replaced: a node cut off from the store cannot clear it, and
// its client would otherwise be refused everywhere (USER_ONLINE) until
// the cut heals. The node left finds, once it heals, that its session's
// presence is elsewhere and closes that connection (USER_ONLINE). A
// name with a password needs it to log in at all; a name without one is
// open to anyone by the login policy (Accounts), this included.
func leaving(req Request) int64 {
	if req.Version < protocol.V2 || featuresOf(req.Features)&featFailover == 0 {
		return 0
	}
	return req.Leaving
}
