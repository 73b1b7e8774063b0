package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/store"
)

// maxAckBacklog bounds the protocol-2 acknowledgements waiting for the
// token at one node.
const maxAckBacklog = 200_000

// handleLine decodes and serves one line (reader goroutine).
func (c *conn) handleLine(line []byte) {
	req, derr := Decode(line)
	if derr != nil {
		if req.Type == TypeLogin && req.Version >= V2 && c.sess == nil {
			c.sendLine(encodeError(V2, derr))
			return
		}
		c.reply(derr)
		return
	}
	if c.version < V2 && (req.Type != TypeLogin || req.Version < V2) {
		req.ID = "" // protocol 1 has no ids; ours are made here
	}
	switch req.Type {
	case TypeAlive:
		return
	case TypeLogin:
		c.login(req)
		return
	}
	if c.sess == nil {
		c.reply(&Error{Code: CodeNotLoggedIn, Message: "log in first: send LOGIN with your username", ID: req.ID})
		return
	}
	switch req.Type {
	case TypeJoinGroup, TypeLeaveGroup:
		c.group(req)
	case TypeChat:
		c.chat(req)
	default:
		if c.version < V2 {
			c.reply(errorf(CodeUnknownType, "unknown messageType %s", quote(req.Type)))
			return
		}
		switch req.Type {
		case TypeAck:
			c.ack(req)
		case TypeWho:
			c.who(req)
		case TypeGroups:
			c.groups(req)
		case TypeHistory:
			c.history(req)
		}
	}
}

func (c *conn) unavailable(id string, err error) {
	c.s.log.Warn().Err(err).Str("remote", c.remote).Msg("chat: store error serving a client")
	c.reply(&Error{Code: CodeUnavailable, Message: "the store is unavailable; try again", ID: id})
}

// login serves LOGIN: the user is created on first login; a password (v2)
// claims the name on first use and is required from then on; a user is
// logged in on one connection of the whole ring at a time (a second login
// is refused with USER_ONLINE).
func (c *conn) login(req Request) {
	version := req.Version
	fail := func(e *Error) {
		e.ID = req.ID
		if c.sess == nil {
			c.sendLine(encodeError(version, e))
		} else {
			c.reply(e)
		}
	}
	if c.sess != nil {
		fail(errorf(CodeLoggedIn, "already logged in as %s on this connection", quote(c.sess.name)))
		return
	}
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	var u store.User
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		u, _, err = tx.EnsureUser(req.Username)
		return err
	})
	if err != nil {
		c.unavailableLogin(fail, err)
		return
	}
	if e := s.checkPassword(ctx, &u, req, version); e != nil {
		fail(e)
		return
	}
	sess, e := s.reserve(ctx, c, u, version)
	if e != nil {
		fail(e)
		return
	}
	if e := s.claimPresence(ctx, u); e != nil {
		s.unreserve(sess)
		fail(e)
		return
	}
	c.sess, c.version = sess, version
	c.sessPtr.Store(sess)
	if version >= V2 {
		c.sendLine(encode(loginV2{TypeLogin, u.Name, V2, s.cfg.NodeID, req.ID}))
	} else {
		c.sendLine(encode(loginV1{TypeLogin, u.Name}))
	}
	// After the echo: deliveries follow it.
	s.mu.Lock()
	sess.ready = true
	s.fetchReq++
	s.mu.Unlock()
	s.want()
	s.log.Debug().Str("user", u.Name).Int("version", version).Str("remote", c.remote).Msg("chat: logged in")
}

func (c *conn) unavailableLogin(fail func(*Error), err error) {
	c.s.log.Warn().Err(err).Str("remote", c.remote).Msg("chat: store error at login")
	fail(errorf(CodeUnavailable, "the store is unavailable; try again"))
}

