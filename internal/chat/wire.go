package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// The client protocol's message types, codes, limits and JSON shapes are
// declared in internal/protocol. Here a node decodes and checks what a
// client sends (Decode) and encodes its answers; Request and Error are the
// node's own forms of a request and a refusal.

// maxReplyBytes cuts a WHO, GROUPS, HISTORY or NAMES answer line to this
// size (it is marked truncated).
const maxReplyBytes = 512 << 10

// Error is a refusal sent to a client as ERROR.
type Error struct {
	Code    protocol.Code
	Message string
	// ID is the request's id (protocol 2), if it had one.
	ID string
	// Close says the connection ends after this error.
	Close bool
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func errorf(code protocol.Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Recipient is where a chat message goes.
type Recipient struct {
	Name  string
	Group bool
}

func (r Recipient) String() string {
	if r.Group {
		return "group " + quote(r.Name)
	}
	return "user " + quote(r.Name)
}

// Request is one decoded client line.
type Request struct {
	Type     protocol.Type
	Version  int    // LOGIN: the protocol asked for (1 if absent)
	Username string // LOGIN
	Password string // LOGIN (protocol 2)
	Group    string // JOIN_GROUP, LEAVE_GROUP
	To       Recipient
	Content  string
	ID       string   // protocol 2: the request's id (for CHAT_MESSAGE the message id)
	IDs      []string // ACK
	Limit    int      // HISTORY, GROUPS, NAMES
	After    string   // GROUPS: the page after this group name; NAMES: after this cursor
	Before   int64    // HISTORY: messages older than this sequence
	Seq      int64    // READ: read up to this sequence; ACK_UPTO: acknowledged up to it
	Features []string // LOGIN (protocol 2): the notices asked for
	// Leaving (LOGIN, protocol 2): the node the client has just left
	// because it stopped answering or said it cannot serve; the user's
	// presence there is replaced (FeatureFailover).
	Leaving int64
	// InviteOnly (JOIN_GROUP, protocol 2) creates the group invite-only.
	InviteOnly bool
}

// Decode parses and checks one line from a client (without its newline).
// Every refusal is an *Error with a code; Decode never panics. A refused
// request comes back with the fields decoded before the refusal (a
// LOGIN's version tells which protocol the refusal speaks).
func Decode(line []byte) (Request, *Error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Request{}, errorf(protocol.CodeBadJSON, "malformed JSON: expected one object per line")
	}
	var in protocol.FromClient
	if err := json.Unmarshal(line, &in); err != nil {
		return Request{}, errorf(protocol.CodeBadJSON, "malformed JSON: %s", jsonProblem(err))
	}
	if in.MessageType == "" {
		return Request{}, errorf(protocol.CodeUnknownType, "missing messageType")
	}
	r := Request{Type: protocol.Type(in.MessageType), ID: in.ID}
	if len(r.ID) > protocol.MaxRequestID || !printable(r.ID) {
		return Request{}, errorf(protocol.CodeBadRequest, "id must be at most %d printable bytes", protocol.MaxRequestID)
	}
	decode, ok := decoders[r.Type]
	if !ok {
		return withID(r, errorf(protocol.CodeUnknownType, "unknown messageType %s", quote(string(r.Type))))
	}
	if err := decode(&r, &in); err != nil {
		return withID(r, err)
	}
	return r, nil
}

// A decoder fills r with the fields of its request type from in, checking
// them; it stops at the first refusal, leaving what it filled before.
type decoder func(r *Request, in *protocol.FromClient) *Error

// decoders holds the decoder of every request type a client may send.
var decoders = map[protocol.Type]decoder{
	protocol.TypeAlive:       decodeNothing,
	protocol.TypeWho:         decodeNothing,
	protocol.TypeLogin:       decodeLogin,
	protocol.TypeJoinGroup:   decodeGroup,
	protocol.TypeLeaveGroup:  decodeGroup,
	protocol.TypeRegister:    decodeAccount,
	protocol.TypeSetPassword: decodeAccount,
	protocol.TypeInvite:      decodeInvite,
	protocol.TypeChatMessage: decodeChat,
	protocol.TypeHistory:     decodeHistory,
	protocol.TypeAck:         decodeAck,
	protocol.TypeAckUpTo:     decodeAckUpTo,
	protocol.TypeGroups:      decodeGroups,
	protocol.TypeAway:        decodeAway,
	protocol.TypeWhois:       decodeWhois,
	protocol.TypeNames:       decodeNames,
	protocol.TypeRead:        decodeNotice,
	protocol.TypeTyping:      decodeNotice,
}

// decodeNothing decodes a request with no fields beyond its type and id
// (ALIVE, WHO).
func decodeNothing(*Request, *protocol.FromClient) *Error { return nil }

// decodeLogin decodes LOGIN: a name, a password, the protocol version and
// the features asked for.
func decodeLogin(r *Request, in *protocol.FromClient) *Error {
	r.Username, r.Password = in.Username, in.Password
	v, err := decodeVersion(in.Version)
	if err != nil {
		return err
	}
	r.Version = v
	if len(in.Features) > protocol.MaxFeatures {
		return errorf(protocol.CodeBadRequest, "at most %d features", protocol.MaxFeatures)
	}
	r.Features, r.Leaving = in.Features, in.Leaving
	if err := CheckName("username", r.Username); err != nil {
		return err
	}
	if len(r.Password) > protocol.MaxPassword {
		return errorf(protocol.CodeBadRequest, "password longer than %d bytes", protocol.MaxPassword)
	}
	return nil
}

// decodeGroup decodes JOIN_GROUP and LEAVE_GROUP: a group name, and for
// JOIN_GROUP whether a new group is invite-only.
func decodeGroup(r *Request, in *protocol.FromClient) *Error {
	r.Group = in.Group
	if err := CheckName("group", r.Group); err != nil {
		return err
	}
	if r.Type == protocol.TypeJoinGroup {
		switch string(bytes.TrimSpace(in.InviteOnly)) {
		case "", "null", "false":
		case "true":
			r.InviteOnly = true
		default:
			return errorf(protocol.CodeBadRequest, "inviteOnly must be true or false")
		}
	}
	return nil
}

// decodeAccount decodes REGISTER (a name and a password) and SET_PASSWORD
// (a password).
func decodeAccount(r *Request, in *protocol.FromClient) *Error {
	r.Username, r.Password = in.Username, in.Password
	if r.Type == protocol.TypeRegister {
		if err := CheckName("username", r.Username); err != nil {
			return err
		}
	}
	switch {
	case r.Password == "":
		return errorf(protocol.CodeBadRequest, "%s needs a password", r.Type)
	case len(r.Password) > protocol.MaxPassword:
		return errorf(protocol.CodeBadRequest, "password longer than %d bytes", protocol.MaxPassword)
	}
	return nil
}

// decodeInvite decodes INVITE: a group and the user invited to it.
func decodeInvite(r *Request, in *protocol.FromClient) *Error {
	r.Group, r.Username = in.Group, in.Username
	if err := CheckName("group", r.Group); err != nil {
		return err
	}
	return CheckName("username", r.Username)
}

// decodeChat decodes CHAT_MESSAGE: a recipient, the text, and in protocol
// 2 the message's id (a UUID).
func decodeChat(r *Request, in *protocol.FromClient) *Error {
	to, err := decodeRecipient(in)
	if err != nil {
		return err
	}
	r.To = to
	r.Content = in.MessageContent
	switch {
	case r.Content == "":
		return errorf(protocol.CodeBadRequest, "empty messageContent")
	case len(r.Content) > protocol.MaxContentBytes:
		return errorf(protocol.CodeTooLong, "message is %d bytes, over the limit of %d bytes per message: nothing of it was stored (shorten it or send it in parts)", len(r.Content), protocol.MaxContentBytes)
	}
	if r.ID != "" {
		if id, err := uuid.Parse(r.ID); err != nil || id.String() != r.ID {
			return errorf(protocol.CodeBadRequest, "id must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower case)")
		}
	}
	return nil
}

// decodeHistory decodes HISTORY: a conversation (user or group), how many
// messages, and older than which sequence.
func decodeHistory(r *Request, in *protocol.FromClient) *Error {
	to, err := decodeRecipient(in)
	if err != nil {
		return err
	}
	r.To = to
	r.Limit, r.Before = in.Limit, in.Before
	if r.Limit < 0 || r.Before < 0 {
		return errorf(protocol.CodeBadRequest, "limit and before must not be negative")
	}
	return nil
}

// decodeAck decodes ACK: the ids of the messages received.
func decodeAck(r *Request, in *protocol.FromClient) *Error {
	if len(in.IDs) == 0 || len(in.IDs) > protocol.MaxAckIDs {
		return errorf(protocol.CodeBadRequest, "ACK needs 1 to %d message ids in \"ids\"", protocol.MaxAckIDs)
	}
	for _, id := range in.IDs {
		if id == "" || len(id) > protocol.MaxRequestID {
			return errorf(protocol.CodeBadRequest, "message ids are 1 to %d bytes", protocol.MaxRequestID)
		}
	}
	r.IDs = in.IDs
	return nil
}

// decodeAckUpTo decodes ACK_UPTO: the sequence acknowledged up to. The
// checks are the session's (ackUpTo): a session without the feature is
// refused whatever the fields say.
func decodeAckUpTo(r *Request, in *protocol.FromClient) *Error {
	r.Seq = in.Seq
	return nil
}

// decodeGroups decodes GROUPS: a page of groups after a name.
func decodeGroups(r *Request, in *protocol.FromClient) *Error {
	r.After, r.Limit = in.After, in.Limit
	if r.Limit < 0 {
		return errorf(protocol.CodeBadRequest, "limit must not be negative")
	}
	return nil
}

// decodeAway decodes AWAY: the away message (empty: back).
func decodeAway(r *Request, in *protocol.FromClient) *Error {
	r.Content = in.Message
	switch {
	case len(r.Content) > store.MaxAwayLen:
		return errorf(protocol.CodeTooLong, "away message is %d bytes, over the limit of %d", len(r.Content), store.MaxAwayLen)
	case !utf8.ValidString(r.Content) || !printable(r.Content):
		return errorf(protocol.CodeBadRequest, "away message has unprintable characters")
	}
	return nil
}

// decodeWhois decodes WHOIS: a user name.
func decodeWhois(r *Request, in *protocol.FromClient) *Error {
	r.Username = in.Username
	return CheckName("username", r.Username)
}

// decodeNames decodes NAMES: a group, and a page of its members after a
// cursor.
func decodeNames(r *Request, in *protocol.FromClient) *Error {
	r.Group, r.After, r.Limit = in.Group, in.After, in.Limit
	if err := CheckName("group", r.Group); err != nil {
		return err
	}
	if r.Limit < 0 {
		return errorf(protocol.CodeBadRequest, "limit must not be negative")
	}
	_, err := namesCursor(r.After)
	return err
}

// decodeNotice decodes READ (a user, and the sequence read up to) and
// TYPING (a user).
func decodeNotice(r *Request, in *protocol.FromClient) *Error {
	to, err := decodeRecipient(in)
	if err != nil {
		return err
	}
	if to.Group {
		return errorf(protocol.CodeBadRequest, "%s is for direct conversations: give toUsername", r.Type)
	}
	r.To, r.Seq = to, in.Seq
	if r.Type == protocol.TypeRead && r.Seq <= 0 {
		return errorf(protocol.CodeBadRequest, "READ needs the sequence read up to in \"seq\"")
	}
	return nil
}

func withID(r Request, err *Error) (Request, *Error) {
	err.ID = r.ID
	return r, err
}

// decodeVersion reads LOGIN's "version": absent or 1 is protocol 1, 2 is
// protocol 2 (a number or a string of one).
func decodeVersion(raw json.RawMessage) (int, *Error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "1", `"1"`:
		return protocol.V1, nil
	case "2", `"2"`:
		return protocol.V2, nil
	}
	return 0, errorf(protocol.CodeBadRequest, "unsupported protocol version %s (this server speaks 1 and 2)", truncate(string(raw), 16))
}

