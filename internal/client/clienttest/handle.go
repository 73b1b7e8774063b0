package clienttest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ringchat/ringchat/internal/protocol"
)

// version2 reports a LOGIN asking for protocol 2 ("version" 2 or "2").
func version2(m protocol.FromClient) bool {
	v := string(m.Version)
	return v == "2" || v == `"2"`
}

// handle records line and answers it, in one hold of s.mu: a test that
// saw the line (WaitLine) sees what handling it did, and a Mute after it
// cannot reach it.
func (s *Server) handle(c *sconn, line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
	s.notifyLocked()
	var m protocol.FromClient
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		s.fail(c, protocol.CodeBadJSON, "", "malformed JSON: %v", err)
		return
	}
	user := c.user
	switch typ := protocol.Type(m.MessageType); typ {
	case protocol.TypeAlive:
		if c.v2 && m.ID != "" {
			c.send(protocol.AliveV2{MessageType: protocol.TypeAlive, ID: m.ID})
		}
	case "":
		s.fail(c, protocol.CodeUnknownType, m.ID, "missing messageType")
	case protocol.TypeLogin:
		s.loginLocked(c, m)
	case protocol.TypeJoinGroup, protocol.TypeLeaveGroup, protocol.TypeChatMessage, protocol.TypeAck, protocol.TypeAckUpTo, protocol.TypeWho,
		protocol.TypeGroups, protocol.TypeHistory, protocol.TypeAway, protocol.TypeWhois, protocol.TypeNames:
		switch {
		case user == "":
			s.fail(c, protocol.CodeNotLoggedIn, m.ID, "not logged in")
		case typ == protocol.TypeChatMessage:
			s.chatLocked(c, user, m)
		case typ == protocol.TypeJoinGroup || typ == protocol.TypeLeaveGroup:
			if m.Group != SilentName {
				s.groupLocked(c, user, m)
			}
		case !c.v2:
			s.fail(c, protocol.CodeUnknownType, "", "unknown messageType %q", m.MessageType)
		case typ == protocol.TypeAck:
			s.ackLocked(user, m.IDs)
		case typ == protocol.TypeAckUpTo:
			s.ackUpToLocked(c, user, m)
		case typ == protocol.TypeWho:
			s.whoLocked(c, m.ID)
		case typ == protocol.TypeGroups:
			s.groupsLocked(c, user, m.ID)
		case typ == protocol.TypeHistory:
			s.historyLocked(c, user, m)
		default:
			s.statusLocked(c, user, m)
		}
	default:
		s.fail(c, protocol.CodeUnknownType, m.ID, "unknown messageType %q", m.MessageType)
	}
}

// fail sends an ERROR: with code and id to a protocol-2 connection, the
// bare v1 shape otherwise.
func (s *Server) fail(c *sconn, code protocol.Code, id, format string, args ...any) {
	if c.v2 {
		c.send(protocol.ErrorV2{MessageType: protocol.TypeError, Code: code, ErrorMessage: fmt.Sprintf(format, args...), ID: id})
		return
	}
	c.sendError(format, args...)
}

func (s *Server) loginLocked(c *sconn, m protocol.FromClient) {
	name := m.Username
	if name == SilentName {
		return
	}
	if version2(m) {
		c.v2 = true
	}
	switch {
	case name == "":
		s.fail(c, protocol.CodeBadName, m.ID, "LOGIN without username")
		return
	case c.user != "":
		s.fail(c, protocol.CodeLoggedIn, m.ID, "already logged in as %q on this connection", c.user)
		return
	case name == TakenName:
		s.fail(c, protocol.CodeUserOnline, m.ID, "username taken")
		return
	case s.leftLocked(c, name, m):
		// The client left that node (stopped, or it said it cannot
		// serve): its login there is replaced, as the real node does.
	case s.users[name] != nil:
		if c.v2 {
			s.fail(c, protocol.CodeUserOnline, m.ID, "user %q is already logged in at node %d", name, s.users[name].node.id)
		} else {
			c.sendError("username taken")
		}
		return
	}
	if pw, claimed := s.password[name]; claimed {
		switch {
		case !c.v2 || m.Password == "":
			s.fail(c, protocol.CodePasswordNeeded, m.ID, "user %q needs a password", name)
			return
		case m.Password != pw:
			s.fail(c, protocol.CodeBadPassword, m.ID, "wrong password for %q", name)
			return
		}
	} else if c.v2 && m.Password != "" {
		s.password[name] = m.Password
	}
	c.user = name
	s.users[name] = c
	s.known[name] = true
	s.notifyLocked()
	if c.v2 {
		c.send(s.loginEchoLocked(c, name, m))
	} else {
		c.send(protocol.LoginV1{MessageType: protocol.TypeLogin, Username: name})
	}
	for _, st := range s.queue[name] {
		s.deliverLocked(c, st)
	}
	if !c.v2 {
		delete(s.queue, name) // protocol 1: written is delivered
	}
}