// checkPassword applies the password rules to u, claiming the name if this
// is the first login with a password.
func (s *Server) checkPassword(ctx context.Context, u *store.User, req Request, version int) *Error {
	if u.PasswordHash != "" {
		if version < V2 || req.Password == "" {
			return errorf(CodePasswordNeeded, "user %s is protected by a password: log in with protocol version 2 and the password", quote(u.Name))
		}
		return s.verify(u.PasswordHash, req.Password)
	}
	if version < V2 || req.Password == "" {
		return nil
	}
	hash, err := s.hash(req.Password)
	if err != nil {
		return errorf(CodeUnavailable, "could not hash the password: %v", err)
	}
	var claimed bool
	err = s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if claimed, err = tx.ClaimPassword(u.ID, hash); err != nil || claimed {
			return err
		}
		*u, err = tx.UserByName(u.Name) // someone claimed it first
		return err
	})
	switch {
	case err != nil:
		s.log.Warn().Err(err).Msg("chat: store error claiming a password")
		return errorf(CodeUnavailable, "the store is unavailable; try again")
	case claimed:
		s.log.Info().Str("user", u.Name).Msg("chat: name claimed with a password")
		return nil
	}
	return s.verify(u.PasswordHash, req.Password)
}

func (s *Server) hash(password string) (string, error) {
	s.hashSem <- struct{}{}
	defer func() { <-s.hashSem }()
	return hashPassword(password)
}

func (s *Server) verify(hash, password string) *Error {
	s.hashSem <- struct{}{}
	ok, err := checkPassword(hash, password)
	<-s.hashSem
	switch {
	case err != nil:
		s.log.Error().Err(err).Msg("chat: a stored password hash is unreadable")
		return errorf(CodeUnavailable, "the stored password cannot be checked")
	case !ok:
		return errorf(CodeBadPassword, "wrong password")
	}
	return nil
}

// reserve makes c the user's only session at this node, waiting (within
// ctx) for a session of the user that is logging out.
func (s *Server) reserve(ctx context.Context, c *conn, u store.User, version int) (*session, *Error) {
	for {
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return nil, errorf(CodeShutdown, "server shutting down")
		}
		old := s.sessions[u.ID]
		if old == nil {
			sess := &session{c: c, userID: u.ID, name: u.Name, version: version, gone: make(chan struct{})}
			s.sessions[u.ID] = sess
			s.mu.Unlock()
			return sess, nil
		}
		if !old.closing {
			s.mu.Unlock()
			return nil, errorf(CodeUserOnline, "user %s is already logged in (at node %d)", quote(u.Name), s.cfg.NodeID)
		}
		gone := old.gone
		s.mu.Unlock()
		select {
		case <-gone:
		case <-ctx.Done():
			return nil, errorf(CodeUserOnline, "user %s is still logging out at node %d; try again", quote(u.Name), s.cfg.NodeID)
		}
	}
}

func (s *Server) unreserve(sess *session) {
	s.mu.Lock()
	if s.sessions[sess.userID] == sess {
		delete(s.sessions, sess.userID)
	}
	s.mu.Unlock()
	close(sess.gone)
}

// claimPresence records the user as logged in here. A presence held by a
// node that is no longer in the ring (crashed, spliced out) is stale and
// replaced; one held by a live node refuses the login.
func (s *Server) claimPresence(ctx context.Context, u store.User) *Error {
	self := s.cfg.NodeID
	// With the presence, in one transaction, what was delivered to the
	// user's earlier connections and never acknowledged becomes pending
	// again (no node fetches for the user until its presence is here).
	login := func(tx store.Tx) error {
		if err := tx.SetPresence(u.ID, self); err != nil {
			return err
		}
		_, err := tx.ResetDelivered(u.ID)
		return err
	}
	err := s.st.Update(ctx, login)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrUserOnline) {
		s.log.Warn().Err(err).Msg("chat: store error recording presence")
		return errorf(CodeUnavailable, "the store is unavailable; try again")
	}
	var p store.Presence
	err = s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		p, err = tx.PresenceOf(u.ID)
		return err
	})
	if err != nil {
		return errorf(CodeUnavailable, "the store is unavailable; try again")
	}
	nodes, err := s.st.Nodes(ctx)
	if err != nil {
		return errorf(CodeUnavailable, "the store is unavailable; try again")
	}
	live := slices.ContainsFunc(nodes, func(n store.Node) bool { return n.ID == p.NodeID && n.InRing() })
	if live {
		return errorf(CodeUserOnline, "user %s is already logged in at node %d", quote(u.Name), p.NodeID)
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.ClearPresence(u.ID, p.NodeID); err != nil {
			return err
		}
		return login(tx)
	})
	switch {
	case errors.Is(err, store.ErrUserOnline): // someone else was quicker
		return errorf(CodeUserOnline, "user %s has just logged in elsewhere", quote(u.Name))
	case err != nil:
		return errorf(CodeUnavailable, "the store is unavailable; try again")
	}
	s.stats.presenceCleared.Add(1)
	s.log.Info().Str("user", u.Name).Int64("stale_node", p.NodeID).Msg("chat: replaced presence left by a node not in the ring")
	return nil
}

