package protocol

import (
	"encoding/json"
	"fmt"
)

// The shapes of protocol 1, the original RingChat client's, in both
// directions: a client sends LOGIN, JOIN_GROUP, LEAVE_GROUP, CHAT_MESSAGE
// and ALIVE in them, and a node answers and delivers in them. Their fields
// and order are the original's (DESIGN.md, "Chat"); nothing may be added.
type (
	// LoginV1 is LOGIN, and the node's answer to it.
	LoginV1 struct {
		MessageType Type   `json:"messageType"`
		Username    string `json:"username"`
	}
	// GroupV1 is JOIN_GROUP or LEAVE_GROUP, and the node's answer.
	GroupV1 struct {
		MessageType Type   `json:"messageType"`
		Group       string `json:"group"`
	}
	// ChatV1 is CHAT_MESSAGE. A group delivery names its recipient in
	// toUsername as well as the group in toGroup, as the original server
	// did; SentAt is in TimeLayout.
	ChatV1 struct {
		MessageType    Type   `json:"messageType"`
		FromName       string `json:"fromName"`
		ToUsername     string `json:"toUsername,omitempty"`
		ToGroup        string `json:"toGroup,omitempty"`
		MessageContent string `json:"messageContent"`
		SentAt         string `json:"sentAt"`
	}
	// ErrorV1 is ERROR.
	ErrorV1 struct {
		MessageType  Type   `json:"messageType"`
		ErrorMessage string `json:"errorMessage"`
	}
	// AliveV1 is ALIVE, the keep-alive.
	AliveV1 struct {
		MessageType Type `json:"messageType"`
	}
)

