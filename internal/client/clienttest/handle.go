package clienttest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// message is the union of both protocols as this fake server reads it.
type message struct {
	MessageType    string   `json:"messageType"`
	Username       string   `json:"username"`
	Group          string   `json:"group"`
	FromName       string   `json:"fromName"`
	ToUsername     string   `json:"toUsername"`
	ToGroup        string   `json:"toGroup"`
	ToName         string   `json:"toName"`
	ForGroup       bool     `json:"forGroup"`
	MessageContent string   `json:"messageContent"`
	Version        int      `json:"version"`
	Password       string   `json:"password"`
	ID             string   `json:"id"`
	IDs            []string `json:"ids"`
	Limit          int      `json:"limit"`
	Message        string   `json:"message"`
	Features       []string `json:"features"`
	Leaving        int64    `json:"leaving"`
}

type awayOut struct {
	MessageType string `json:"messageType"`
	Message     string `json:"message,omitempty"`
	Since       string `json:"since,omitempty"`
	ID          string `json:"id,omitempty"`
}

type whoisOut struct {
	MessageType string `json:"messageType"`
	Username    string `json:"username"`
	Online      bool   `json:"online"`
	Node        int64  `json:"node,omitempty"`
	Away        string `json:"away,omitempty"`
	ID          string `json:"id,omitempty"`
}

type namesOut struct {
	MessageType string      `json:"messageType"`
	Group       string      `json:"group"`
	Members     []nameEntry `json:"members"`
	ID          string      `json:"id,omitempty"`
}

type nameEntry struct {
	Username string `json:"username"`
	Node     int64  `json:"node,omitempty"`
	Away     string `json:"away,omitempty"`
}

type userEcho struct {
	MessageType string `json:"messageType"`
	Username    string `json:"username"`
}

type loginV2Echo struct {
	MessageType string     `json:"messageType"`
	Username    string     `json:"username"`
	Version     int        `json:"version"`
	Node        int64      `json:"node"`
	Features    []string   `json:"features,omitempty"`
	Nodes       []nodeAddr `json:"nodes,omitempty"`
	MaxMessage  int        `json:"maxMessageBytes,omitempty"`
	ID          string     `json:"id,omitempty"`
}

type nodeAddr struct {
	Node int64  `json:"node"`
	Addr string `json:"addr"`
}

type aliveOut struct {
	MessageType string `json:"messageType"`
	ID          string `json:"id"`
}

type groupEcho struct {
	MessageType string `json:"messageType"`
	Group       string `json:"group"`
	ID          string `json:"id,omitempty"`
}

type chatOut struct {
	MessageType    string `json:"messageType"`
	ID             string `json:"id,omitempty"`
	Seq            int64  `json:"seq,omitempty"`
	FromName       string `json:"fromName"`
	ToUsername     string `json:"toUsername,omitempty"`
	ToGroup        string `json:"toGroup,omitempty"`
	MessageContent string `json:"messageContent"`
	SentAt         string `json:"sentAt"`
	Time           string `json:"time,omitempty"`
}

type storedOut struct {
	MessageType string `json:"messageType"`
	ID          string `json:"id"`
	Seq         int64  `json:"seq"`
	Time        string `json:"time"`
}

type errorV2 struct {
	MessageType  string `json:"messageType"`
	Code         string `json:"code"`
	ErrorMessage string `json:"errorMessage"`
	ID           string `json:"id,omitempty"`
}

type whoOut struct {
	MessageType string    `json:"messageType"`
	Users       []whoUser `json:"users"`
	ID          string    `json:"id,omitempty"`
}

type whoUser struct {
	Username string `json:"username"`
	Node     int64  `json:"node"`
}

type groupsOut struct {
	MessageType string      `json:"messageType"`
	Groups      []groupInfo `json:"groups"`
	ID          string      `json:"id,omitempty"`
}

type groupInfo struct {
	Group   string `json:"group"`
	Members int    `json:"members"`
	Member  bool   `json:"member"`
}