// clearPresence removes a departing session's presence row.
func (s *Server) clearPresence(sess *session) {
	ctx, cancel := s.storeCtx()
	defer cancel()
	err := s.st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.ClearPresence(sess.userID, s.cfg.NodeID)
		return err
	})
	if err != nil {
		if !errors.Is(err, context.Canceled) { // stopping: Run clears them all
			s.log.Warn().Err(err).Str("user", sess.name).Msg("chat: could not clear presence; retrying later")
		}
		s.mu.Lock()
		s.markDirtyLocked()
		s.mu.Unlock()
	}
}

// group serves JOIN_GROUP (the group is created on first join; joining
// twice is harmless) and LEAVE_GROUP.
func (c *conn) group(req Request) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	var notMember, unknown bool
	err := s.st.Update(ctx, func(tx store.Tx) error {
		notMember, unknown = false, false
		if req.Type == TypeJoinGroup {
			g, _, err := tx.EnsureGroup(req.Group)
			if err != nil {
				return err
			}
			s.names.put(Recipient{Name: g.Name, Group: true}, g.ID)
			_, err = tx.JoinGroup(g.ID, c.sess.userID)
			return err
		}
		g, err := tx.GroupByName(req.Group)
		if errors.Is(err, store.ErrNotFound) {
			unknown = true
			return nil
		}
		if err != nil {
			return err
		}
		left, err := tx.LeaveGroup(g.ID, c.sess.userID)
		notMember = !left
		return err
	})
	switch {
	case err != nil:
		c.unavailable(req.ID, err)
	case unknown:
		c.reply(&Error{Code: CodeUnknownGroup, Message: fmt.Sprintf("no group %s", quote(req.Group)), ID: req.ID})
	case notMember:
		c.reply(&Error{Code: CodeNotMember, Message: fmt.Sprintf("not a member of %s", req.Group), ID: req.ID})
	case c.version >= V2:
		c.sendLine(encode(groupV2{req.Type, req.Group, req.ID}))
	default:
		c.sendLine(encode(groupV1{req.Type, req.Group}))
	}
}

// chat serves CHAT_MESSAGE: the recipient is checked now (an unknown one is
// refused at once and nothing is queued), then the message waits here for
// the token. The sender is the logged-in user, whatever fromName says.
func (c *conn) chat(req Request) {
	s := c.s
	id := req.ID
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			c.unavailable("", err)
			return
		}
		id = u.String()
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	var refusal *Error
	if _, ok := s.names.get(req.To); !ok {
		err := s.st.Update(ctx, func(tx store.Tx) error {
			var err error
			_, refusal, err = s.lookup(tx, req.To)
			return err
		})
		if err != nil {
			c.unavailable(req.ID, err)
			return
		}
	}
	if refusal != nil {
		refusal.ID = req.ID
		c.reply(refusal)
		return
	}
	m := &outMsg{id: id, senderID: c.sess.userID, sender: c.sess.name, to: req.To, content: req.Content,
		sentAt: time.Now(), c: c, version: c.version}
	s.mu.Lock()
	switch {
	case s.draining:
		refusal = errorf(CodeShutdown, "server shutting down: message not accepted; send it again at another node")
	case len(s.outbox) >= s.cfg.OutboxLimit:
		refusal = errorf(CodeBusy, "node busy: %d messages waiting to be stored; send again later", len(s.outbox))
	default:
		s.outbox = append(s.outbox, m)
	}
	s.mu.Unlock()
	if refusal != nil {
		refusal.ID = req.ID
		c.reply(refusal)
		return
	}
	s.stats.queued.Add(1)
	s.want()
}

