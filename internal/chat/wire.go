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

	"github.com/ringchat/ringchat/internal/store"
)

// Message types on the client port. The first six are protocol 1 (the
// original RingChat client); the rest exist only in protocol 2 and a
// protocol-1 connection never receives them.
const (
	TypeLogin      = "LOGIN"
	TypeJoinGroup  = "JOIN_GROUP"
	TypeLeaveGroup = "LEAVE_GROUP"
	TypeChat       = "CHAT_MESSAGE"
	TypeError      = "ERROR"
	TypeAlive      = "ALIVE"

	TypeStored      = "STORED"
	TypeAck         = "ACK"
	TypeWho         = "WHO"
	TypeGroups      = "GROUPS"
	TypeHistory     = "HISTORY"
	TypeRegister    = "REGISTER"
	TypeSetPassword = "SET_PASSWORD"
	TypeInvite      = "INVITE"
	TypeAway        = "AWAY"
	TypeWhois       = "WHOIS"
	TypeNames       = "NAMES"
	TypeRead        = "READ"
	TypeTyping      = "TYPING"
)

// Features a protocol-2 LOGIN may ask for ("features"): the notices the
// session receives beyond the replies to its requests. Unknown ones are
// ignored, so a client may name features a node does not have yet.
const (
	FeatureAway   = "away"   // AWAY of a user this session writes to
	FeatureRead   = "read"   // READ: a recipient has read this session's messages
	FeatureTyping = "typing" // TYPING: someone is writing to this session's user
	// FeatureLimits: the LOGIN answer says the largest message the node
	// takes ("maxMessageBytes"), for a client to refuse a longer one
	// before sending it.
	FeatureLimits = "limits"
)

// MaxFeatures bounds the features one LOGIN names.
const MaxFeatures = 16

// TimeLayout is the layout of "sentAt" (the original client's format).
const TimeLayout = "Jan 2, 2006, 3:04:05 PM"

// Protocol versions.
const (
	V1 = 1
	V2 = 2
)

// Limits of the protocol (DESIGN.md, "Security and bad input").
const (
	MaxNameRunes    = 32        // user and group names
	MaxContentBytes = 4 << 10   // a message's text
	MaxLineBytes    = 64 << 10  // one line from a client, without its newline
	MaxPassword     = 256       // bytes of a password
	MaxRequestID    = 64        // bytes of a v2 request id
	MaxAckIDs       = 1000      // message ids in one ACK
	MaxHistory      = 100       // messages in one HISTORY reply
	maxReplyBytes   = 512 << 10 // a WHO/GROUPS/HISTORY reply line is cut to this
)

// Code is a stable error code of a protocol-2 ERROR.
type Code string

// Error codes. They never change meaning; clients may switch on them.
const (
	CodeBadJSON        Code = "BAD_JSON"      // the line is not a JSON object
	CodeUnknownType    Code = "UNKNOWN_TYPE"  // messageType missing or not known (to this protocol version)
	CodeBadRequest     Code = "BAD_REQUEST"   // a field is missing or malformed
	CodeBadName        Code = "BAD_NAME"      // empty, too long or unprintable user or group name
	CodeTooLong        Code = "TOO_LONG"      // messageContent over 4 KiB
	CodeLineTooLong    Code = "LINE_TOO_LONG" // a line over 64 KiB (the connection closes)
	CodeNotLoggedIn    Code = "NOT_LOGGED_IN" // a command before LOGIN
	CodeLoggedIn       Code = "ALREADY_LOGGED_IN"
	CodeUserOnline     Code = "USER_ONLINE" // the user is logged in on another connection
	CodePasswordNeeded Code = "PASSWORD_REQUIRED"
	CodeBadPassword    Code = "BAD_PASSWORD"
	CodePasswordNotSet Code = "PASSWORD_NOT_SET" // a password for a name that has none: set one from a session, or by the operator
	CodeNoAccount      Code = "NO_ACCOUNT"       // password mode: the name has no account (REGISTER it)
	CodeNameTaken      Code = "NAME_TAKEN"       // REGISTER of a name in use
	CodeThrottled      Code = "LOGIN_THROTTLED"  // too many failed logins for the name or from the address: wait
	CodeNotInvited     Code = "NOT_INVITED"      // JOIN_GROUP of an invite-only group without an invitation
	CodeUnknownUser    Code = "UNKNOWN_USER"
	CodeUnknownGroup   Code = "UNKNOWN_GROUP"
	CodeNotMember      Code = "NOT_MEMBER"
	CodeRateLimited    Code = "RATE_LIMITED" // the line was dropped: slow down
	CodeFlood          Code = "FLOOD"        // too many lines over the rate (the connection closes)
	CodeIdle           Code = "IDLE_TIMEOUT" // nothing received for too long (the connection closes)
	CodeServerFull     Code = "SERVER_FULL"  // too many clients (the connection closes)
	CodeSlowConsumer   Code = "SLOW_CONSUMER"
	CodeBusy           Code = "BUSY"        // the node's queue is full: send again later
	CodeUnavailable    Code = "UNAVAILABLE" // the store failed: try again
	CodeNotStored      Code = "NOT_STORED"  // the store refuses this message itself (it works for others): not delivered, do not send it again as it is
	CodeShutdown       Code = "SHUTTING_DOWN"
)