func (s *Server) groupLocked(c *sconn, user string, m protocol.FromClient) {
	group, typ := m.Group, protocol.Type(m.MessageType)
	if s.groups[group] == nil {
		if typ == protocol.TypeLeaveGroup {
			s.fail(c, protocol.CodeNotMember, m.ID, "not a member of %s", group)
			return
		}
		s.groups[group] = map[string]bool{}
	}
	member := s.groups[group][user]
	if typ == protocol.TypeJoinGroup {
		s.groups[group][user] = true
	} else {
		delete(s.groups[group], user)
	}
	s.notifyLocked()
	if typ == protocol.TypeLeaveGroup && !member {
		s.fail(c, protocol.CodeNotMember, m.ID, "not a member of %s", group)
		return
	}
	if c.v2 {
		c.send(protocol.GroupV2{MessageType: typ, Group: group, ID: m.ID})
	} else {
		c.send(protocol.GroupV1{MessageType: typ, Group: group})
	}
}

func (s *Server) chatLocked(c *sconn, user string, m protocol.FromClient) {
	toUser, toGroup := m.ToUsername, m.ToGroup
	if toUser == "" && toGroup == "" {
		if string(m.ForGroup) == "true" {
			toGroup = m.ToName
		} else {
			toUser = m.ToName
		}
	}
	if c.v2 {
		s.chatV2Locked(c, user, toUser, toGroup, m)
		return
	}
	now := s.Now()
	st := &stored{from: user, toUser: toUser, toGroup: toGroup, content: m.MessageContent,
		sentAt: now.Format(protocol.TimeLayout), time: now.UTC().Format(protocol.StampLayout)}
	var targets []*sconn
	switch {
	case toGroup != "":
		for _, n := range s.membersLocked(toGroup) {
			if t := s.users[n]; t != nil && n != user {
				targets = append(targets, t)
			}
		}
	case toUser != "":
		if t := s.users[toUser]; t != nil {
			targets = append(targets, t)
		}
	}
	switch {
	case toUser == "" && toGroup == "":
		c.sendError("CHAT_MESSAGE without recipient")
	case toUser != "" && len(targets) == 0:
		c.sendError("user %s is not online", toUser)
	default:
		s.seq++
		st.seq, st.id = s.seq, fmt.Sprintf("v1-%d", s.seq)
		s.history = append(s.history, st)
		s.notifyLocked()
		for _, t := range targets {
			if t.v2 {
				s.queue[t.user] = append(s.queue[t.user], st)
			}
			s.deliverLocked(t, st)
		}
	}
}

func (s *Server) chatV2Locked(c *sconn, user, toUser, toGroup string, m protocol.FromClient) {
	if s.muted[user] {
		return
	}
	id := m.ID
	if id == "" {
		id = fmt.Sprintf("srv-%d", s.seq+1)
	}
	if st := s.stored[id]; st != nil {
		c.send(protocol.StoredV2{MessageType: protocol.TypeStored, ID: id, Seq: st.seq, Time: st.time})
		return
	}
	switch {
	case toUser == "" && toGroup == "":
		s.fail(c, protocol.CodeBadRequest, m.ID, "CHAT_MESSAGE without recipient")
		return
	case m.MessageContent == "":
		s.fail(c, protocol.CodeBadRequest, m.ID, "empty messageContent")
		return
	case toUser != "" && !s.known[toUser]:
		s.fail(c, protocol.CodeUnknownUser, m.ID, "no user %q (a user exists once they have logged in)", toUser)
		return
	case toGroup != "" && s.groups[toGroup] == nil:
		s.fail(c, protocol.CodeUnknownGroup, m.ID, "no group %q (a group exists once someone has joined it)", toGroup)
		return
	}
	now := s.Now()
	s.seq++
	st := &stored{seq: s.seq, id: id, from: user, toUser: toUser, toGroup: toGroup, content: m.MessageContent,
		sentAt: now.Format(protocol.TimeLayout), time: now.UTC().Format(protocol.StampLayout)}
	if toGroup != "" {
		for _, n := range s.membersLocked(toGroup) {
			if n != user {
				st.recipients = append(st.recipients, n)
			}
		}
	} else {
		st.recipients = []string{toUser}
	}
	s.stored[id] = st
	s.history = append(s.history, st)
	s.notifyLocked()
	c.send(protocol.StoredV2{MessageType: protocol.TypeStored, ID: id, Seq: st.seq, Time: st.time})
	for _, r := range st.recipients {
		s.queue[r] = append(s.queue[r], st)
		if t := s.users[r]; t != nil {
			s.deliverLocked(t, st)
		}
	}
}