// ack queues protocol-2 acknowledgements for the next visit.
func (c *conn) ack(req Request) {
	s := c.s
	s.mu.Lock()
	full := len(s.acks)+s.ackCount+len(req.IDs) > maxAckBacklog
	if !full {
		sess := c.sess
		for _, id := range req.IDs {
			if seq, ok := sess.unacked[id]; ok {
				delete(sess.unacked, id)
				s.acks = append(s.acks, store.RecipientSeq{RecipientID: sess.userID, Seq: seq})
				continue
			}
			s.ackIDs[sess.userID] = append(s.ackIDs[sess.userID], id)
			s.ackCount++
		}
	}
	s.mu.Unlock()
	if full {
		c.reply(&Error{Code: CodeBusy, Message: "node busy: too many acknowledgements waiting; send them again later", ID: req.ID})
	}
}

// who serves WHO: every online user and their node.
func (c *conn) who(req Request) {
	ctx, cancel := c.s.storeCtx()
	defer cancel()
	online, err := c.s.st.Online(ctx)
	if err != nil {
		c.unavailable(req.ID, err)
		return
	}
	r := whoV2{MessageType: TypeWho, Users: make([]OnlineUser, 0, len(online)), ID: req.ID}
	size := 0
	for _, p := range online {
		size += len(p.UserName) + 40
		if size > maxReplyBytes {
			r.Truncated = true
			break
		}
		r.Users = append(r.Users, OnlineUser{Username: p.UserName, Node: p.NodeID})
	}
	c.sendLine(encode(r))
}

// groups serves GROUPS: every group, its member count, and whether the
// user is a member.
func (c *conn) groups(req Request) {
	ctx, cancel := c.s.storeCtx()
	defer cancel()
	var all, mine []store.Group
	err := c.s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if all, err = tx.ListGroups(); err != nil {
			return err
		}
		mine, err = tx.UserGroups(c.sess.userID)
		return err
	})
	if err != nil {
		c.unavailable(req.ID, err)
		return
	}
	member := map[int64]bool{}
	for _, g := range mine {
		member[g.ID] = true
	}
	r := groupsV2{MessageType: TypeGroups, Groups: make([]GroupInfo, 0, len(all)), ID: req.ID}
	size := 0
	for _, g := range all {
		size += len(g.Name) + 50
		if size > maxReplyBytes {
			r.Truncated = true
			break
		}
		r.Groups = append(r.Groups, GroupInfo{Group: g.Name, Members: g.Members, Member: member[g.ID]})
	}
	c.sendLine(encode(r))
}

// history serves HISTORY: the last messages between the user and another
// user, or of a group the user is a member of (oldest first).
func (c *conn) history(req Request) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit > MaxHistory:
		limit = MaxHistory
	}
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	var msgs []store.Message
	var refusal *Error
	err := s.st.Update(ctx, func(tx store.Tx) error {
		refusal = nil
		id, e, err := s.lookup(tx, req.To)
		if err != nil || e != nil {
			refusal = e
			return err
		}
		conv := store.Conversation{UserA: c.sess.userID, UserB: id}
		if req.To.Group {
			conv = store.Conversation{GroupID: id}
			mine, err := tx.UserGroups(c.sess.userID)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(mine, func(g store.Group) bool { return g.ID == id }) {
				refusal = errorf(CodeNotMember, "not a member of %s: join it to read its history", req.To.Name)
				return nil
			}
		}
		msgs, err = tx.History(conv, limit)
		return err
	})
	switch {
	case err != nil:
		c.unavailable(req.ID, err)
		return
	case refusal != nil:
		refusal.ID = req.ID
		c.reply(refusal)
		return
	}
	r := historyV2{MessageType: TypeHistory, Messages: make([]ChatV2, 0, len(msgs)), ID: req.ID}
	if req.To.Group {
		r.ToGroup = req.To.Name
	} else {
		r.ToUsername = req.To.Name
	}
	// Newest first within the size bound, then back to oldest first.
	size := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := chatV2Of(msgs[i])
		size += len(encode(m))
		if size > maxReplyBytes {
			r.Truncated = true
			break
		}
		r.Messages = append(r.Messages, m)
	}
	slices.Reverse(r.Messages)
	c.sendLine(encode(r))
}

// chatV2Of is a stored message in protocol 2's shape.
func chatV2Of(m store.Message) ChatV2 {
	return ChatV2{MessageType: TypeChat, ID: m.ID, Seq: m.Seq, FromName: m.Sender, ToUsername: m.ToUser, ToGroup: m.ToGroup,
		MessageContent: m.Content, SentAt: formatSentAt(m.SentAt), Time: formatTime(m.SentAt)}
}