type historyOut struct {
	MessageType string    `json:"messageType"`
	ToUsername  string    `json:"toUsername,omitempty"`
	ToGroup     string    `json:"toGroup,omitempty"`
	Messages    []chatOut `json:"messages"`
	ID          string    `json:"id,omitempty"`
}

// handle records line and answers it, in one hold of s.mu: a test that
// saw the line (WaitLine) sees what handling it did, and a Mute after it
// cannot reach it.
func (s *Server) handle(c *sconn, line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
	s.notifyLocked()
	var m message
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		s.fail(c, "BAD_JSON", "", "malformed JSON: %v", err)
		return
	}
	user := c.user
	switch m.MessageType {
	case "ALIVE":
		if c.v2 && m.ID != "" {
			c.send(aliveOut{"ALIVE", m.ID})
		}
	case "":
		s.fail(c, "UNKNOWN_TYPE", m.ID, "missing messageType")
	case "LOGIN":
		s.loginLocked(c, m)
	case "JOIN_GROUP", "LEAVE_GROUP", "CHAT_MESSAGE", "ACK", "WHO", "GROUPS", "HISTORY", "AWAY", "WHOIS", "NAMES":
		switch {
		case user == "":
			s.fail(c, "NOT_LOGGED_IN", m.ID, "not logged in")
		case m.MessageType == "CHAT_MESSAGE":
			s.chatLocked(c, user, m)
		case m.MessageType == "JOIN_GROUP" || m.MessageType == "LEAVE_GROUP":
			if m.Group != SilentName {
				s.groupLocked(c, user, m)
			}
		case !c.v2:
			s.fail(c, "UNKNOWN_TYPE", "", "unknown messageType %q", m.MessageType)
		case m.MessageType == "ACK":
			s.ackLocked(user, m.IDs)
		case m.MessageType == "WHO":
			s.whoLocked(c, m.ID)
		case m.MessageType == "GROUPS":
			s.groupsLocked(c, user, m.ID)
		case m.MessageType == "HISTORY":
			s.historyLocked(c, user, m)
		default:
			s.statusLocked(c, user, m)
		}
	default:
		s.fail(c, "UNKNOWN_TYPE", m.ID, "unknown messageType %q", m.MessageType)
	}
}

// fail sends an ERROR: with code and id to a protocol-2 connection, the
// bare v1 shape otherwise.
func (s *Server) fail(c *sconn, code, id, format string, args ...any) {
	if c.v2 {
		c.send(errorV2{"ERROR", code, fmt.Sprintf(format, args...), id})
		return
	}
	c.sendError(format, args...)
}

