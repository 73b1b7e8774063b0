package chat

// runs on: the connections' reader goroutines (each request is served on
// its connection's reader), and the presence check's goroutine
// (reconcileLoop and what it calls). Shared state is the server's, under
// s.mu; the queue's is reached through its methods only.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/queue"
	"github.com/ringchat/ringchat/internal/store"
)

// handleLine decodes and serves one line (reader goroutine).
func (c *conn) handleLine(line []byte) {
	req, derr := Decode(line)
	if derr != nil {
		c.refuseLine(req, derr)
		return
	}
	if c.version < protocol.V2 && (req.Type != protocol.TypeLogin || req.Version < protocol.V2) && (req.Type != protocol.TypeRegister || c.sess != nil) {
		req.ID = "" // protocol 1 has no ids; ours are made here
	}
	if c.serveAnonymous(req) {
		return
	}
	if c.sess == nil {
		c.reply(&Error{Code: protocol.CodeNotLoggedIn, Message: "log in first: send LOGIN with your username", ID: req.ID})
		return
	}
	c.serveSession(req)
}

// refuseLine answers a line Decode refused: a protocol-2 LOGIN or a
// REGISTER before login is answered in protocol 2, anything else in the
// connection's protocol.
func (c *conn) refuseLine(req Request, derr *Error) {
	if ((req.Type == protocol.TypeLogin && req.Version >= protocol.V2) || req.Type == protocol.TypeRegister) && c.sess == nil {
		c.sendLine(encodeError(protocol.V2, derr))
		return
	}
	c.reply(derr)
}

// serveAnonymous serves the requests that need no session (ALIVE, LOGIN,
// and REGISTER before login or in protocol 2), and reports whether req was
// one of them.
func (c *conn) serveAnonymous(req Request) bool {
	switch req.Type {
	case protocol.TypeAlive:
		if c.version >= protocol.V2 && req.ID != "" {
			c.sendLine(encode(protocol.AliveV2{MessageType: protocol.TypeAlive, ID: req.ID})) // a client checking that the node answers
		}
		return true
	case protocol.TypeLogin:
		c.login(req)
		return true
	case protocol.TypeRegister:
		if c.sess == nil || c.version >= protocol.V2 {
			c.register(req)
			return true
		}
	}
	return false
}

// serveSession serves a request of a logged-in session: the protocol-1
// requests in any protocol, the rest in protocol 2 only.
func (c *conn) serveSession(req Request) {
	switch req.Type {
	case protocol.TypeJoinGroup, protocol.TypeLeaveGroup:
		c.group(req)
	case protocol.TypeChatMessage:
		c.chat(req)
	default:
		if c.version < protocol.V2 {
			c.reply(errorf(protocol.CodeUnknownType, "unknown messageType %s", quote(string(req.Type))))
			return
		}
		c.serveV2(req)
	}
}

// serveV2 serves a request that exists only in protocol 2.
func (c *conn) serveV2(req Request) {
	switch req.Type {
	case protocol.TypeAck:
		c.ack(req)
	case protocol.TypeAckUpTo:
		c.ackUpTo(req)
	case protocol.TypeWho:
		c.who(req)
	case protocol.TypeGroups:
		c.groups(req)
	case protocol.TypeHistory:
		c.history(req)
	case protocol.TypeSetPassword:
		c.setPassword(req)
	case protocol.TypeInvite:
		c.invite(req)
	case protocol.TypeRegister:
		c.register(req)
	case protocol.TypeAway:
		c.away(req)
	case protocol.TypeWhois:
		c.whois(req)
	case protocol.TypeNames:
		c.names(req)
	case protocol.TypeRead:
		c.read(req)
	case protocol.TypeTyping:
		c.typing(req)
	}
}

func (c *conn) unavailable(id string, err error) {
	c.s.log.Warn().Err(err).Str("remote", c.remote).Msg("chat: store error serving a client")
	c.reply(&Error{Code: protocol.CodeUnavailable, Message: "the store is unavailable; try again", ID: id})
}