// The shapes a node sends in protocol 2: answers (with the request's
// "id" when it had one), deliveries and notices. JOIN_GROUP, LEAVE_GROUP,
// INVITE and ALIVE with an id have the same shape both ways.
type (
	// LoginV2 answers LOGIN. Features and Nodes are what FeatureFailover
	// grants; MaxMessageBytes is what FeatureLimits grants.
	LoginV2 struct {
		MessageType     Type       `json:"messageType"`
		Username        string     `json:"username"`
		Version         int        `json:"version"`
		Node            int64      `json:"node"`
		Away            string     `json:"away,omitempty"`
		Features        []string   `json:"features,omitempty"`
		Nodes           []NodeAddr `json:"nodes,omitempty"`
		MaxMessageBytes int        `json:"maxMessageBytes,omitempty"`
		ID              string     `json:"id,omitempty"`
	}
	// GroupV2 is JOIN_GROUP (InviteOnly: create the group invite-only)
	// or LEAVE_GROUP, and the node's answer (InviteOnly: the group joined
	// is invite-only).
	GroupV2 struct {
		MessageType Type   `json:"messageType"`
		Group       string `json:"group"`
		InviteOnly  bool   `json:"inviteOnly,omitempty"`
		ID          string `json:"id,omitempty"`
	}
	// AccountV2 answers REGISTER and SET_PASSWORD.
	AccountV2 struct {
		MessageType Type   `json:"messageType"`
		Username    string `json:"username"`
		ID          string `json:"id,omitempty"`
	}
	// InviteV2 is INVITE, and the node's answer.
	InviteV2 struct {
		MessageType Type   `json:"messageType"`
		Group       string `json:"group"`
		Username    string `json:"username"`
		ID          string `json:"id,omitempty"`
	}
	// ChatV2 is a chat message as a node delivers it in protocol 2 (and
	// lists it in HISTORY). Time is in StampLayout.
	ChatV2 struct {
		MessageType    Type   `json:"messageType"`
		ID             string `json:"id"`
		Seq            int64  `json:"seq"`
		FromName       string `json:"fromName"`
		ToUsername     string `json:"toUsername,omitempty"`
		ToGroup        string `json:"toGroup,omitempty"`
		MessageContent string `json:"messageContent"`
		SentAt         string `json:"sentAt"`
		Time           string `json:"time"`
	}
	// ErrorV2 is ERROR in protocol 2: a stable code, and the id of the
	// request refused.
	ErrorV2 struct {
		MessageType  Type   `json:"messageType"`
		Code         Code   `json:"code"`
		ErrorMessage string `json:"errorMessage"`
		ID           string `json:"id,omitempty"`
	}
	// StoredV2 is the receipt of a stored message.
	StoredV2 struct {
		MessageType Type   `json:"messageType"`
		ID          string `json:"id"`
		Seq         int64  `json:"seq"`
		Time        string `json:"time"`
	}
	// WhoV2 answers WHO.
	WhoV2 struct {
		MessageType Type         `json:"messageType"`
		Users       []OnlineUser `json:"users"`
		Truncated   bool         `json:"truncated,omitempty"`
		ID          string       `json:"id,omitempty"`
	}
	// GroupsV2 answers GROUPS. Next is the name to ask for the page after
	// this one ("after").
	GroupsV2 struct {
		MessageType Type        `json:"messageType"`
		Groups      []GroupInfo `json:"groups"`
		Truncated   bool        `json:"truncated,omitempty"`
		Next        string      `json:"next,omitempty"`
		ID          string      `json:"id,omitempty"`
	}
	// HistoryV2 answers HISTORY. ReadSeq: how far the other user has read
	// this user's messages.
	HistoryV2 struct {
		MessageType Type     `json:"messageType"`
		ToUsername  string   `json:"toUsername,omitempty"`
		ToGroup     string   `json:"toGroup,omitempty"`
		Messages    []ChatV2 `json:"messages"`
		Truncated   bool     `json:"truncated,omitempty"`
		ReadSeq     int64    `json:"readSeq,omitempty"`
		ID          string   `json:"id,omitempty"`
	}
	// AwayV2 answers AWAY, and tells a sender that the user it writes to
	// is away (Username set, no id; FeatureAway).
	AwayV2 struct {
		MessageType Type   `json:"messageType"`
		Username    string `json:"username,omitempty"`
		Message     string `json:"message,omitempty"`
		Since       string `json:"since,omitempty"`
		ID          string `json:"id,omitempty"`
	}
	// WhoisV2 answers WHOIS.
	WhoisV2 struct {
		MessageType Type   `json:"messageType"`
		Username    string `json:"username"`
		Online      bool   `json:"online"`
		Node        int64  `json:"node,omitempty"`
		Since       string `json:"since,omitempty"`
		Away        string `json:"away,omitempty"`
		AwaySince   string `json:"awaySince,omitempty"`
		ID          string `json:"id,omitempty"`
	}
	// NamesV2 answers NAMES: one page of a group's members.
	NamesV2 struct {
		MessageType Type     `json:"messageType"`
		Group       string   `json:"group"`
		Members     []Member `json:"members"`
		Truncated   bool     `json:"truncated,omitempty"`
		Next        string   `json:"next,omitempty"`
		ID          string   `json:"id,omitempty"`
	}
	// UserNoticeV2 is READ or TYPING as a node tells it: Username has
	// read this session's messages up to Seq, or is writing to it.
	UserNoticeV2 struct {
		MessageType Type   `json:"messageType"`
		Username    string `json:"username"`
		Seq         int64  `json:"seq,omitempty"`
	}
	// NodeNoticeV2 is NOTICE: the node's word about itself.
	NodeNoticeV2 struct {
		MessageType Type   `json:"messageType"`
		Code        Code   `json:"code"`
		Node        int64  `json:"node"`
		Message     string `json:"message"`
	}
	// AliveV2 is ALIVE with an id (FeatureFailover's ping), and the
	// node's answer naming the same id.
	AliveV2 struct {
		MessageType Type   `json:"messageType"`
		ID          string `json:"id"`
	}
)