func (s *Server) loginLocked(c *sconn, m message) {
	name := m.Username
	if name == SilentName {
		return
	}
	if m.Version == 2 {
		c.v2 = true
	}
	switch {
	case name == "":
		s.fail(c, "BAD_NAME", m.ID, "LOGIN without username")
		return
	case c.user != "":
		s.fail(c, "ALREADY_LOGGED_IN", m.ID, "already logged in as %q on this connection", c.user)
		return
	case name == TakenName:
		s.fail(c, "USER_ONLINE", m.ID, "username taken")
		return
	case s.leftLocked(c, name, m):
		// The client left that node (stopped, or it said it cannot
		// serve): its login there is replaced, as the real node does.
	case s.users[name] != nil:
		if c.v2 {
			s.fail(c, "USER_ONLINE", m.ID, "user %q is already logged in at node %d", name, s.users[name].node.id)
		} else {
			c.sendError("username taken")
		}
		return
	}
	if pw, claimed := s.password[name]; claimed {
		switch {
		case !c.v2 || m.Password == "":
			s.fail(c, "PASSWORD_REQUIRED", m.ID, "user %q needs a password", name)
			return
		case m.Password != pw:
			s.fail(c, "BAD_PASSWORD", m.ID, "wrong password for %q", name)
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
		c.send(userEcho{"LOGIN", name})
	}
	for _, st := range s.queue[name] {
		s.deliverLocked(c, st)
	}
	if !c.v2 {
		delete(s.queue, name) // protocol 1: written is delivered
	}
}

func (s *Server) groupLocked(c *sconn, user string, m message) {
	group := m.Group
	if s.groups[group] == nil {
		if m.MessageType == "LEAVE_GROUP" {
			s.fail(c, "NOT_MEMBER", m.ID, "not a member of %s", group)
			return
		}
		s.groups[group] = map[string]bool{}
	}
	member := s.groups[group][user]
	if m.MessageType == "JOIN_GROUP" {
		s.groups[group][user] = true
	} else {
		delete(s.groups[group], user)
	}
	s.notifyLocked()
	if m.MessageType == "LEAVE_GROUP" && !member {
		s.fail(c, "NOT_MEMBER", m.ID, "not a member of %s", group)
		return
	}
	if c.v2 {
		c.send(groupEcho{m.MessageType, group, m.ID})
	} else {
		c.send(groupEcho{MessageType: m.MessageType, Group: group})
	}
}

func (s *Server) chatLocked(c *sconn, user string, m message) {
	toUser, toGroup := m.ToUsername, m.ToGroup
	if toUser == "" && toGroup == "" {
		if m.ForGroup {
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
		sentAt: now.Format("Jan 2, 2006, 3:04:05 PM"), time: now.UTC().Format("2006-01-02T15:04:05.000Z")}
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

func (s *Server) chatV2Locked(c *sconn, user, toUser, toGroup string, m message) {
	if s.muted[user] {
		return
	}
	id := m.ID
	if id == "" {
		id = fmt.Sprintf("srv-%d", s.seq+1)
	}
	if st := s.stored[id]; st != nil {
		c.send(storedOut{"STORED", id, st.seq, st.time})
		return
	}
	switch {
	case toUser == "" && toGroup == "":
		s.fail(c, "BAD_REQUEST", m.ID, "CHAT_MESSAGE without recipient")
		return
	case m.MessageContent == "":
		s.fail(c, "BAD_REQUEST", m.ID, "empty messageContent")
		return
	case toUser != "" && !s.known[toUser]:
		s.fail(c, "UNKNOWN_USER", m.ID, "no user %q (a user exists once they have logged in)", toUser)
		return
	case toGroup != "" && s.groups[toGroup] == nil:
		s.fail(c, "UNKNOWN_GROUP", m.ID, "no group %q (a group exists once someone has joined it)", toGroup)
		return
	}
	now := s.Now()
	s.seq++
	st := &stored{seq: s.seq, id: id, from: user, toUser: toUser, toGroup: toGroup, content: m.MessageContent,
		sentAt: now.Format("Jan 2, 2006, 3:04:05 PM"), time: now.UTC().Format("2006-01-02T15:04:05.000Z")}
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
	c.send(storedOut{"STORED", id, st.seq, st.time})
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
	out := chatOut{MessageType: "CHAT_MESSAGE", FromName: st.from, ToUsername: st.toUser, ToGroup: st.toGroup,
		MessageContent: st.content, SentAt: st.sentAt}
	if c.v2 {
		out.ID, out.Seq, out.Time = st.id, st.seq, st.time
	}
	c.send(out)
}

func (s *Server) ackLocked(user string, ids []string) {
	s.queue[user] = slices.DeleteFunc(s.queue[user], func(st *stored) bool { return slices.Contains(ids, st.id) })
	s.notifyLocked()
}

func (s *Server) whoLocked(c *sconn, id string) {
	var users []whoUser
	for name, uc := range s.users {
		users = append(users, whoUser{name, uc.node.id})
	}
	sort.Slice(users, func(i, j int) bool {
		if users[i].Node != users[j].Node {
			return users[i].Node < users[j].Node
		}
		return users[i].Username < users[j].Username
	})
	c.send(whoOut{"WHO", users, id})
}

func (s *Server) groupsLocked(c *sconn, user, id string) {
	var out []groupInfo
	for g, members := range s.groups {
		out = append(out, groupInfo{g, len(members), members[user]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	c.send(groupsOut{"GROUPS", out, id})
}

func (s *Server) historyLocked(c *sconn, user string, m message) {
	if m.ToGroup != "" && !s.groups[m.ToGroup][user] {
		s.fail(c, "NOT_MEMBER", m.ID, "not a member of %s: join it to read its history", m.ToGroup)
		return
	}
	if m.ToGroup == "" && m.ToUsername == "" {
		s.fail(c, "BAD_REQUEST", m.ID, "HISTORY needs toUsername or toGroup")
		return
	}
	limit := m.Limit
	if limit <= 0 {
		limit = 50
	}
	var msgs []chatOut
	for _, st := range s.history {
		match := m.ToGroup != "" && st.toGroup == m.ToGroup ||
			m.ToUsername != "" && st.toGroup == "" &&
				(st.from == user && st.toUser == m.ToUsername || st.from == m.ToUsername && st.toUser == user)
		if match {
			msgs = append(msgs, chatOut{"CHAT_MESSAGE", st.id, st.seq, st.from, st.toUser, st.toGroup, st.content, st.sentAt, st.time})
		}
	}
	if len(msgs) > limit {
		msgs = msgs[len(msgs)-limit:]
	}
	if msgs == nil {
		msgs = []chatOut{}
	}
	c.send(historyOut{"HISTORY", m.ToUsername, m.ToGroup, msgs, m.ID})
}

// String is for debugging.
func (st *stored) String() string {
	return strings.Join([]string{st.id, st.from, st.toUser, st.toGroup, st.content}, "|")
}

// statusLocked answers AWAY, WHOIS and NAMES.
func (s *Server) statusLocked(c *sconn, user string, m message) {
	switch m.MessageType {
	case "AWAY":
		if s.away == nil {
			s.away = map[string]string{}
		}
		s.away[user] = m.Message
		out := awayOut{MessageType: "AWAY", Message: m.Message, ID: m.ID}
		if m.Message != "" {
			out.Since = s.Now().UTC().Format("2006-01-02T15:04:05.000Z")
		}
		c.send(out)
	case "WHOIS":
		if !s.known[m.Username] {
			s.fail(c, "UNKNOWN_USER", m.ID, "no user %q (a user exists once they have logged in)", m.Username)
			return
		}
		out := whoisOut{MessageType: "WHOIS", Username: m.Username, Away: s.away[m.Username], ID: m.ID}
		if uc := s.users[m.Username]; uc != nil {
			out.Online, out.Node = true, uc.node.id
		}
		c.send(out)
	case "NAMES":
		members, ok := s.groups[m.Group]
		if !ok {
			s.fail(c, "UNKNOWN_GROUP", m.ID, "no group %q (a group is created when someone joins it)", m.Group)
			return
		}
		out := namesOut{MessageType: "NAMES", Group: m.Group, Members: []nameEntry{}, ID: m.ID}
		for name := range members {
			e := nameEntry{Username: name, Away: s.away[name]}
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
func (s *Server) leftLocked(c *sconn, name string, m message) bool {
	old := s.users[name]
	return old != nil && c.v2 && slices.Contains(m.Features, "failover") && m.Leaving != 0 && old.node.id == m.Leaving
}

// loginEchoLocked is the protocol-2 LOGIN answer: with "failover" asked
// (and not switched off), the feature granted and the ring's nodes.
func (s *Server) loginEchoLocked(c *sconn, name string, m message) loginV2Echo {
	echo := loginV2Echo{MessageType: "LOGIN", Username: name, Version: 2, Node: c.node.id, ID: m.ID}
	if slices.Contains(m.Features, "failover") && !s.noFailover {
		echo.Features = []string{"failover"}
		for _, n := range s.nodes {
			echo.Nodes = append(echo.Nodes, nodeAddr{n.id, n.addr})
		}
	}
	if slices.Contains(m.Features, "limits") && s.maxMessage > 0 {
		echo.Features, echo.MaxMessage = append(echo.Features, "limits"), s.maxMessage
	}
	return echo
}