// login serves LOGIN under the node's login policy (authenticate); a
// user is logged in on one connection of the whole ring at a time (a
// second login is refused with USER_ONLINE).
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
		fail(errorf(protocol.CodeLoggedIn, "already logged in as %s on this connection", quote(c.sess.name)))
		return
	}
	s := c.s
	if e := s.loginRefusal(); e != nil {
		fail(e) // at once: the store calls of a login would only time out
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	u, e := s.authenticate(ctx, c.remote, req)
	if e != nil {
		fail(e)
		return
	}
	sess, e := s.reserve(ctx, c, u, version)
	if e != nil {
		fail(e)
		return
	}
	if version >= protocol.V2 {
		sess.features = featuresOf(req.Features) // before ready: visits read it after
	}
	if e := s.claimPresence(ctx, u, leaving(req)); e != nil {
		s.unreserve(sess)
		fail(e)
		return
	}
	c.sess, c.version = sess, version
	c.sessPtr.Store(sess)
	if version >= protocol.V2 {
		features, nodes, maxMessage := s.granted(sess.features)
		c.sendLine(encode(protocol.LoginV2{MessageType: protocol.TypeLogin, Username: u.Name, Version: protocol.V2, Node: s.cfg.NodeID,
			Away: u.Away.Message, Features: features, Nodes: nodes, MaxMessageBytes: maxMessage, ID: req.ID}))
	} else {
		c.sendLine(encode(protocol.LoginV1{MessageType: protocol.TypeLogin, Username: u.Name}))
	}
	s.makeReady(c, sess) // after the echo: deliveries follow it
	s.q.LoggedIn(sess.userID)
	s.log.Debug().Str("user", u.Name).Int("version", version).Str("remote", c.remote).Msg("chat: logged in")
}

func (s *Server) unavailableErr(what string, err error) *Error {
	s.log.Warn().Err(err).Msg("chat: store error " + what)
	return errorf(protocol.CodeUnavailable, "the store is unavailable; try again")
}

// authenticate applies the login policy to req and returns the user. In
// AuthOpen a new name is created here (claimed with the password if one is
// given), a name without a password logs in without one, and a name with a
// password needs it; a password for an existing name without one is
// refused (the name was used before: only a session of that name or the
// operator may set its password). AuthPassword requires protocol 2 and the
// password of an existing account. A refused login writes nothing to the
// store but the account's count of attempts (checkAccount); failures
// count towards the throttle of the account and of the address.
func (s *Server) authenticate(ctx context.Context, remote string, req Request) (store.User, *Error) {
	name := req.Username
	akey := addressKey(remote)
	if d := s.guard.wait(time.Now(), akey); d > 0 {
		return store.User{}, throttled(name, d)
	}
	withPassword := req.Version >= protocol.V2 && req.Password != ""
	if s.cfg.Auth == AuthPassword && !withPassword {
		return store.User{}, errorf(protocol.CodePasswordNeeded,
			"this node requires a password for every login: log in with protocol version 2 and your password (REGISTER creates an account)")
	}
	var u store.User
	found := true
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		u, err = tx.UserByName(name)
		if errors.Is(err, store.ErrNotFound) {
			found = false
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return u, s.unavailableErr("at login", err)
	case !found && s.cfg.Auth == AuthPassword:
		s.guard.fail(time.Now(), akey, s.cfg.Throttle.AddressFree)
		return u, errorf(protocol.CodeNoAccount, "no account %s: send REGISTER with a username and a password first", quote(name))
	case !found:
		return s.createOnLogin(ctx, name, req)
	case u.PasswordHash != "":
		if !withPassword {
			return u, errorf(protocol.CodePasswordNeeded, "user %s is protected by a password: log in with protocol version 2 and the password", quote(u.Name))
		}
		if e := s.checkAccount(ctx, u, req.Password); e != nil {
			if e.Code == protocol.CodeBadPassword {
				s.guard.fail(time.Now(), akey, s.cfg.Throttle.AddressFree)
				s.log.Info().Str("user", name).Str("remote", remote).Msg("chat: wrong password")
			}
			return u, e
		}
		return u, nil
	case s.cfg.Auth == AuthPassword:
		return u, errorf(protocol.CodePasswordNotSet, "user %s has no password yet: ask the operator to set one (ringnode user passwd)", quote(u.Name))
	case withPassword:
		return u, errorf(protocol.CodePasswordNotSet,
			"user %s has been used without a password, so a password cannot claim it: log in as %s without one and send SET_PASSWORD, or ask the operator to set one (ringnode user passwd)",
			quote(u.Name), quote(u.Name))
	}
	return u, nil // an open name
}

// createOnLogin makes the user of a first login (AuthOpen), with the
// password's hash if one is given.
func (s *Server) createOnLogin(ctx context.Context, name string, req Request) (store.User, *Error) {
	var hash string
	if req.Version >= protocol.V2 && req.Password != "" {
		var e *Error
		if hash, e = s.hash(ctx, req.Password); e != nil {
			return store.User{}, e
		}
	}
	var u store.User
	var created bool
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		u, created, err = tx.CreateUser(name, hash)
		return err
	})
	switch {
	case err != nil:
		return u, s.unavailableErr("creating a user", err)
	case created && hash != "":
		s.log.Info().Str("user", name).Msg("chat: name claimed with a password at its first login")
	case created:
	case hash != "" || u.PasswordHash != "": // another login made the name first
		return u, errorf(protocol.CodeNameTaken, "user %s has just been created by another login; log in again", quote(name))
	}
	return u, nil
}