// Error is a refusal sent to a client as ERROR.
type Error struct {
	Code    Code
	Message string
	// ID is the request's id (protocol 2), if it had one.
	ID string
	// Close says the connection ends after this error.
	Close bool
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func errorf(code Code, format string, args ...any) *Error {
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
	Type     string
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
	Seq      int64    // READ: read up to this sequence
	Features []string // LOGIN (protocol 2): the notices asked for
	// Leaving (LOGIN, protocol 2): the node the client has just left
	// because it stopped answering or said it cannot serve; the user's
	// presence there is replaced (FeatureFailover).
	Leaving int64
	// InviteOnly (JOIN_GROUP, protocol 2) creates the group invite-only.
	InviteOnly bool
}

// inbound is the union of every field a client may send. Fields a type
// does not use are ignored, as is anything not listed (the original client
// sends "sentAt" as an object; we stamp our own).
type inbound struct {
	MessageType    *string         `json:"messageType"`
	Username       string          `json:"username"`
	Group          string          `json:"group"`
	ToUsername     string          `json:"toUsername"`
	ToGroup        string          `json:"toGroup"`
	ToName         string          `json:"toName"`
	ForGroup       json.RawMessage `json:"forGroup"`
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

// Decode parses and checks one line from a client (without its newline).
// Every refusal is an *Error with a code; Decode never panics. A refused
// request comes back with the fields decoded before the refusal (a
// LOGIN's version tells which protocol the refusal speaks).
func Decode(line []byte) (Request, *Error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Request{}, errorf(CodeBadJSON, "malformed JSON: expected one object per line")
	}
	var in inbound
	if err := json.Unmarshal(line, &in); err != nil {
		return Request{}, errorf(CodeBadJSON, "malformed JSON: %s", jsonProblem(err))
	}
	if in.MessageType == nil || *in.MessageType == "" {
		return Request{}, errorf(CodeUnknownType, "missing messageType")
	}
	r := Request{Type: *in.MessageType, ID: in.ID}
	if len(r.ID) > MaxRequestID || !printable(r.ID) {
		return Request{}, errorf(CodeBadRequest, "id must be at most %d printable bytes", MaxRequestID)
	}
	decode, ok := decoders[r.Type]
	if !ok {
		return withID(r, errorf(CodeUnknownType, "unknown messageType %s", quote(r.Type)))
	}
	if err := decode(&r, &in); err != nil {
		return withID(r, err)
	}
	return r, nil
}

// A decoder fills r with the fields of its request type from in, checking
// them; it stops at the first refusal, leaving what it filled before.
type decoder func(r *Request, in *inbound) *Error

// decoders holds the decoder of every request type a client may send.
var decoders = map[string]decoder{
	TypeAlive:       decodeNothing,
	TypeWho:         decodeNothing,
	TypeLogin:       decodeLogin,
	TypeJoinGroup:   decodeGroup,
	TypeLeaveGroup:  decodeGroup,
	TypeRegister:    decodeAccount,
	TypeSetPassword: decodeAccount,
	TypeInvite:      decodeInvite,
	TypeChat:        decodeChat,
	TypeHistory:     decodeHistory,
	TypeAck:         decodeAck,
	TypeGroups:      decodeGroups,
	TypeAway:        decodeAway,
	TypeWhois:       decodeWhois,
	TypeNames:       decodeNames,
	TypeRead:        decodeNotice,
	TypeTyping:      decodeNotice,
}

// decodeNothing decodes a request with no fields beyond its type and id
// (ALIVE, WHO).
func decodeNothing(*Request, *inbound) *Error { return nil }

// decodeLogin decodes LOGIN: a name, a password, the protocol version and
// the features asked for.
func decodeLogin(r *Request, in *inbound) *Error {
	r.Username, r.Password = in.Username, in.Password
	v, err := decodeVersion(in.Version)
	if err != nil {
		return err
	}
	r.Version = v
	if len(in.Features) > MaxFeatures {
		return errorf(CodeBadRequest, "at most %d features", MaxFeatures)
	}
	r.Features, r.Leaving = in.Features, in.Leaving
	if err := CheckName("username", r.Username); err != nil {
		return err
	}
	if len(r.Password) > MaxPassword {
		return errorf(CodeBadRequest, "password longer than %d bytes", MaxPassword)
	}
	return nil
}

// decodeGroup decodes JOIN_GROUP and LEAVE_GROUP: a group name, and for
// JOIN_GROUP whether a new group is invite-only.
func decodeGroup(r *Request, in *inbound) *Error {
	r.Group = in.Group
	if err := CheckName("group", r.Group); err != nil {
		return err
	}
	if r.Type == TypeJoinGroup {
		switch string(bytes.TrimSpace(in.InviteOnly)) {
		case "", "null", "false":
		case "true":
			r.InviteOnly = true
		default:
			return errorf(CodeBadRequest, "inviteOnly must be true or false")
		}
	}
	return nil
}

// decodeAccount decodes REGISTER (a name and a password) and SET_PASSWORD
// (a password).
func decodeAccount(r *Request, in *inbound) *Error {
	r.Username, r.Password = in.Username, in.Password
	if r.Type == TypeRegister {
		if err := CheckName("username", r.Username); err != nil {
			return err
		}
	}
	switch {
	case r.Password == "":
		return errorf(CodeBadRequest, "%s needs a password", r.Type)
	case len(r.Password) > MaxPassword:
		return errorf(CodeBadRequest, "password longer than %d bytes", MaxPassword)
	}
	return nil
}

// decodeInvite decodes INVITE: a group and the user invited to it.
func decodeInvite(r *Request, in *inbound) *Error {
	r.Group, r.Username = in.Group, in.Username
	if err := CheckName("group", r.Group); err != nil {
		return err
	}
	return CheckName("username", r.Username)
}

// decodeChat decodes CHAT_MESSAGE: a recipient, the text, and in protocol
// 2 the message's id (a UUID).
func decodeChat(r *Request, in *inbound) *Error {
	to, err := decodeRecipient(in)
	if err != nil {
		return err
	}
	r.To = to
	r.Content = in.MessageContent
	switch {
	case r.Content == "":
		return errorf(CodeBadRequest, "empty messageContent")
	case len(r.Content) > MaxContentBytes:
		return errorf(CodeTooLong, "message is %d bytes, over the limit of %d bytes per message: nothing of it was stored (shorten it or send it in parts)", len(r.Content), MaxContentBytes)
	}
	if r.ID != "" {
		if id, err := uuid.Parse(r.ID); err != nil || id.String() != r.ID {
			return errorf(CodeBadRequest, "id must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower case)")
		}
	}
	return nil
}

// decodeHistory decodes HISTORY: a conversation (user or group), how many
// messages, and older than which sequence.
func decodeHistory(r *Request, in *inbound) *Error {
	to, err := decodeRecipient(in)
	if err != nil {
		return err
	}
	r.To = to
	r.Limit, r.Before = in.Limit, in.Before
	if r.Limit < 0 || r.Before < 0 {
		return errorf(CodeBadRequest, "limit and before must not be negative")
	}
	return nil
}

// decodeAck decodes ACK: the ids of the messages received.
func decodeAck(r *Request, in *inbound) *Error {
	if len(in.IDs) == 0 || len(in.IDs) > MaxAckIDs {
		return errorf(CodeBadRequest, "ACK needs 1 to %d message ids in \"ids\"", MaxAckIDs)
	}
	for _, id := range in.IDs {
		if id == "" || len(id) > MaxRequestID {
			return errorf(CodeBadRequest, "message ids are 1 to %d bytes", MaxRequestID)
		}
	}
	r.IDs = in.IDs
	return nil
}

// decodeGroups decodes GROUPS: a page of groups after a name.
func decodeGroups(r *Request, in *inbound) *Error {
	r.After, r.Limit = in.After, in.Limit
	if r.Limit < 0 {
		return errorf(CodeBadRequest, "limit must not be negative")
	}
	return nil
}

// decodeAway decodes AWAY: the away message (empty: back).
func decodeAway(r *Request, in *inbound) *Error {
	r.Content = in.Message
	switch {
	case len(r.Content) > store.MaxAwayLen:
		return errorf(CodeTooLong, "away message is %d bytes, over the limit of %d", len(r.Content), store.MaxAwayLen)
	case !utf8.ValidString(r.Content) || !printable(r.Content):
		return errorf(CodeBadRequest, "away message has unprintable characters")
	}
	return nil
}

// decodeWhois decodes WHOIS: a user name.
func decodeWhois(r *Request, in *inbound) *Error {
	r.Username = in.Username
	return CheckName("username", r.Username)
}

// decodeNames decodes NAMES: a group, and a page of its members after a
// cursor.
func decodeNames(r *Request, in *inbound) *Error {
	r.Group, r.After, r.Limit = in.Group, in.After, in.Limit
	if err := CheckName("group", r.Group); err != nil {
		return err
	}
	if r.Limit < 0 {
		return errorf(CodeBadRequest, "limit must not be negative")
	}
	_, err := namesCursor(r.After)
	return err
}

// decodeNotice decodes READ (a user, and the sequence read up to) and
// TYPING (a user).
func decodeNotice(r *Request, in *inbound) *Error {
	to, err := decodeRecipient(in)
	if err != nil {
		return err
	}
	if to.Group {
		return errorf(CodeBadRequest, "%s is for direct conversations: give toUsername", r.Type)
	}
	r.To, r.Seq = to, in.Seq
	if r.Type == TypeRead && r.Seq <= 0 {
		return errorf(CodeBadRequest, "READ needs the sequence read up to in \"seq\"")
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
		return V1, nil
	case "2", `"2"`:
		return V2, nil
	}
	return 0, errorf(CodeBadRequest, "unsupported protocol version %s (this server speaks 1 and 2)", truncate(string(raw), 16))
}

func decodeRecipient(in *inbound) (Recipient, *Error) {
	var to Recipient
	switch {
	case in.ToUsername != "" && in.ToGroup != "":
		return to, errorf(CodeBadRequest, "give toUsername or toGroup, not both")
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
			return to, errorf(CodeBadRequest, "forGroup must be true or false")
		}
	default:
		return to, errorf(CodeBadRequest, "no recipient: give toUsername or toGroup")
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
		return errorf(CodeBadName, "empty %s", kind)
	case n > MaxNameRunes:
		return errorf(CodeBadName, "%s is %d characters, over the limit of %d", kind, n, MaxNameRunes)
	case !utf8.ValidString(name) || !printable(name):
		return errorf(CodeBadName, "%s %s has unprintable characters", kind, quote(name))
	case strings.TrimSpace(name) != name:
		return errorf(CodeBadName, "%s %s starts or ends with a space", kind, quote(name))
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

// The server's objects. One struct per shape keeps the field order and the
// protocol-1 shapes exactly as DESIGN.md gives them.
type (
	loginV1 struct {
		MessageType string `json:"messageType"`
		Username    string `json:"username"`
	}
	loginV2 struct {
		MessageType string `json:"messageType"`
		Username    string `json:"username"`
		Version     int    `json:"version"`
		Node        int64  `json:"node"`
		Away        string `json:"away,omitempty"`
		// Features and Nodes: what FeatureFailover grants;
		// MaxMessageBytes: what FeatureLimits grants.
		Features        []string   `json:"features,omitempty"`
		Nodes           []NodeAddr `json:"nodes,omitempty"`
		MaxMessageBytes int        `json:"maxMessageBytes,omitempty"`
		ID              string     `json:"id,omitempty"`
	}
	groupV1 struct {
		MessageType string `json:"messageType"`
		Group       string `json:"group"`
	}
	groupV2 struct {
		MessageType string `json:"messageType"`
		Group       string `json:"group"`
		InviteOnly  bool   `json:"inviteOnly,omitempty"`
		ID          string `json:"id,omitempty"`
	}
	// accountV2 answers REGISTER and SET_PASSWORD.
	accountV2 struct {
		MessageType string `json:"messageType"`
		Username    string `json:"username"`
		ID          string `json:"id,omitempty"`
	}
	inviteV2 struct {
		MessageType string `json:"messageType"`
		Group       string `json:"group"`
		Username    string `json:"username"`
		ID          string `json:"id,omitempty"`
	}
	chatV1 struct {
		MessageType    string `json:"messageType"`
		FromName       string `json:"fromName"`
		ToUsername     string `json:"toUsername,omitempty"`
		ToGroup        string `json:"toGroup,omitempty"`
		MessageContent string `json:"messageContent"`
		SentAt         string `json:"sentAt"`
	}
	// ChatV2 is a chat message as protocol 2 sends it (deliveries and
	// HISTORY entries).
	ChatV2 struct {
		MessageType    string `json:"messageType"`
		ID             string `json:"id"`
		Seq            int64  `json:"seq"`
		FromName       string `json:"fromName"`
		ToUsername     string `json:"toUsername,omitempty"`
		ToGroup        string `json:"toGroup,omitempty"`
		MessageContent string `json:"messageContent"`
		SentAt         string `json:"sentAt"`
		Time           string `json:"time"` // RFC 3339, UTC, milliseconds
	}
	errorV1 struct {
		MessageType  string `json:"messageType"`
		ErrorMessage string `json:"errorMessage"`
	}
	errorV2 struct {
		MessageType  string `json:"messageType"`
		Code         Code   `json:"code"`
		ErrorMessage string `json:"errorMessage"`
		ID           string `json:"id,omitempty"`
	}
	storedV2 struct {
		MessageType string `json:"messageType"`
		ID          string `json:"id"`
		Seq         int64  `json:"seq"`
		Time        string `json:"time"`
	}
	// OnlineUser is one entry of a WHO reply.
	OnlineUser struct {
		Username string `json:"username"`
		Node     int64  `json:"node"`
		Away     string `json:"away,omitempty"`
	}
	whoV2 struct {
		MessageType string       `json:"messageType"`
		Users       []OnlineUser `json:"users"`
		Truncated   bool         `json:"truncated,omitempty"`
		ID          string       `json:"id,omitempty"`
	}
	// GroupInfo is one entry of a GROUPS reply.
	GroupInfo struct {
		Group      string `json:"group"`
		Members    int    `json:"members"`
		Member     bool   `json:"member"`
		InviteOnly bool   `json:"inviteOnly,omitempty"`
		Invited    bool   `json:"invited,omitempty"`
	}
	groupsV2 struct {
		MessageType string      `json:"messageType"`
		Groups      []GroupInfo `json:"groups"`
		Truncated   bool        `json:"truncated,omitempty"`
		// Next is the name to ask for the page after this one ("after").
		Next string `json:"next,omitempty"`
		ID   string `json:"id,omitempty"`
	}
	historyV2 struct {
		MessageType string   `json:"messageType"`
		ToUsername  string   `json:"toUsername,omitempty"`
		ToGroup     string   `json:"toGroup,omitempty"`
		Messages    []ChatV2 `json:"messages"`
		Truncated   bool     `json:"truncated,omitempty"`
		// ReadSeq: how far the other user has read this user's messages.
		ReadSeq int64  `json:"readSeq,omitempty"`
		ID      string `json:"id,omitempty"`
	}
	// awayV2 answers AWAY, and tells a sender that the user it writes to
	// is away (Username set, no id).
	awayV2 struct {
		MessageType string `json:"messageType"`
		Username    string `json:"username,omitempty"`
		Message     string `json:"message,omitempty"`
		Since       string `json:"since,omitempty"`
		ID          string `json:"id,omitempty"`
	}
	whoisV2 struct {
		MessageType string `json:"messageType"`
		Username    string `json:"username"`
		Online      bool   `json:"online"`
		Node        int64  `json:"node,omitempty"`
		Since       string `json:"since,omitempty"`
		Away        string `json:"away,omitempty"`
		AwaySince   string `json:"awaySince,omitempty"`
		ID          string `json:"id,omitempty"`
	}
	// NameEntry is one member in a NAMES reply: Node is where they are
	// logged in (absent: nowhere).
	NameEntry struct {
		Username string `json:"username"`
		Node     int64  `json:"node,omitempty"`
		Away     string `json:"away,omitempty"`
	}
	namesV2 struct {
		MessageType string      `json:"messageType"`
		Group       string      `json:"group"`
		Members     []NameEntry `json:"members"`
		Truncated   bool        `json:"truncated,omitempty"`
		Next        string      `json:"next,omitempty"`
		ID          string      `json:"id,omitempty"`
	}
	// noticeV2 is a READ or TYPING notice: Username has read this
	// session's messages up to Seq, or is writing to it.
	noticeV2 struct {
		MessageType string `json:"messageType"`
		Username    string `json:"username"`
		Seq         int64  `json:"seq,omitempty"`
	}
)

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
	if version >= V2 {
		return encode(errorV2{TypeError, e.Code, e.Message, e.ID})
	}
	return encode(errorV1{TypeError, e.Message})
}

// formatSentAt is "sentAt" in the node's local time zone.
func formatSentAt(t time.Time) string { return t.Local().Format(TimeLayout) }

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
