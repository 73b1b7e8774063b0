package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// MessageType is the value of the "messageType" field of a v1 message.
type MessageType string

// The v1 message types (DESIGN.md, "Chat").
const (
	TypeLogin       MessageType = "LOGIN"
	TypeJoinGroup   MessageType = "JOIN_GROUP"
	TypeLeaveGroup  MessageType = "LEAVE_GROUP"
	TypeChatMessage MessageType = "CHAT_MESSAGE"
	TypeError       MessageType = "ERROR"
	TypeAlive       MessageType = "ALIVE"

	// Protocol 2 only.
	TypeStored  MessageType = "STORED"
	TypeAck     MessageType = "ACK"
	TypeWho     MessageType = "WHO"
	TypeGroups  MessageType = "GROUPS"
	TypeHistory MessageType = "HISTORY"

	TypeRegister    MessageType = "REGISTER"
	TypeSetPassword MessageType = "SET_PASSWORD"
	TypeInvite      MessageType = "INVITE"
)

// TimeLayout is the layout of a CHAT_MESSAGE's "sentAt" field.
const TimeLayout = "Jan 2, 2006, 3:04:05 PM"

// Decoding errors. Decode wraps one of them, so callers can test with
// errors.Is and still print a message that says what was wrong.
var (
	ErrMalformed      = errors.New("malformed message")
	ErrMissingType    = errors.New("missing messageType")
	ErrUnknownType    = errors.New("unknown messageType")
	ErrInvalidMessage = errors.New("invalid message")
)