func throttled(name string, d time.Duration) *Error {
	return errorf(protocol.CodeThrottled, "too many failed logins for %s or from your address: try again in %v",
		quote(name), ceilSecond(d))
}

// ceilSecond rounds d up to whole seconds.
func ceilSecond(d time.Duration) time.Duration { return (d + time.Second - 1).Truncate(time.Second) }

// register serves REGISTER: a new account with a password (any auth
// mode). It does not log in. Every attempt counts towards the address's
// throttle, so that one address cannot make accounts in bulk.
func (c *conn) register(req Request) {
	s := c.s
	fail := func(e *Error) {
		e.ID = req.ID
		c.sendLine(encodeError(protocol.V2, e))
	}
	akey := addressKey(c.remote)
	now := time.Now()
	if d := s.guard.wait(now, akey); d > 0 {
		fail(errorf(protocol.CodeThrottled, "too many attempts from your address: try again in %v", ceilSecond(d)))
		return
	}
	s.guard.fail(now, akey, s.cfg.Throttle.AddressFree)
	ctx, cancel := s.storeCtx()
	defer cancel()
	taken := errorf(protocol.CodeNameTaken, "the name %s is taken: choose another", quote(req.Username))
	var exists bool
	err := s.st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.UserByName(req.Username)
		exists = err == nil
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		fail(s.unavailableErr("at REGISTER", err))
		return
	case exists:
		fail(taken)
		return
	}
	hash, e := s.hash(ctx, req.Password)
	if e != nil {
		fail(e)
		return
	}
	var created bool
	err = s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		_, created, err = tx.CreateUser(req.Username, hash)
		return err
	})
	switch {
	case err != nil:
		fail(s.unavailableErr("at REGISTER", err))
	case !created:
		fail(taken)
	default:
		s.log.Info().Str("user", req.Username).Str("remote", c.remote).Msg("chat: account registered")
		c.sendLine(encode(protocol.AccountV2{MessageType: protocol.TypeRegister, Username: req.Username, ID: req.ID}))
	}
}

// setPassword serves SET_PASSWORD: the logged-in user sets or replaces
// their password.
func (c *conn) setPassword(req Request) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	hash, e := s.hash(ctx, req.Password)
	if e != nil {
		e.ID = req.ID
		c.reply(e)
		return
	}
	err := s.st.Update(ctx, func(tx store.Tx) error { return tx.SetPassword(c.sess.userID, hash) })
	if err != nil {
		c.unavailable(req.ID, err)
		return
	}
	s.log.Info().Str("user", c.sess.name).Msg("chat: password set by the user")
	c.sendLine(encode(protocol.AccountV2{MessageType: protocol.TypeSetPassword, Username: c.sess.name, ID: req.ID}))
}