// reconcileLoop keeps this node's presence rows and sessions in step: rows
// without a session (a failed clear) are removed; sessions whose row is
// gone (the coordinator spliced this node out while it was stalled) get it
// back, or are closed if the user has logged in elsewhere meanwhile. It runs
// every ReconcileInterval, and after a failure (a presence row of ours may
// be stale, and would keep its user from logging in elsewhere) soon, then
// less and less often until it succeeds.
func (s *Server) reconcileLoop(ctx context.Context) {
	first := min(s.cfg.ReconcileInterval, 250*time.Millisecond)
	backoff := first
	due := time.Now().Add(s.cfg.ReconcileInterval)
	t := time.NewTimer(time.Until(due))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.retry:
			if time.Until(due) > backoff { // not later than that
				due = time.Now().Add(backoff)
				t.Reset(backoff)
			}
			continue
		case <-t.C:
		}
		s.mu.Lock()
		needed := s.dirty || len(s.sessions) > 0
		s.dirty = false
		s.mu.Unlock()
		if needed {
			s.reconcile(ctx)
		}
		s.mu.Lock()
		dirty := s.dirty
		s.mu.Unlock()
		select {
		case <-s.retry: // this round's own failure
		default:
		}
		next := s.cfg.ReconcileInterval
		if dirty {
			next, backoff = backoff, min(2*backoff, s.cfg.ReconcileInterval)
		} else {
			backoff = first
		}
		due = time.Now().Add(next)
		t.Reset(next)
	}
}

// CheckPresence asks for a presence check soon: the node has (re)joined
// the ring, and if it was spliced out meanwhile (stalled), the coordinator
// removed its presence rows, so that its users get nothing until they are
// restored. Safe to call from any goroutine; it does not block.
func (s *Server) CheckPresence() {
	s.mu.Lock()
	s.markDirtyLocked()
	s.mu.Unlock()
}

// markDirtyLocked notes that a presence row of ours may be stale, and wakes
// the presence check. Called with s.mu held.
func (s *Server) markDirtyLocked() {
	s.dirty = true
	select {
	case s.retry <- struct{}{}:
	default:
	}
}

func (s *Server) reconcile(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	online, err := s.st.Online(rctx)
	if err != nil {
		s.mu.Lock()
		s.markDirtyLocked()
		s.mu.Unlock()
		return
	}
	self := s.cfg.NodeID
	here := map[int64]bool{}
	elsewhere := map[int64]int64{}
	for _, p := range online {
		if p.NodeID == self {
			here[p.UserID] = true
		} else {
			elsewhere[p.UserID] = p.NodeID
		}
	}
	var lost []*session
	var stale []int64
	s.mu.Lock()
	for id, sess := range s.sessions {
		if sess.ready && !here[id] {
			lost = append(lost, sess)
		}
	}
	for id := range here {
		if s.sessions[id] == nil {
			// Hold the name while clearing, so a login waits for it.
			s.sessions[id] = &session{userID: id, closing: true, gone: make(chan struct{})}
			stale = append(stale, id)
		}
	}
	s.mu.Unlock()
	for _, id := range stale {
		err := s.st.Update(rctx, func(tx store.Tx) error {
			_, err := tx.ClearPresence(id, self)
			return err
		})
		s.mu.Lock()
		ph := s.sessions[id]
		delete(s.sessions, id)
		if err != nil {
			s.markDirtyLocked()
		}
		s.mu.Unlock()
		close(ph.gone)
		if err == nil {
			s.stats.presenceCleared.Add(1)
		}
	}
	for _, sess := range lost {
		err := s.st.Update(rctx, func(tx store.Tx) error { return tx.SetPresence(sess.userID, self) })
		switch {
		case errors.Is(err, store.ErrUserOnline):
			s.log.Info().Str("user", sess.name).Int64("at", elsewhere[sess.userID]).Msg("chat: user logged in elsewhere while this node was out of the ring")
			sess.c.closeWith(errorf(CodeUserOnline, "logged in at another node while this node was out of the ring"))
		case err != nil:
			s.mu.Lock()
			s.markDirtyLocked()
			s.mu.Unlock()
		default:
			s.log.Info().Str("user", sess.name).Msg("chat: restored presence lost while this node was out of the ring")
			s.requestFetch()
		}
	}
}