// Wire is the union of every v1 field as it appears on the wire. Decode
// reads lines into it; the encoder uses one struct per shape instead, so that
// the bytes sent match DESIGN.md field for field.
type Wire struct {
	MessageType    MessageType     `json:"messageType"`
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
	ID        json.RawMessage `json:"id,omitempty"` // a string; anything else is ignored
	Seq       int64           `json:"seq,omitempty"`
	Time      string          `json:"time,omitempty"`
	Code      string          `json:"code,omitempty"`
	Users     []OnlineUser    `json:"users,omitempty"`
	Groups    []GroupInfo     `json:"groups,omitempty"`
	Messages  []Wire          `json:"messages,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// InviteOnly marks a JOIN_GROUP echo of an invite-only group.
	InviteOnly bool `json:"inviteOnly,omitempty"`

	// AWAY, WHOIS, NAMES, HISTORY's read mark.
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

// id returns the "id" field if it is a string.
func (w *Wire) id() string {
	var s string
	if len(w.ID) > 0 && json.Unmarshal(w.ID, &s) == nil {
		return s
	}
	return ""
}

// Decode parses one line of the client port into an Event: Login,
// JoinGroup, LeaveGroup, ChatMessage, ErrorMessage or Alive. Fields that a
// type does not use are ignored. A CHAT_MESSAGE may name its destination as
// "toUsername" or "toGroup", or in the older shape "toName" plus "forGroup";
// its "sentAt" may be the v1 string or the older {"seconds","nanos"} object,
// which is converted to the v1 string in local time.
func Decode(line []byte) (Event, error) {
	var w Wire
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return decodeWire(&w)
}

// decodeWire makes the event of a decoded line with the decoder of its
// message type.
func decodeWire(w *Wire) (Event, error) {
	id := w.id()
	if w.MessageType == "" {
		return nil, ErrMissingType
	}
	decode, ok := wireDecoders[w.MessageType]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownType, string(w.MessageType))
	}
	return decode(w, id)
}

// A wireDecoder makes the event of one message type from its fields; id
// is its "id" if that is a string.
type wireDecoder func(w *Wire, id string) (Event, error)

// wireDecoders holds the decoder of every message type a server sends.
var wireDecoders = map[MessageType]wireDecoder{
	TypeLogin:      decodeLoginWire,
	TypeJoinGroup:  decodeGroupWire,
	TypeLeaveGroup: decodeGroupWire,
	TypeChatMessage: func(w *Wire, _ string) (Event, error) {
		return decodeChat(w)
	},
	TypeError: func(w *Wire, id string) (Event, error) {
		return ErrorMessage{Message: w.ErrorMessage, Code: w.Code, ID: id}, nil
	},
	TypeAlive: func(_ *Wire, id string) (Event, error) {
		return Alive{ID: id}, nil
	},
	TypeNotice: func(w *Wire, _ string) (Event, error) {
		return Notice{Code: w.Code, Node: w.Node, Message: w.Message}, nil
	},
	TypeStored:      decodeStoredWire,
	TypeRegister:    decodeAccountWire,
	TypeSetPassword: decodeAccountWire,
	TypeInvite: func(w *Wire, id string) (Event, error) {
		return Invite{Group: w.Group, Username: w.Username, ID: id}, nil
	},
	TypeWho: func(w *Wire, id string) (Event, error) {
		return Who{Users: w.Users, Truncated: w.Truncated, ID: id}, nil
	},
	TypeGroups: func(w *Wire, id string) (Event, error) {
		return Groups{Groups: w.Groups, Truncated: w.Truncated, ID: id}, nil
	},
	TypeHistory: decodeHistoryWire,
	TypeAway: func(w *Wire, id string) (Event, error) {
		return Away{User: w.Username, Message: w.Message, Since: w.Since, ID: id}, nil
	},
	TypeWhois: func(w *Wire, id string) (Event, error) {
		return Whois{User: w.Username, Online: w.Online, Node: w.Node, Since: w.Since, Away: w.Away, AwaySince: w.AwaySince, ID: id}, nil
	},
	TypeNames: func(w *Wire, id string) (Event, error) {
		return Names{Group: w.Group, Members: w.Members, Truncated: w.Truncated, Next: w.Next, ID: id}, nil
	},
	TypeRead:   decodeNoticeWire,
	TypeTyping: decodeNoticeWire,
}

// decodeLoginWire decodes a LOGIN answer, which names the user.
func decodeLoginWire(w *Wire, id string) (Event, error) {
	if w.Username == "" {
		return nil, fmt.Errorf("%w: LOGIN without username", ErrInvalidMessage)
	}
	return Login{Username: w.Username, Version: w.Version, Node: w.Node, ID: id, Away: w.Away, Features: w.Features, Nodes: w.Nodes, MaxMessageBytes: w.MaxMessageBytes}, nil
}

// decodeGroupWire decodes a JOIN_GROUP or LEAVE_GROUP answer, which names
// the group.
func decodeGroupWire(w *Wire, id string) (Event, error) {
	if w.Group == "" {
		return nil, fmt.Errorf("%w: %s without group", ErrInvalidMessage, w.MessageType)
	}
	if w.MessageType == TypeJoinGroup {
		return JoinGroup{Group: w.Group, ID: id, InviteOnly: w.InviteOnly}, nil
	}
	return LeaveGroup{Group: w.Group, ID: id}, nil
}

// decodeStoredWire decodes STORED, which names the stored message.
func decodeStoredWire(w *Wire, id string) (Event, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: STORED without id", ErrInvalidMessage)
	}
	return Stored{ID: id, Seq: w.Seq, Stamp: w.Time}, nil
}

// decodeAccountWire decodes a REGISTER or SET_PASSWORD answer.
func decodeAccountWire(w *Wire, id string) (Event, error) {
	return Account{Type: w.MessageType, Username: w.Username, ID: id}, nil
}

// decodeHistoryWire decodes a HISTORY answer and its messages.
func decodeHistoryWire(w *Wire, id string) (Event, error) {
	h := History{To: ToUser(w.ToUsername), Truncated: w.Truncated, ID: id, ReadSeq: w.ReadSeq}
	if w.ToGroup != "" {
		h.To = ToGroup(w.ToGroup)
	}
	for i := range w.Messages {
		ev, err := decodeChat(&w.Messages[i])
		if err != nil {
			return nil, fmt.Errorf("HISTORY message %d: %w", i, err)
		}
		h.Messages = append(h.Messages, ev.(ChatMessage))
	}
	return h, nil
}

// decodeNoticeWire decodes a READ or TYPING notice, which names the user.
func decodeNoticeWire(w *Wire, _ string) (Event, error) {
	if w.Username == "" {
		return nil, fmt.Errorf("%w: %s without username", ErrInvalidMessage, w.MessageType)
	}
	if w.MessageType == TypeRead {
		return ReadNotice{User: w.Username, Seq: w.Seq}, nil
	}
	return TypingNotice{User: w.Username}, nil
}

func decodeChat(w *Wire) (Event, error) {
	var to Recipient
	switch {
	case w.ToGroup != "":
		// A protocol-1 group delivery names its member in toUsername too,
		// as the original server did.
		to = ToGroup(w.ToGroup)
	case w.ToUsername != "":
		to = ToUser(w.ToUsername)
	case w.ToName != "":
		to = Recipient{Name: w.ToName, Group: w.ForGroup != nil && *w.ForGroup}
	default:
		return nil, fmt.Errorf("%w: CHAT_MESSAGE without toUsername, toGroup or toName", ErrInvalidMessage)
	}
	sent, err := decodeSentAt(w.SentAt)
	if err != nil {
		return nil, err
	}
	return ChatMessage{From: w.FromName, To: to, Content: w.MessageContent, SentAt: sent, ID: w.id(), Seq: w.Seq, Stamp: w.Time}, nil
}

func decodeSentAt(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: sentAt: %v", ErrMalformed, err)
		}
		return s, nil
	case '{': // java.time.Instant as the original client's Gson wrote it
		var inst struct {
			Seconds int64 `json:"seconds"`
			Nanos   int64 `json:"nanos"`
		}
		if err := json.Unmarshal(raw, &inst); err != nil {
			return "", fmt.Errorf("%w: sentAt: %v", ErrMalformed, err)
		}
		return time.Unix(inst.Seconds, inst.Nanos).Local().Format(TimeLayout), nil
	default:
		return "", fmt.Errorf("%w: sentAt must be a string, got %s", ErrMalformed, raw)
	}
}

// The shapes the client sends, one struct each so that field order and
// presence match DESIGN.md exactly.
type (
	loginWire struct {
		MessageType MessageType `json:"messageType"`
		Username    string      `json:"username"`
	}
	groupWire struct {
		MessageType MessageType `json:"messageType"`
		Group       string      `json:"group"`
	}
	chatWire struct {
		MessageType    MessageType `json:"messageType"`
		FromName       string      `json:"fromName"`
		ToUsername     string      `json:"toUsername,omitempty"`
		ToGroup        string      `json:"toGroup,omitempty"`
		MessageContent string      `json:"messageContent"`
		SentAt         string      `json:"sentAt"`
	}
	errorWire struct {
		MessageType  MessageType `json:"messageType"`
		ErrorMessage string      `json:"errorMessage"`
	}
	aliveWire struct {
		MessageType MessageType `json:"messageType"`
	}
)

// Encode returns the v1 JSON object for a wire event, without the trailing
// newline. CHAT_MESSAGE is written in the current shape (toUsername or
// toGroup). Local events (ProtocolError, Disconnected) cannot be encoded.
func Encode(ev Event) ([]byte, error) {
	var v any
	switch ev := ev.(type) {
	case Login:
		if ev.Username == "" {
			return nil, fmt.Errorf("%w: empty username", ErrInvalidMessage)
		}
		v = loginWire{TypeLogin, ev.Username}
	case JoinGroup:
		if ev.Group == "" {
			return nil, fmt.Errorf("%w: empty group", ErrInvalidMessage)
		}
		v = groupWire{TypeJoinGroup, ev.Group}
	case LeaveGroup:
		if ev.Group == "" {
			return nil, fmt.Errorf("%w: empty group", ErrInvalidMessage)
		}
		v = groupWire{TypeLeaveGroup, ev.Group}
	case ChatMessage:
		if ev.To.Name == "" {
			return nil, fmt.Errorf("%w: empty recipient", ErrInvalidMessage)
		}
		w := chatWire{MessageType: TypeChatMessage, FromName: ev.From, MessageContent: ev.Content, SentAt: ev.SentAt}
		if ev.To.Group {
			w.ToGroup = ev.To.Name
		} else {
			w.ToUsername = ev.To.Name
		}
		v = w
	case ErrorMessage:
		v = errorWire{TypeError, ev.Message}
	case Alive:
		v = aliveWire{TypeAlive}
	default:
		return nil, fmt.Errorf("client: %T is not a wire message", ev)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