// reserve makes c the user's only session at this node, waiting (within
// ctx) for a session of the user that is logging out.
func (s *Server) reserve(ctx context.Context, c *conn, u store.User, version int) (*session, *Error) {
	for {
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return nil, errorf(protocol.CodeShutdown, "server shutting down")
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
			return nil, errorf(protocol.CodeUserOnline, "user %s is already logged in (at node %d)", quote(u.Name), s.cfg.NodeID)
		}
		gone := old.gone
		s.mu.Unlock()
		select {
		case <-gone:
		case <-ctx.Done():
			return nil, errorf(protocol.CodeUserOnline, "user %s is still logging out at node %d; try again", quote(u.Name), s.cfg.NodeID)
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
// replaced; one held by a live node refuses the login. A presence that
// goes away while it is looked at (its session just logged out) lets the
// login try again, a few times.
//
// from is the node the client says it has left (0: none): a presence
// there is replaced even though that node is in the ring, as a node cut
// off from the store cannot clear it (see leaving).
func (s *Server) claimPresence(ctx context.Context, u store.User, from int64) *Error {
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
	for attempt := 1; ; attempt++ {
		err := s.st.Update(ctx, login)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrUserOnline) {
			return s.unavailableErr("recording presence", err)
		}
		var p store.Presence
		err = s.st.View(ctx, func(tx store.Tx) error {
			var err error
			p, err = tx.PresenceOf(u.ID)
			return err
		})
		if errors.Is(err, store.ErrNotFound) && attempt < presenceTries {
			continue // logged out in between: the row is free now
		}
		if err != nil {
			return s.unavailableErr("reading presence", err)
		}
		return s.replaceStale(ctx, u, p, login, from)
	}
}

// presenceSilentAfter is how long a node of the ring may go without
// reporting its health to the store (it reports every 2 s, node.healthEvery)
// before a login elsewhere replaces a presence it holds: it cannot reach the
// store (or is stopped), so a session there can neither store nor receive
// anything, and it cannot clear the row of a client that left it (a client
// that moved on its own, not told of the trouble, names no node it left).
// If the node comes back with the session still open, its presence check
// finds the user logged in elsewhere and closes that session
// (restoreLost).
const presenceSilentAfter = 5 * time.Second

// presenceTries bounds claimPresence's attempts when the presence it
// found keeps vanishing before it is read.
const presenceTries = 3

// replaceStale replaces presence p if its node is no longer in the ring.
// A presence at from, the node the client has left, is replaced too, and
// so is one at a node that has not reported to the store for
// presenceSilentAfter.
func (s *Server) replaceStale(ctx context.Context, u store.User, p store.Presence, login func(store.Tx) error, from int64) *Error {
	nodes, err := s.st.Nodes(ctx)
	if err != nil {
		return s.unavailableErr("reading the ring's nodes", err)
	}
	i := slices.IndexFunc(nodes, func(n store.NodeRow) bool { return n.ID == p.NodeID && n.InRing() })
	live := i >= 0
	switch {
	case live && from != 0 && from == p.NodeID && from != s.cfg.NodeID:
		s.log.Info().Str("user", u.Name).Int64("left_node", from).Msg("chat: the client left its node (it stopped answering or cannot serve): its presence there is replaced")
		live = false
	case live && p.NodeID != s.cfg.NodeID && nodes[i].HealthAge > presenceSilentAfter:
		s.log.Info().Str("user", u.Name).Int64("silent_node", p.NodeID).Int64("silent_for_ms", nodes[i].HealthAge.Milliseconds()).
			Msg("chat: the user's node has not reached the store for a while (cut off, or stopped): its presence there is replaced")
		live = false
	}
	if live {
		return errorf(protocol.CodeUserOnline, "user %s is already logged in at node %d", quote(u.Name), p.NodeID)
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.ClearPresence(u.ID, p.NodeID); err != nil {
			return err
		}
		return login(tx)
	})
	switch {
	case errors.Is(err, store.ErrUserOnline): // someone else was quicker
		return errorf(protocol.CodeUserOnline, "user %s has just logged in elsewhere", quote(u.Name))
	case err != nil:
		return s.unavailableErr("replacing a stale presence", err)
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

// group serves JOIN_GROUP (the group is created on first join, invite-only
// if asked for; joining twice is harmless; an invite-only group needs an
// invitation) and LEAVE_GROUP.
func (c *conn) group(req Request) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	uid := c.sess.userID
	var refusal *Error
	var g store.Group
	err := s.st.Update(ctx, func(tx store.Tx) error {
		refusal = nil
		if req.Type == protocol.TypeJoinGroup {
			inviteOnly := req.InviteOnly && c.version >= protocol.V2
			var created bool
			var err error
			g, created, err = tx.CreateGroup(req.Group, inviteOnly, uid)
			if err != nil {
				return err
			}
			s.names.put(Recipient{Name: g.Name, Group: true}, g.ID)
			if !created {
				if refusal, err = s.mayJoin(tx, g, uid, inviteOnly); err != nil || refusal != nil {
					return err
				}
			}
			_, err = tx.JoinGroup(g.ID, uid)
			return err
		}
		var err error
		g, err = tx.GroupByName(req.Group)
		if errors.Is(err, store.ErrNotFound) {
			refusal = &Error{Code: protocol.CodeUnknownGroup, Message: fmt.Sprintf("no group %s", quote(req.Group))}
			return nil
		}
		if err != nil {
			return err
		}
		left, err := tx.LeaveGroup(g.ID, uid)
		if !left {
			refusal = &Error{Code: protocol.CodeNotMember, Message: fmt.Sprintf("not a member of %s", req.Group)}
		}
		return err
	})
	switch {
	case c.failed(req.ID, err, refusal):
	case c.version >= protocol.V2:
		c.sendLine(encode(protocol.GroupV2{MessageType: req.Type, Group: req.Group,
			InviteOnly: g.InviteOnly && req.Type == protocol.TypeJoinGroup, ID: req.ID}))
	default:
		c.sendLine(encode(protocol.GroupV1{MessageType: req.Type, Group: req.Group}))
	}
}

// failed answers request id with the store's failure or the refusal, if
// there is one, and reports whether it did.
func (c *conn) failed(id string, err error, refusal *Error) bool {
	switch {
	case err != nil:
		c.unavailable(id, err)
	case refusal != nil:
		refusal.ID = id
		c.reply(refusal)
	default:
		return false
	}
	return true
}

// mayJoin checks a join of an existing group: an invite-only group takes
// its members (again) and invited users only; asking for a new invite-only
// group under the name of an open one is refused.
func (s *Server) mayJoin(tx store.Tx, g store.Group, uid int64, inviteOnly bool) (*Error, error) {
	if inviteOnly && !g.InviteOnly {
		return errorf(protocol.CodeBadRequest, "group %s already exists and is open to everyone: choose another name for an invite-only group", quote(g.Name)), nil
	}
	if !g.InviteOnly {
		return nil, nil
	}
	member, err := tx.IsMember(g.ID, uid)
	if err != nil || member {
		return nil, err
	}
	invited, err := tx.Invited(g.ID, uid)
	if err != nil || invited {
		return nil, err
	}
	return errorf(protocol.CodeNotInvited, "group %s is invite-only: a member must invite you first", quote(g.Name)), nil
}

// invite serves INVITE: a member of an invite-only group lets a user join.
func (c *conn) invite(req Request) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	var refusal *Error
	err := s.st.Update(ctx, func(tx store.Tx) error {
		refusal = nil
		g, err := tx.GroupByName(req.Group)
		if errors.Is(err, store.ErrNotFound) {
			refusal = errorf(protocol.CodeUnknownGroup, "no group %s", quote(req.Group))
			return nil
		}
		if err != nil {
			return err
		}
		member, err := tx.IsMember(g.ID, c.sess.userID)
		switch {
		case err != nil:
			return err
		case !member:
			refusal = errorf(protocol.CodeNotMember, "not a member of %s: only its members can invite to it", quote(g.Name))
			return nil
		case !g.InviteOnly:
			refusal = errorf(protocol.CodeBadRequest, "group %s is open: anyone can join it without an invitation", quote(g.Name))
			return nil
		}
		u, err := tx.UserByName(req.Username)
		if errors.Is(err, store.ErrNotFound) {
			refusal = unknown(Recipient{Name: req.Username})
			return nil
		}
		if err != nil {
			return err
		}
		if in, err := tx.IsMember(g.ID, u.ID); err != nil || in {
			return err // a member already: nothing to do
		}
		_, err = tx.Invite(g.ID, u.ID, c.sess.userID)
		return err
	})
	if !c.failed(req.ID, err, refusal) {
		s.log.Info().Str("user", c.sess.name).Str("invited", req.Username).Str("group", req.Group).Msg("chat: invitation")
		c.sendLine(encode(protocol.InviteV2{MessageType: protocol.TypeInvite, Group: req.Group, Username: req.Username, ID: req.ID}))
	}
}