// The entries of the lists in answers.
type (
	// NodeAddr is a node of the ring as the LOGIN answer lists it: its id
	// and its client port.
	NodeAddr struct {
		Node int64  `json:"node"`
		Addr string `json:"addr"`
	}
	// OnlineUser is one entry of a WHO answer.
	OnlineUser struct {
		Username string `json:"username"`
		Node     int64  `json:"node"`
		Away     string `json:"away,omitempty"`
	}
	// GroupInfo is one entry of a GROUPS answer. InviteOnly groups are
	// listed to their members and invited users only; Invited says this
	// user may join.
	GroupInfo struct {
		Group      string `json:"group"`
		Members    int    `json:"members"`
		Member     bool   `json:"member"`
		InviteOnly bool   `json:"inviteOnly,omitempty"`
		Invited    bool   `json:"invited,omitempty"`
	}
	// Member is one entry of a NAMES answer: Node is where the member is
	// logged in (absent: nowhere).
	Member struct {
		Username string `json:"username"`
		Node     int64  `json:"node,omitempty"`
		Away     string `json:"away,omitempty"`
	}
)

// String is "{NAME NODE}", with " away: MESSAGE" before the brace when
// the user is away.
func (u OnlineUser) String() string {
	if u.Away != "" {
		return fmt.Sprintf("{%s %d away: %s}", u.Username, u.Node, u.Away)
	}
	return fmt.Sprintf("{%s %d}", u.Username, u.Node)
}

// String is "{GROUP MEMBERS MEMBER}", with " invite-only" and " invited"
// before the brace when they hold.
func (g GroupInfo) String() string {
	s := fmt.Sprintf("{%s %d %v", g.Group, g.Members, g.Member)
	if g.InviteOnly {
		s += " invite-only"
	}
	if g.Invited {
		s += " invited"
	}
	return s + "}"
}

// The shapes a client sends in protocol 2 where they differ from the
// node's (JOIN_GROUP, LEAVE_GROUP and INVITE are GroupV2 and InviteV2,
// ALIVE with an id AliveV2). A client gives every request an id.
type (
	// LoginRequest is LOGIN asking for protocol 2. Leaving is the node the
	// client has just left (FeatureFailover).
	LoginRequest struct {
		MessageType Type     `json:"messageType"`
		Username    string   `json:"username"`
		Version     int      `json:"version"`
		Password    string   `json:"password,omitempty"`
		Features    []string `json:"features,omitempty"`
		Leaving     int64    `json:"leaving,omitempty"`
		ID          string   `json:"id"`
	}
	// AccountRequest is REGISTER (a name and a password) or SET_PASSWORD
	// (a password).
	AccountRequest struct {
		MessageType Type   `json:"messageType"`
		Username    string `json:"username,omitempty"`
		Password    string `json:"password"`
		ID          string `json:"id"`
	}
	// ChatRequest is CHAT_MESSAGE: ID is the message's id (a lower-case
	// UUID).
	ChatRequest struct {
		MessageType    Type   `json:"messageType"`
		ID             string `json:"id"`
		ToUsername     string `json:"toUsername,omitempty"`
		ToGroup        string `json:"toGroup,omitempty"`
		MessageContent string `json:"messageContent"`
	}
	// AckRequest is ACK: the ids of messages received (at most MaxAckIDs).
	AckRequest struct {
		MessageType Type     `json:"messageType"`
		IDs         []string `json:"ids"`
	}
	// AckUpToRequest is ACK_UPTO (FeatureCumulativeAck): every message
	// delivered on this connection with a sequence up to Seq is
	// received. ID, if given, names it in an ERROR that refuses it.
	AckUpToRequest struct {
		MessageType Type   `json:"messageType"`
		Seq         int64  `json:"seq"`
		ID          string `json:"id,omitempty"`
	}
	// QueryRequest is WHO, GROUPS or HISTORY (a conversation, how many
	// messages, older than which sequence).
	QueryRequest struct {
		MessageType Type   `json:"messageType"`
		ID          string `json:"id"`
		ToUsername  string `json:"toUsername,omitempty"`
		ToGroup     string `json:"toGroup,omitempty"`
		Limit       int    `json:"limit,omitempty"`
		Before      int64  `json:"before,omitempty"`
	}
	// StatusRequest is AWAY (a message), WHOIS (a user) or NAMES (a group,
	// and a page after a cursor).
	StatusRequest struct {
		MessageType Type   `json:"messageType"`
		Message     string `json:"message,omitempty"`
		Username    string `json:"username,omitempty"`
		Group       string `json:"group,omitempty"`
		After       string `json:"after,omitempty"`
		Limit       int    `json:"limit,omitempty"`
		ID          string `json:"id"`
	}
	// NoticeRequest is READ (read up to Seq) or TYPING, about a direct
	// conversation.
	NoticeRequest struct {
		MessageType Type   `json:"messageType"`
		ToUsername  string `json:"toUsername"`
		Seq         int64  `json:"seq,omitempty"`
	}
)