func (s *Server) membersLocked(group string) []string {
	names := make([]string, 0, len(s.groups[group]))
	for n := range s.groups[group] {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// deliverLocked writes st to c in c's protocol, once per connection.
func (s *Server) deliverLocked(c *sconn, st *stored) {
	if c.sent[st.id] {
		return
	}
	c.sent[st.id] = true
	if c.v2 {
		c.send(st.chatV2())
		return
	}
	c.send(protocol.ChatV1{MessageType: protocol.TypeChatMessage, FromName: st.from, ToUsername: st.toUser, ToGroup: st.toGroup,
		MessageContent: st.content, SentAt: st.sentAt})
}

// ackUpToLocked serves ACK_UPTO: the messages sent on c with a sequence
// up to m.Seq are acknowledged, for a connection granted the feature.
func (s *Server) ackUpToLocked(c *sconn, user string, m protocol.FromClient) {
	if !c.cumAck {
		s.fail(c, protocol.CodeUnknownType, m.ID, "ACK_UPTO needs the feature %q", protocol.FeatureCumulativeAck)
		return
	}
	if m.Seq <= 0 {
		s.fail(c, protocol.CodeBadRequest, m.ID, "ACK_UPTO needs \"seq\"")
		return
	}
	s.queue[user] = slices.DeleteFunc(s.queue[user], func(st *stored) bool { return c.sent[st.id] && st.seq <= m.Seq })
	s.notifyLocked()
}

func (s *Server) ackLocked(user string, ids []string) {
	s.queue[user] = slices.DeleteFunc(s.queue[user], func(st *stored) bool { return slices.Contains(ids, st.id) })
	s.notifyLocked()
}

func (s *Server) whoLocked(c *sconn, id string) {
	var users []protocol.OnlineUser
	for name, uc := range s.users {
		users = append(users, protocol.OnlineUser{Username: name, Node: uc.node.id})
	}
	sort.Slice(users, func(i, j int) bool {
		if users[i].Node != users[j].Node {
			return users[i].Node < users[j].Node
		}
		return users[i].Username < users[j].Username
	})
	c.send(protocol.WhoV2{MessageType: protocol.TypeWho, Users: users, ID: id})
}

func (s *Server) groupsLocked(c *sconn, user, id string) {
	var out []protocol.GroupInfo
	for g, members := range s.groups {
		out = append(out, protocol.GroupInfo{Group: g, Members: len(members), Member: members[user]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	c.send(protocol.GroupsV2{MessageType: protocol.TypeGroups, Groups: out, ID: id})
}

func (s *Server) historyLocked(c *sconn, user string, m protocol.FromClient) {
	if m.ToGroup != "" && !s.groups[m.ToGroup][user] {
		s.fail(c, protocol.CodeNotMember, m.ID, "not a member of %s: join it to read its history", m.ToGroup)
		return
	}
	if m.ToGroup == "" && m.ToUsername == "" {
		s.fail(c, protocol.CodeBadRequest, m.ID, "HISTORY needs toUsername or toGroup")
		return
	}
	limit := m.Limit
	if limit <= 0 {
		limit = 50
	}
	var msgs []protocol.ChatV2
	for _, st := range s.history {
		match := m.ToGroup != "" && st.toGroup == m.ToGroup ||
			m.ToUsername != "" && st.toGroup == "" &&
				(st.from == user && st.toUser == m.ToUsername || st.from == m.ToUsername && st.toUser == user)
		if match {
			msgs = append(msgs, st.chatV2())
		}
	}
	if len(msgs) > limit {
		msgs = msgs[len(msgs)-limit:]
	}
	if msgs == nil {
		msgs = []protocol.ChatV2{}
	}
	c.send(protocol.HistoryV2{MessageType: protocol.TypeHistory, ToUsername: m.ToUsername, ToGroup: m.ToGroup, Messages: msgs, ID: m.ID})
}

// chatV2 is st as protocol 2 delivers it.
func (st *stored) chatV2() protocol.ChatV2 {
	return protocol.ChatV2{MessageType: protocol.TypeChatMessage, ID: st.id, Seq: st.seq, FromName: st.from, ToUsername: st.toUser,
		ToGroup: st.toGroup, MessageContent: st.content, SentAt: st.sentAt, Time: st.time}
}

// String is for debugging.
func (st *stored) String() string {
	return strings.Join([]string{st.id, st.from, st.toUser, st.toGroup, st.content}, "|")
}

// statusLocked answers AWAY, WHOIS and NAMES.
func (s *Server) statusLocked(c *sconn, user string, m protocol.FromClient) {
	switch protocol.Type(m.MessageType) {
	case protocol.TypeAway:
		if s.away == nil {
			s.away = map[string]string{}
		}
		s.away[user] = m.Message
		out := protocol.AwayV2{MessageType: protocol.TypeAway, Message: m.Message, ID: m.ID}
		if m.Message != "" {
			out.Since = s.Now().UTC().Format(protocol.StampLayout)
		}
		c.send(out)
	case protocol.TypeWhois:
		if !s.known[m.Username] {
			s.fail(c, protocol.CodeUnknownUser, m.ID, "no user %q (a user exists once they have logged in)", m.Username)
			return
		}
		out := protocol.WhoisV2{MessageType: protocol.TypeWhois, Username: m.Username, Away: s.away[m.Username], ID: m.ID}
		if uc := s.users[m.Username]; uc != nil {
			out.Online, out.Node = true, uc.node.id
		}
		c.send(out)
	case protocol.TypeNames:
		members, ok := s.groups[m.Group]
		if !ok {
			s.fail(c, protocol.CodeUnknownGroup, m.ID, "no group %q (a group is created when someone joins it)", m.Group)
			return
		}
		out := protocol.NamesV2{MessageType: protocol.TypeNames, Group: m.Group, Members: []protocol.Member{}, ID: m.ID}
		for name := range members {
			e := protocol.Member{Username: name, Away: s.away[name]}
			if uc := s.users[name]; uc != nil {
				e.Node = uc.node.id
			}
			out.Members = append(out.Members, e)
		}
		sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Username < out.Members[j].Username })
		c.send(out)
	}
}

// leftLocked reports whether a protocol-2 LOGIN with "failover" says its
// client left the node where name is logged in ("leaving").
func (s *Server) leftLocked(c *sconn, name string, m protocol.FromClient) bool {
	old := s.users[name]
	return old != nil && c.v2 && slices.Contains(m.Features, protocol.FeatureFailover) && m.Leaving != 0 && old.node.id == m.Leaving
}

// loginEchoLocked is the protocol-2 LOGIN answer: with "failover" asked
// (and not switched off), the feature granted and the ring's nodes; with
// "limits" or "cumulative-ack" asked, those granted.
func (s *Server) loginEchoLocked(c *sconn, name string, m protocol.FromClient) protocol.LoginV2 {
	echo := protocol.LoginV2{MessageType: protocol.TypeLogin, Username: name, Version: protocol.V2, Node: c.node.id, ID: m.ID}
	if slices.Contains(m.Features, protocol.FeatureFailover) && !s.noFailover {
		echo.Features = []string{protocol.FeatureFailover}
		for _, n := range s.nodes {
			echo.Nodes = append(echo.Nodes, protocol.NodeAddr{Node: n.id, Addr: n.addr})
		}
	}
	if slices.Contains(m.Features, protocol.FeatureLimits) && s.maxMessage > 0 {
		echo.Features, echo.MaxMessageBytes = append(echo.Features, protocol.FeatureLimits), s.maxMessage
	}
	if slices.Contains(m.Features, protocol.FeatureCumulativeAck) {
		c.cumAck = true
		echo.Features = append(echo.Features, protocol.FeatureCumulativeAck)
	}
	return echo
}