// mayPost refuses a message to an invite-only group from a non-member. A
// group's kind never changes, so open groups are remembered.
func (s *Server) mayPost(tx store.Tx, to Recipient, gid, uid int64) (*Error, error) {
	if s.opens.has(gid) {
		return nil, nil
	}
	g, err := tx.GroupByName(to.Name)
	if err != nil {
		return nil, err
	}
	if !g.InviteOnly {
		s.opens.add(gid)
		return nil, nil
	}
	member, err := tx.IsMember(gid, uid)
	if err != nil || member {
		return nil, err
	}
	return errorf(protocol.CodeNotMember, "group %s is invite-only: only its members can write to it", quote(to.Name)), nil
}

// groupSet is a bounded set of group ids.
type groupSet struct {
	mu sync.Mutex
	m  map[int64]struct{}
}

func (g *groupSet) has(id int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.m[id]
	return ok
}

func (g *groupSet) add(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || len(g.m) >= nameCacheMax {
		g.m = map[int64]struct{}{}
	}
	g.m[id] = struct{}{}
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
	if gid, ok := s.names.get(req.To); !ok || (req.To.Group && !s.opens.has(gid)) {
		err := s.st.View(ctx, func(tx store.Tx) error {
			var err error
			gid, refusal, err = s.lookup(tx, req.To)
			if err != nil || refusal != nil || !req.To.Group {
				return err
			}
			refusal, err = s.mayPost(tx, req.To, gid, c.sess.userID)
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
	m := &queue.Message{ID: id, SenderID: c.sess.userID, To: queue.Recipient{Name: req.To.Name, Group: req.To.Group}, Content: req.Content,
		SentAt: time.Now(), Version: c.version, From: c.sess}
	switch err := s.q.Submit(m); {
	case errors.Is(err, queue.ErrDraining):
		refusal = errorf(protocol.CodeShutdown, "server shutting down: message not accepted; send it again at another node")
	case errors.Is(err, queue.ErrFull):
		refusal = errorf(protocol.CodeBusy, "node busy: %d messages waiting to be stored; send again later", s.cfg.OutboxLimit)
	}
	if refusal != nil {
		refusal.ID = req.ID
		c.reply(refusal)
		return
	}
	if !req.To.Group && c.sess.features&featAway != 0 {
		c.tellAway(req.To)
	}
}

// ack queues protocol-2 acknowledgements for the next visit: the rows of
// the session's open deliveries, and the other ids, looked up by id in the
// store (a bounded number per user, the rest dropped: a message
// acknowledged in vain only comes again). If the queue's backlog is full,
// nothing is taken and the deliveries stay open.
func (c *conn) ack(req Request) {
	s := c.s
	sess := c.sess
	open := map[string]openDelivery{}
	var stray []string
	s.mu.Lock()
	for _, id := range req.IDs {
		if d, ok := sess.unacked[id]; ok {
			delete(sess.unacked, id)
			open[id] = d
			continue
		}
		stray = append(stray, id)
	}
	s.mu.Unlock()
	c.queueAcks(req.ID, open, stray)
}

// queueAcks hands the queue the rows of open (deliveries taken from the
// session) and the stray ids for the next visit, and reports whether it
// took them. If its backlog is full, the deliveries are open again and the
// client is told BUSY.
func (c *conn) queueAcks(reqID string, open map[string]openDelivery, stray []string) bool {
	s, sess := c.s, c.sess
	rows := make([]store.RecipientSeq, 0, len(open))
	for _, d := range open {
		rows = append(rows, d.row)
	}
	if s.q.Ack(sess.userID, rows, stray) {
		return true
	}
	s.mu.Lock()
	for id, d := range open {
		if _, ok := sess.unacked[id]; !ok {
			sess.unacked[id] = d
		}
	}
	s.mu.Unlock()
	c.reply(&Error{Code: protocol.CodeBusy, Message: "node busy: too many acknowledgements waiting; send them again later", ID: reqID})
	return false
}

// ackUpTo serves ACK_UPTO (FeatureCumulativeAck): the deliveries handed to
// this session with a sequence up to req.Seq are acknowledged, as ACK
// acknowledges them by id, and nothing else (takeUpTo). A session without
// the feature, a sequence below 1 or past the highest handed to the
// session is refused, and nothing is acknowledged.
func (c *conn) ackUpTo(req Request) {
	s, sess := c.s, c.sess
	switch {
	case sess.features&featCumulativeAck == 0:
		c.reply(&Error{Code: protocol.CodeUnknownType, ID: req.ID,
			Message: fmt.Sprintf("%s needs the feature %q at LOGIN (\"features\"); acknowledge with ACK and ids", protocol.TypeAckUpTo, protocol.FeatureCumulativeAck)})
		return
	case req.Seq <= 0:
		c.reply(&Error{Code: protocol.CodeBadRequest, ID: req.ID,
			Message: fmt.Sprintf("%s needs \"seq\": the sequence of the newest message received, at least 1", protocol.TypeAckUpTo)})
		return
	}
	s.mu.Lock()
	highest := sess.handedMax
	var open map[string]openDelivery
	if req.Seq <= highest && req.Seq > sess.ackedUpTo {
		open = takeUpTo(sess.unacked, req.Seq)
	}
	s.mu.Unlock()
	if req.Seq > highest {
		c.reply(&Error{Code: protocol.CodeBadRequest, ID: req.ID,
			Message: fmt.Sprintf("seq %d is past the newest message delivered on this connection (%d): nothing acknowledged", req.Seq, highest)})
		return
	}
	if len(open) > 0 && !c.queueAcks(req.ID, open, nil) {
		return // open again: a later ACK_UPTO, at or below this one, takes them
	}
	s.mu.Lock()
	sess.ackedUpTo = max(sess.ackedUpTo, req.Seq)
	s.mu.Unlock()
}

// takeUpTo removes from unacked, and returns, the deliveries that an
// ACK_UPTO n acknowledges: a sequence at most n, handed before any
// delivery with a sequence of n or more (see openDelivery). A delivery
// handed after a higher one waits for an ACK_UPTO that covers that one.
func takeUpTo(unacked map[string]openDelivery, n int64) map[string]openDelivery {
	taken := map[string]openDelivery{}
	for id, d := range unacked {
		if d.row.Seq <= n && d.after < n {
			taken[id] = d
			delete(unacked, id)
		}
	}
	return taken
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
	r := protocol.WhoV2{MessageType: protocol.TypeWho, Users: make([]protocol.OnlineUser, 0, len(online)), ID: req.ID}
	size := 0
	for _, p := range online {
		size += len(p.UserName) + 40
		if size > maxReplyBytes {
			r.Truncated = true
			break
		}
		r.Users = append(r.Users, protocol.OnlineUser{Username: p.UserName, Node: p.NodeID, Away: p.Away.Message})
	}
	c.sendLine(encode(r))
}

// groupsPage is GROUPS' page size when the request names none, and
// maxGroupsPage the largest it may name.
const (
	groupsPage    = 200
	maxGroupsPage = store.MaxGroupsPage
)

// groups serves GROUPS: one page of groups (by name, after req.After),
// their member counts, and whether the user is a member; Next names the
// next page. A read-only transaction: it never waits for the token.
func (c *conn) groups(req Request) {
	ctx, cancel := c.s.storeCtx()
	defer cancel()
	limit := req.Limit
	switch {
	case limit == 0:
		limit = groupsPage
	case limit > maxGroupsPage:
		limit = maxGroupsPage
	}
	var all, mine, invites []store.Group
	err := c.s.st.View(ctx, func(tx store.Tx) error {
		var err error
		if all, err = tx.ListGroups(req.After, limit+1); err != nil {
			return err
		}
		if mine, err = tx.UserGroups(c.sess.userID); err != nil {
			return err
		}
		invites, err = tx.UserInvites(c.sess.userID)
		return err
	})
	if err != nil {
		c.unavailable(req.ID, err)
		return
	}
	member, invited := map[int64]bool{}, map[int64]bool{}
	for _, g := range mine {
		member[g.ID] = true
	}
	for _, g := range invites {
		invited[g.ID] = true
	}
	r := protocol.GroupsV2{MessageType: protocol.TypeGroups, Groups: make([]protocol.GroupInfo, 0, len(all)), ID: req.ID}
	size := 0
	for i, g := range all {
		if i == limit {
			r.Truncated, r.Next = true, all[i-1].Name
			break
		}
		if g.InviteOnly && !member[g.ID] && !invited[g.ID] {
			continue // private: shown to its members and invited users only
		}
		size += len(g.Name) + 80
		if size > maxReplyBytes {
			r.Truncated = true
			if i > 0 {
				r.Next = all[i-1].Name
			}
			break
		}
		r.Groups = append(r.Groups, protocol.GroupInfo{Group: g.Name, Members: g.Members, Member: member[g.ID],
			InviteOnly: g.InviteOnly, Invited: invited[g.ID] && !member[g.ID]})
	}
	c.sendLine(encode(r))
}

// history serves HISTORY: the last messages between the user and another
// user, or of a group the user is a member of since they joined it (oldest
// first).
func (c *conn) history(req Request) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit > protocol.MaxHistory:
		limit = protocol.MaxHistory
	}
	msgs, readSeq, refusal, err := c.readHistory(req, limit)
	if c.failed(req.ID, err, refusal) {
		return
	}
	c.sendLine(encode(historyReply(req, msgs, readSeq)))
}

// readHistory reads up to limit messages of the conversation req names,
// and for a direct one how far the other user has read this one's
// messages; refusal: the recipient is unknown, or the user is not a member
// of the group.
func (c *conn) readHistory(req Request, limit int) (msgs []store.Message, readSeq int64, refusal *Error, err error) {
	s := c.s
	ctx, cancel := s.storeCtx()
	defer cancel()
	err = s.st.View(ctx, func(tx store.Tx) error {
		refusal = nil
		id, e, err := s.lookup(tx, req.To)
		if err != nil || e != nil {
			refusal = e
			return err
		}
		conv := store.Conversation{UserA: c.sess.userID, UserB: id, Before: req.Before}
		if req.To.Group {
			// A member reads what was sent since they joined.
			conv = store.Conversation{GroupID: id, Member: c.sess.userID, Before: req.Before}
			member, err := tx.IsMember(id, c.sess.userID)
			if err != nil {
				return err
			}
			if !member {
				refusal = errorf(protocol.CodeNotMember, "not a member of %s: join it to read its history", req.To.Name)
				return nil
			}
		}
		if msgs, err = tx.History(conv, limit); err != nil || req.To.Group {
			return err
		}
		// How far the other user has read this one's messages (✓✓).
		readSeq, err = tx.ReadMark(id, c.sess.userID)
		return err
	})
	return msgs, readSeq, refusal, err
}

// historyReply is the HISTORY reply of msgs (oldest first): the newest
// that fit in a reply line.
func historyReply(req Request, msgs []store.Message, readSeq int64) protocol.HistoryV2 {
	r := protocol.HistoryV2{MessageType: protocol.TypeHistory, Messages: make([]protocol.ChatV2, 0, len(msgs)), ReadSeq: readSeq, ID: req.ID}
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
	return r
}

// chatV2Of is a stored message in protocol 2's shape.
func chatV2Of(m store.Message) protocol.ChatV2 {
	return protocol.ChatV2{MessageType: protocol.TypeChatMessage, ID: m.ID, Seq: m.Seq, FromName: m.Sender, ToUsername: m.ToUser, ToGroup: m.ToGroup,
		MessageContent: m.Content, SentAt: formatSentAt(m.SentAt), Time: formatTime(m.SentAt)}
}

// reconcileLoop keeps this node's presence rows and sessions in step: rows
// without a session (a failed clear) are removed; sessions whose row is
// gone (the coordinator spliced this node out while it was stalled) get it
// back, or are closed if the user has logged in elsewhere meanwhile. It runs
// every ReconcileInterval, soon after the node (re)joined the ring
// (Config.Joined), and after a failure (a presence row of ours may be
// stale, and would keep its user from logging in elsewhere) soon, then
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
		case <-s.cfg.Joined: // nil unless set, then never ready
			s.mu.Lock()
			s.markDirtyLocked() // wakes this loop again through retry, below
			s.mu.Unlock()
			continue
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

// markDirtyLocked notes that a presence row of ours may be stale, and wakes
// the presence check. Called with s.mu held.
func (s *Server) markDirtyLocked() {
	s.dirty = true
	select {
	case s.retry <- struct{}{}:
	default:
	}
}

// reconcile checks this node's presence rows against its sessions once:
// rows without a session are cleared, sessions whose row is gone get it
// back (or are closed if the user logged in elsewhere meanwhile). A failure
// marks presence dirty, so that the check comes again soon.
func (s *Server) reconcile(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	s.mu.Lock()
	before := s.readySeq // sessions made ready after this may have rows the read misses
	s.mu.Unlock()
	online, err := s.st.Online(rctx)
	if err != nil {
		s.mu.Lock()
		s.markDirtyLocked()
		s.mu.Unlock()
		return
	}
	here, elsewhere := splitPresence(online, s.cfg.NodeID)
	lost, stale := s.comparePresence(here, before)
	s.clearStale(rctx, stale)
	s.restoreLost(rctx, lost, elsewhere)
}

// splitPresence splits the presence rows into the users logged in at node
// self, and the node of each user logged in elsewhere.
func splitPresence(online []store.Presence, self int64) (here map[int64]bool, elsewhere map[int64]int64) {
	here = map[int64]bool{}
	elsewhere = map[int64]int64{}
	for _, p := range online {
		if p.NodeID == self {
			here[p.UserID] = true
		} else {
			elsewhere[p.UserID] = p.NodeID
		}
	}
	return here, elsewhere
}

// comparePresence compares the users whose presence rows name this node
// (here, read when readySeq was before) with its sessions: lost, the
// sessions made ready before that read, without a row (one made ready
// since may have set its row after the read); stale, the users with a row
// but no session, whose names it holds (a closing placeholder session)
// until clearStale has cleared their rows.
func (s *Server) comparePresence(here map[int64]bool, before uint64) (lost []*session, stale []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if sess.ready && sess.readyAt <= before && !here[id] {
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
	return lost, stale
}

// makeReady lets visits deliver to sess, a session of c just logged in,
// and numbers it for the presence check (the login then asks the queue
// for its messages).
func (s *Server) makeReady(c *conn, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.ready = true
	s.readySeq++
	sess.readyAt = s.readySeq
	if !s.health.OK() && sess.features&featFailover != 0 {
		c.sendLine(encode(s.health.notice(s.cfg.NodeID))) // it turned bad during the login
	}
}

// clearStale clears this node's presence rows of the users in stale (held
// by comparePresence), one transaction each, and lets their names go.
func (s *Server) clearStale(ctx context.Context, stale []int64) {
	self := s.cfg.NodeID
	for _, id := range stale {
		err := s.st.Update(ctx, func(tx store.Tx) error {
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
}

// restoreLost sets the presence rows of the sessions in lost again; a
// session whose user logged in elsewhere meanwhile (at the node in
// elsewhere) is closed.
func (s *Server) restoreLost(ctx context.Context, lost []*session, elsewhere map[int64]int64) {
	self := s.cfg.NodeID
	for _, sess := range lost {
		err := s.st.Update(ctx, func(tx store.Tx) error { return tx.SetPresence(sess.userID, self) })
		switch {
		case errors.Is(err, store.ErrUserOnline):
			s.log.Info().Str("user", sess.name).Int64("at", elsewhere[sess.userID]).Msg("chat: user logged in elsewhere while this node was out of the ring")
			sess.c.closeWith(errorf(protocol.CodeUserOnline, "logged in at another node while this node was out of the ring"))
		case err != nil:
			s.mu.Lock()
			s.markDirtyLocked()
			s.mu.Unlock()
		default:
			s.log.Info().Str("user", sess.name).Msg("chat: restored presence lost while this node was out of the ring")
			s.q.FetchAll()
		}
	}
}