// FromClient is the union of every field a client may send, as a node
// reads a line. Fields a type does not use are ignored, as is anything
// not listed (the original client sends "sentAt" as an object). The raw
// fields take more than one JSON form: "version" a number or a string,
// "forGroup" and "inviteOnly" true, false or null. MessageType is a plain
// string so that a node's refusal of a line whose messageType is not one
// says "must be string", as it always has.
type FromClient struct {
	MessageType    string          `json:"messageType"`
	Username       string          `json:"username"`
	Group          string          `json:"group"`
	ToUsername     string          `json:"toUsername"`
	ToGroup        string          `json:"toGroup"`
	ToName         string          `json:"toName"`   // the older shape: toName and forGroup
	ForGroup       json.RawMessage `json:"forGroup"` // the older shape
	MessageContent string          `json:"messageContent"`
	Version        json.RawMessage `json:"version"`
	Password       string          `json:"password"`
	ID             string          `json:"id"`
	IDs            []string        `json:"ids"`
	Limit          int             `json:"limit"`
	After          string          `json:"after"`
	InviteOnly     json.RawMessage `json:"inviteOnly"`
	Message        string          `json:"message"`
	Seq            int64           `json:"seq"`
	Before         int64           `json:"before"`
	Features       []string        `json:"features"`
	Leaving        int64           `json:"leaving"`
}

// FromNode is the union of every field a node may send, as a client reads
// a line. "id" is kept raw (a client takes it only if it is a string), and
// so is "sentAt" (the original client's older form is an object,
// {"seconds","nanos"}).
type FromNode struct {
	MessageType    Type            `json:"messageType"`
	Username       string          `json:"username,omitempty"`
	Group          string          `json:"group,omitempty"`
	FromName       string          `json:"fromName,omitempty"`
	ToUsername     string          `json:"toUsername,omitempty"`
	ToGroup        string          `json:"toGroup,omitempty"`
	ToName         string          `json:"toName,omitempty"`   // older shape
	ForGroup       *bool           `json:"forGroup,omitempty"` // older shape
	MessageContent string          `json:"messageContent,omitempty"`
	SentAt         json.RawMessage `json:"sentAt,omitempty"`
	ErrorMessage   string          `json:"errorMessage,omitempty"`

	// Protocol 2.
	Version   int             `json:"version,omitempty"`
	Node      int64           `json:"node,omitempty"`
	ID        json.RawMessage `json:"id,omitempty"`
	Seq       int64           `json:"seq,omitempty"`
	Time      string          `json:"time,omitempty"`
	Code      Code            `json:"code,omitempty"`
	Users     []OnlineUser    `json:"users,omitempty"`
	Groups    []GroupInfo     `json:"groups,omitempty"`
	Messages  []FromNode      `json:"messages,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// InviteOnly marks a JOIN_GROUP answer of an invite-only group.
	InviteOnly bool `json:"inviteOnly,omitempty"`

	// AWAY, WHOIS, NAMES, NOTICE, HISTORY's read mark.
	Message   string   `json:"message,omitempty"`
	Since     string   `json:"since,omitempty"`
	Away      string   `json:"away,omitempty"`
	AwaySince string   `json:"awaySince,omitempty"`
	Online    bool     `json:"online,omitempty"`
	Members   []Member `json:"members,omitempty"`
	Next      string   `json:"next,omitempty"`
	ReadSeq   int64    `json:"readSeq,omitempty"`

	// The LOGIN answer's grants (FeatureFailover, FeatureLimits).
	Features        []string   `json:"features,omitempty"`
	Nodes           []NodeAddr `json:"nodes,omitempty"`
	MaxMessageBytes int        `json:"maxMessageBytes,omitempty"`
}
