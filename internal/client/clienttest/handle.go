package clienttest

import (
	"encoding/json"
	"sort"
)

// message is the v1 union as this fake server reads it.
type message struct {
	MessageType    string `json:"messageType"`
	Username       string `json:"username"`
	Group          string `json:"group"`
	FromName       string `json:"fromName"`
	ToUsername     string `json:"toUsername"`
	ToGroup        string `json:"toGroup"`
	ToName         string `json:"toName"`
	ForGroup       bool   `json:"forGroup"`
	MessageContent string `json:"messageContent"`
}

type userEcho struct {
	MessageType string `json:"messageType"`
	Username    string `json:"username"`
}

type groupEcho struct {
	MessageType string `json:"messageType"`
	Group       string `json:"group"`
}

type chatOut struct {
	MessageType    string `json:"messageType"`
	FromName       string `json:"fromName"`
	ToUsername     string `json:"toUsername,omitempty"`
	ToGroup        string `json:"toGroup,omitempty"`
	MessageContent string `json:"messageContent"`
	SentAt         string `json:"sentAt"`
}

func (s *Server) handle(c *sconn, line string) {
	var m message
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		c.sendError("malformed JSON: %v", err)
		return
	}
	s.mu.Lock()
	user := c.user
	s.mu.Unlock()
	switch m.MessageType {
	case "ALIVE":
	case "":
		c.sendError("missing messageType")
	case "LOGIN":
		s.login(c, m.Username)
	case "JOIN_GROUP", "LEAVE_GROUP", "CHAT_MESSAGE":
		switch {
		case user == "":
			c.sendError("not logged in")
		case m.MessageType == "CHAT_MESSAGE":
			s.chat(c, user, m)
		case m.Group != SilentName:
			s.group(c, user, m.MessageType, m.Group)
		}
	default:
		c.sendError("unknown messageType %q", m.MessageType)
	}
}

func (s *Server) group(c *sconn, user, typ, group string) {
	s.mu.Lock()
	if s.groups[group] == nil {
		s.groups[group] = map[string]bool{}
	}
	member := s.groups[group][user]
	if typ == "JOIN_GROUP" {
		s.groups[group][user] = true
	} else {
		delete(s.groups[group], user)
	}
	s.notifyLocked()
	s.mu.Unlock()
	if typ == "LEAVE_GROUP" && !member {
		c.sendError("not a member of %s", group)
		return
	}
	c.send(groupEcho{typ, group})
}

func (s *Server) login(c *sconn, name string) {
	if name == SilentName {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case name == "":
		c.sendError("LOGIN without username")
	case name == TakenName || (s.users[name] != nil && s.users[name] != c):
		c.sendError("username taken")
	default:
		if c.user != "" && s.users[c.user] == c {
			delete(s.users, c.user)
		}
		c.user = name
		s.users[name] = c
		s.notifyLocked()
		c.send(userEcho{"LOGIN", name})
	}
}

func (s *Server) chat(c *sconn, user string, m message) {
	out := chatOut{MessageType: "CHAT_MESSAGE", FromName: user, MessageContent: m.MessageContent,
		SentAt: s.Now().Format("Jan 2, 2006, 3:04:05 PM")}
	toUser, toGroup := m.ToUsername, m.ToGroup
	if toUser == "" && toGroup == "" {
		if m.ForGroup {
			toGroup = m.ToName
		} else {
			toUser = m.ToName
		}
	}
	s.mu.Lock()
	var targets []*sconn
	switch {
	case toGroup != "":
		out.ToGroup = toGroup
		names := make([]string, 0, len(s.groups[toGroup]))
		for n := range s.groups[toGroup] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if t := s.users[n]; t != nil && n != user {
				targets = append(targets, t)
			}
		}
	case toUser != "":
		out.ToUsername = toUser
		if t := s.users[toUser]; t != nil {
			targets = append(targets, t)
		}
	}
	s.mu.Unlock()
	switch {
	case toUser == "" && toGroup == "":
		c.sendError("CHAT_MESSAGE without recipient")
	case toUser != "" && len(targets) == 0:
		c.sendError("user %s is not online", toUser)
	default:
		for _, t := range targets {
			t.send(out)
		}
	}
}
