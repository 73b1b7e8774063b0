package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
)

// The messages' types, codes and JSON shapes are internal/protocol's; here
// the client decodes what a node sends into events (protocol.FromNode) and
// encodes the protocol-1 messages.

// Decoding errors. Decode wraps one of them, so callers can test with
// errors.Is and still print a message that says what was wrong.
var (
	ErrMalformed      = errors.New("malformed message")
	ErrMissingType    = errors.New("missing messageType")
	ErrUnknownType    = errors.New("unknown messageType")
	ErrInvalidMessage = errors.New("invalid message")
)

// idOf returns the "id" field of w if it is a string.
func idOf(w *protocol.FromNode) string {
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
	var w protocol.FromNode
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return decodeWire(&w)
}

// decodeWire makes the event of a decoded line with the decoder of its
// message type.
func decodeWire(w *protocol.FromNode) (Event, error) {
	id := idOf(w)
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
type wireDecoder func(w *protocol.FromNode, id string) (Event, error)

// wireDecoders holds the decoder of every message type a server sends.
var wireDecoders = map[protocol.Type]wireDecoder{
	protocol.TypeLogin:      decodeLoginWire,
	protocol.TypeJoinGroup:  decodeGroupWire,
	protocol.TypeLeaveGroup: decodeGroupWire,
	protocol.TypeChatMessage: func(w *protocol.FromNode, _ string) (Event, error) {
		return decodeChat(w)
	},
	protocol.TypeError: func(w *protocol.FromNode, id string) (Event, error) {
		return ErrorMessage{Message: w.ErrorMessage, Code: w.Code, ID: id}, nil
	},
	protocol.TypeAlive: func(_ *protocol.FromNode, id string) (Event, error) {
		return Alive{ID: id}, nil
	},
	protocol.TypeNotice: func(w *protocol.FromNode, _ string) (Event, error) {
		return Notice{Code: w.Code, Node: w.Node, Message: w.Message}, nil
	},
	protocol.TypeStored:      decodeStoredWire,
	protocol.TypeRegister:    decodeAccountWire,
	protocol.TypeSetPassword: decodeAccountWire,
	protocol.TypeInvite: func(w *protocol.FromNode, id string) (Event, error) {
		return Invite{Group: w.Group, Username: w.Username, ID: id}, nil
	},
	protocol.TypeWho: func(w *protocol.FromNode, id string) (Event, error) {
		return Who{Users: w.Users, Truncated: w.Truncated, ID: id}, nil
	},
	protocol.TypeGroups: func(w *protocol.FromNode, id string) (Event, error) {
		return Groups{Groups: w.Groups, Truncated: w.Truncated, ID: id}, nil
	},
	protocol.TypeHistory: decodeHistoryWire,
	protocol.TypeAway: func(w *protocol.FromNode, id string) (Event, error) {
		return Away{User: w.Username, Message: w.Message, Since: w.Since, ID: id}, nil
	},
	protocol.TypeWhois: func(w *protocol.FromNode, id string) (Event, error) {
		return Whois{User: w.Username, Online: w.Online, Node: w.Node, Since: w.Since, Away: w.Away, AwaySince: w.AwaySince, ID: id}, nil
	},
	protocol.TypeNames: func(w *protocol.FromNode, id string) (Event, error) {
		return Names{Group: w.Group, Members: w.Members, Truncated: w.Truncated, Next: w.Next, ID: id}, nil
	},
	protocol.TypeRead:   decodeNoticeWire,
	protocol.TypeTyping: decodeNoticeWire,
}

// decodeLoginWire decodes a LOGIN answer, which names the user.
func decodeLoginWire(w *protocol.FromNode, id string) (Event, error) {
	if w.Username == "" {
		return nil, fmt.Errorf("%w: LOGIN without username", ErrInvalidMessage)
	}
	return Login{Username: w.Username, Version: w.Version, Node: w.Node, ID: id, Away: w.Away, Features: w.Features, Nodes: w.Nodes, MaxMessageBytes: w.MaxMessageBytes}, nil
}

// decodeGroupWire decodes a JOIN_GROUP or LEAVE_GROUP answer, which names
// the group.
func decodeGroupWire(w *protocol.FromNode, id string) (Event, error) {
	if w.Group == "" {
		return nil, fmt.Errorf("%w: %s without group", ErrInvalidMessage, w.MessageType)
	}
	if w.MessageType == protocol.TypeJoinGroup {
		return JoinGroup{Group: w.Group, ID: id, InviteOnly: w.InviteOnly}, nil
	}
	return LeaveGroup{Group: w.Group, ID: id}, nil
}

// decodeStoredWire decodes STORED, which names the stored message.
func decodeStoredWire(w *protocol.FromNode, id string) (Event, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: STORED without id", ErrInvalidMessage)
	}
	return Stored{ID: id, Seq: w.Seq, Stamp: w.Time}, nil
}

// decodeAccountWire decodes a REGISTER or SET_PASSWORD answer.
func decodeAccountWire(w *protocol.FromNode, id string) (Event, error) {
	return Account{Type: w.MessageType, Username: w.Username, ID: id}, nil
}

// decodeHistoryWire decodes a HISTORY answer and its messages.
func decodeHistoryWire(w *protocol.FromNode, id string) (Event, error) {
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
func decodeNoticeWire(w *protocol.FromNode, _ string) (Event, error) {
	if w.Username == "" {
		return nil, fmt.Errorf("%w: %s without username", ErrInvalidMessage, w.MessageType)
	}
	if w.MessageType == protocol.TypeRead {
		return ReadNotice{User: w.Username, Seq: w.Seq}, nil
	}
	return TypingNotice{User: w.Username}, nil
}

func decodeChat(w *protocol.FromNode) (Event, error) {
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
	return ChatMessage{From: w.FromName, To: to, Content: w.MessageContent, SentAt: sent, ID: idOf(w), Seq: w.Seq, Stamp: w.Time}, nil
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
		return time.Unix(inst.Seconds, inst.Nanos).Local().Format(protocol.TimeLayout), nil
	default:
		return "", fmt.Errorf("%w: sentAt must be a string, got %s", ErrMalformed, raw)
	}
}

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
		v = protocol.LoginV1{MessageType: protocol.TypeLogin, Username: ev.Username}
	case JoinGroup:
		if ev.Group == "" {
			return nil, fmt.Errorf("%w: empty group", ErrInvalidMessage)
		}
		v = protocol.GroupV1{MessageType: protocol.TypeJoinGroup, Group: ev.Group}
	case LeaveGroup:
		if ev.Group == "" {
			return nil, fmt.Errorf("%w: empty group", ErrInvalidMessage)
		}
		v = protocol.GroupV1{MessageType: protocol.TypeLeaveGroup, Group: ev.Group}
	case ChatMessage:
		if ev.To.Name == "" {
			return nil, fmt.Errorf("%w: empty recipient", ErrInvalidMessage)
		}
		w := protocol.ChatV1{MessageType: protocol.TypeChatMessage, FromName: ev.From, MessageContent: ev.Content, SentAt: ev.SentAt}
		if ev.To.Group {
			w.ToGroup = ev.To.Name
		} else {
			w.ToUsername = ev.To.Name
		}
		v = w
	case ErrorMessage:
		v = protocol.ErrorV1{MessageType: protocol.TypeError, ErrorMessage: ev.Message}
	case Alive:
		v = protocol.AliveV1{MessageType: protocol.TypeAlive}
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