func decodeRecipient(in *protocol.FromClient) (Recipient, *Error) {
	var to Recipient
	switch {
	case in.ToUsername != "" && in.ToGroup != "":
		return to, errorf(protocol.CodeBadRequest, "give toUsername or toGroup, not both")
	case in.ToUsername != "":
		to = Recipient{Name: in.ToUsername}
	case in.ToGroup != "":
		to = Recipient{Name: in.ToGroup, Group: true}
	case in.ToName != "": // the older shape
		to = Recipient{Name: in.ToName}
		switch string(bytes.TrimSpace(in.ForGroup)) {
		case "", "null", "false":
		case "true":
			to.Group = true
		default:
			return to, errorf(protocol.CodeBadRequest, "forGroup must be true or false")
		}
	default:
		return to, errorf(protocol.CodeBadRequest, "no recipient: give toUsername or toGroup")
	}
	kind := "username"
	if to.Group {
		kind = "group"
	}
	if err := CheckName(kind, to.Name); err != nil {
		return to, err
	}
	return to, nil
}

// CheckName enforces the name rules: 1 to 32 printable characters (spaces
// inside allowed, not at either end). Names are otherwise stored and shown
// verbatim, whatever they look like.
func CheckName(kind, name string) *Error {
	switch n := utf8.RuneCountInString(name); {
	case name == "":
		return errorf(protocol.CodeBadName, "empty %s", kind)
	case n > protocol.MaxNameRunes:
		return errorf(protocol.CodeBadName, "%s is %d characters, over the limit of %d", kind, n, protocol.MaxNameRunes)
	case !utf8.ValidString(name) || !printable(name):
		return errorf(protocol.CodeBadName, "%s %s has unprintable characters", kind, quote(name))
	case strings.TrimSpace(name) != name:
		return errorf(protocol.CodeBadName, "%s %s starts or ends with a space", kind, quote(name))
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// jsonProblem describes a decoding error without echoing the client's
// bytes at length.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s must be %s, not %s", quote(te.Field), te.Type, te.Value)
	}
	return truncate(err.Error(), 120)
}

func quote(s string) string { return fmt.Sprintf("%q", truncate(s, 64)) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// encode returns v as one line with its newline.
func encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings, numbers and slices of them: cannot fail.
		panic(fmt.Sprintf("chat: encode %T: %v", v, err))
	}
	return buf.Bytes()
}

func encodeError(version int, e *Error) []byte {
	if version >= protocol.V2 {
		return encode(protocol.ErrorV2{MessageType: protocol.TypeError, Code: e.Code, ErrorMessage: e.Message, ID: e.ID})
	}
	return encode(protocol.ErrorV1{MessageType: protocol.TypeError, ErrorMessage: e.Message})
}

// formatSentAt is "sentAt" in the node's local time zone.
func formatSentAt(t time.Time) string { return t.Local().Format(protocol.TimeLayout) }

// formatTime is protocol 2's "time", "since" and "awaySince".
func formatTime(t time.Time) string { return t.UTC().Format(protocol.StampLayout) }
