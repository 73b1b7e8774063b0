package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/tui"
)

// printer writes events, one per line, as text or as JSON objects. It is
// safe for concurrent use. Informational lines (help, the current
// conversation) go to out in text mode and to info in JSON mode, so that a
// script reading JSON sees only events.
type printer struct {
	mu   sync.Mutex
	out  io.Writer
	info io.Writer
	json bool
	me   string                     // the logged-in user, shown as "you"
	mine map[string]client.Outgoing // my messages without receipt, by id
	node int64
	loc  *time.Location
}

func newPrinter(out, info io.Writer, json bool) *printer {
	return &printer{out: out, info: info, json: json, mine: map[string]client.Outgoing{}, loc: time.Local}
}

func (p *printer) setUser(me string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.me = me
}

// post sends a message through post and remembers it, so that its
// receipt can name it: the receipt cannot be printed before it is known.
func (p *printer) post(post func() (client.Outgoing, error)) (client.Outgoing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, err := post()
	if err == nil {
		p.mine[o.ID] = o
	}
	return o, err
}

// The JSON shapes printed are the protocol's (internal/protocol, the
// shapes of protocol 2) where they fit, and these of the client's own: a
// chat message (of either protocol: no id or seq from protocol 1), a
// receipt naming the message, an error (a local one has no code), a
// conversation's messages, and the connection's events.
type (
	chatJSON struct {
		MessageType    protocol.Type `json:"messageType"`
		ID             string        `json:"id,omitempty"`
		Seq            int64         `json:"seq,omitempty"`
		FromName       string        `json:"fromName"`
		ToUsername     string        `json:"toUsername,omitempty"`
		ToGroup        string        `json:"toGroup,omitempty"`
		MessageContent string        `json:"messageContent"`
		SentAt         string        `json:"sentAt,omitempty"`
		Time           string        `json:"time,omitempty"`
	}
	storedJSON struct {
		MessageType    protocol.Type `json:"messageType"`
		ID             string        `json:"id"`
		Seq            int64         `json:"seq"`
		Time           string        `json:"time,omitempty"`
		ToUsername     string        `json:"toUsername,omitempty"`
		ToGroup        string        `json:"toGroup,omitempty"`
		MessageContent string        `json:"messageContent,omitempty"`
	}
	errorJSON struct {
		MessageType  protocol.Type `json:"messageType"`
		Code         protocol.Code `json:"code,omitempty"`
		ErrorMessage string        `json:"errorMessage"`
		ID           string        `json:"id,omitempty"`
	}
	historyJSON struct {
		MessageType protocol.Type `json:"messageType"`
		ToUsername  string        `json:"toUsername,omitempty"`
		ToGroup     string        `json:"toGroup,omitempty"`
		Messages    []chatJSON    `json:"messages"`
	}
	connectedJSON struct {
		MessageType string `json:"messageType"` // CONNECTED
		Username    string `json:"username"`
		Node        int64  `json:"node"`
		Address     string `json:"address"`
		Reconnect   bool   `json:"reconnect,omitempty"`
		Resent      int    `json:"resent,omitempty"`
	}
	lostJSON struct {
		MessageType  string `json:"messageType"` // CONNECTION_LOST, RECONNECTING, DISCONNECTED
		Address      string `json:"address,omitempty"`
		Attempt      int    `json:"attempt,omitempty"`
		ErrorMessage string `json:"errorMessage"`
	}
)

func chatToJSON(m client.ChatMessage) chatJSON {
	c := chatJSON{MessageType: protocol.TypeChatMessage, ID: m.ID, Seq: m.Seq, FromName: m.From, MessageContent: m.Content,
		SentAt: m.SentAt, Time: m.Stamp}
	if m.To.Group {
		c.ToGroup = m.To.Name
	} else {
		c.ToUsername = m.To.Name
	}
	return c
}

// event prints one event of a connection or session.
func (p *printer) event(ev client.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, text, ok := p.render(ev)
	if !ok {
		return
	}
	if p.json {
		fmt.Fprintf(p.out, "%s\n", marshal(v))
		return
	}
	fmt.Fprintln(p.out, text)
}

// render is an event's JSON object and its text line; ok is false for an
// event that is not printed.
func (p *printer) render(ev client.Event) (v any, text string, ok bool) {
	switch ev := ev.(type) {
	case client.ChatMessage:
		v, text = chatToJSON(ev), p.chatText(ev)
	case client.Stored:
		v, text = p.renderStored(ev)
	case client.ErrorMessage:
		v = errorJSON{protocol.TypeError, ev.Code, ev.Message, ev.ID}
		if o, found := p.mine[ev.ID]; found && ev.ID != "" {
			delete(p.mine, ev.ID)
			text = fmt.Sprintf("error: not sent to %s: %s", tui.Clean(o.To.String()), tui.Clean(ev.Message))
		} else {
			text = "error: " + tui.Clean(ev.Message)
		}
	case client.ProtocolError:
		msg := fmt.Sprintf("bad message from the server: %v", ev.Err)
		v, text = errorJSON{MessageType: protocol.TypeError, ErrorMessage: msg}, "error: "+tui.Clean(msg)
	case client.JoinGroup:
		v, text = protocol.GroupV1{MessageType: protocol.TypeJoinGroup, Group: ev.Group}, "joined #"+tui.Clean(ev.Group)
	case client.LeaveGroup:
		v, text = protocol.GroupV1{MessageType: protocol.TypeLeaveGroup, Group: ev.Group}, "left #"+tui.Clean(ev.Group)
	case client.Who:
		v, text = protocol.WhoV2{MessageType: protocol.TypeWho, Users: nonNil(ev.Users)}, tui.WhoText(ev.Users)
	case client.Groups:
		v, text = protocol.GroupsV2{MessageType: protocol.TypeGroups, Groups: nonNil(ev.Groups)}, groupsText(ev.Groups)
	case client.History:
		v, text = p.renderHistory(ev)
	case client.Whois:
		v = protocol.WhoisV2{MessageType: protocol.TypeWhois, Username: ev.User, Online: ev.Online, Node: ev.Node,
			Since: ev.Since, Away: ev.Away, AwaySince: ev.AwaySince}
		text = tui.WhoisText(ev, p.loc)
	case client.Names:
		v = protocol.NamesV2{MessageType: protocol.TypeNames, Group: ev.Group, Members: nonNil(ev.Members), Truncated: ev.Truncated}
		text = tui.NamesText(ev)
	case client.Away:
		v = protocol.AwayV2{MessageType: protocol.TypeAway, Username: ev.User, Message: ev.Message, Since: ev.Since}
		if ev.User == "" {
			text = tui.AwayText(ev)
		} else {
			text = fmt.Sprintf("%s is away: %s", tui.Clean(ev.User), tui.Clean(ev.Message))
		}
	case client.Connected, client.ConnectionLost, client.Reconnecting, client.Disconnected, client.Notice:
		return p.renderConnection(ev)
	default:
		return nil, "", false
	}
	return v, text, true
}

// renderStored renders a STORED receipt, naming the message of mine it
// is for (and forgetting it).
func (p *printer) renderStored(ev client.Stored) (any, string) {
	o, ok := p.mine[ev.ID]
	delete(p.mine, ev.ID)
	s := storedJSON{MessageType: protocol.TypeStored, ID: ev.ID, Seq: ev.Seq, Time: ev.Stamp, MessageContent: o.Text}
	if o.To.Group {
		s.ToGroup = o.To.Name
	} else {
		s.ToUsername = o.To.Name
	}
	if !ok {
		return s, "stored " + ev.ID
	}
	return s, fmt.Sprintf("[%s] you -> %s: %s (stored)", p.clock(ev.Stamp), tui.Clean(o.To.String()), tui.Clean(o.Text))
}

// renderHistory renders the messages of a conversation, one line each
// (or a line saying there are none).
func (p *printer) renderHistory(ev client.History) (any, string) {
	h := historyJSON{MessageType: protocol.TypeHistory, Messages: []chatJSON{}}
	if ev.To.Group {
		h.ToGroup = ev.To.Name
	} else {
		h.ToUsername = ev.To.Name
	}
	var lines []string
	for _, m := range ev.Messages {
		h.Messages = append(h.Messages, chatToJSON(m))
		lines = append(lines, p.chatText(m))
	}
	if len(lines) == 0 {
		lines = []string{"no earlier messages with " + tui.Clean(ev.To.String())}
	}
	return h, strings.Join(lines, "\n")
}

// renderConnection renders an event of the connection: connected (and
// where), lost, reconnecting (only attempts 1, 2, 4, 8, ...: ok is false
// for the others) and disconnected for good.
func (p *printer) renderConnection(ev client.Event) (v any, text string, ok bool) {
	switch ev := ev.(type) {
	case client.Connected:
		p.node = ev.Node
		v = connectedJSON{"CONNECTED", p.me, ev.Node, ev.Addr, ev.Reconnect, ev.Resent}
		switch {
		case !ev.Reconnect:
			text = fmt.Sprintf("connected to node %d (%s) as %s", ev.Node, ev.Addr, tui.Clean(p.me))
		case ev.Resent > 0:
			text = fmt.Sprintf("reconnected at node %d (%s); %s sent again", ev.Node, ev.Addr, tui.Plural(ev.Resent, "message"))
		default:
			text = fmt.Sprintf("reconnected at node %d (%s)", ev.Node, ev.Addr)
		}
	case client.ConnectionLost:
		v = lostJSON{MessageType: "CONNECTION_LOST", Address: ev.Addr, ErrorMessage: ev.Err.Error()}
		text = fmt.Sprintf("error: connection to node %d lost (%v): reconnecting", p.node, ev.Err)
	case client.Reconnecting:
		if ev.Attempt&(ev.Attempt-1) != 0 {
			return nil, "", false // 1, 2, 4, 8...: enough to tell it goes on
		}
		v = lostJSON{MessageType: "RECONNECTING", Attempt: ev.Attempt, ErrorMessage: ev.Err.Error()}
		text = fmt.Sprintf("error: reconnecting: attempt %d failed: %v", ev.Attempt, ev.Err)
		if hint := tui.LoneNodeHint(ev); hint != "" {
			text += "\nerror: " + hint
		}
	case client.Notice:
		v = protocol.NodeNoticeV2{MessageType: protocol.TypeNotice, Code: ev.Code, Node: ev.Node, Message: ev.Message}
		text = "notice: " + tui.Clean(ev.Message)
	case client.Disconnected:
		v = lostJSON{MessageType: "DISCONNECTED", ErrorMessage: ev.Err.Error()}
		text = fmt.Sprintf("error: disconnected: %v", ev.Err)
	default:
		return nil, "", false
	}
	return v, text, true
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// chatText is "[15:04:05] bob -> you: hi" or "[15:04:05] bob -> #g1: hi".
func (p *printer) chatText(m client.ChatMessage) string {
	at, ok := tui.MessageTime(m)
	if !ok {
		at = time.Now()
	}
	from, to := m.From, m.To.String()
	if !m.To.Group && m.To.Name == p.me {
		to = "you"
	}
	if from == p.me {
		from = "you"
	}
	return fmt.Sprintf("[%s] %s -> %s: %s", at.In(p.loc).Format("15:04:05"), tui.Clean(from), tui.Clean(to), tui.Clean(m.Content))
}

// clock formats a receipt's RFC 3339 time, or now.
func (p *printer) clock(stamp string) string {
	t, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		t = time.Now()
	}
	return t.In(p.loc).Format("15:04:05")
}

func groupsText(groups []protocol.GroupInfo) string {
	if len(groups) == 0 {
		return "no groups yet"
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("#%s (%d)", tui.Clean(g.Group), g.Members)
		if g.Member {
			parts[i] = fmt.Sprintf("#%s (%d, joined)", tui.Clean(g.Group), g.Members)
		}
	}
	return "groups: " + strings.Join(parts, ", ")
}

// errorf prints a local error: "error: ..." or an ERROR object.
func (p *printer) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		fmt.Fprintf(p.out, "%s\n", marshal(errorJSON{MessageType: protocol.TypeError, ErrorMessage: msg}))
		return
	}
	fmt.Fprintln(p.out, "error: "+tui.Clean(msg))
}

// infof prints an informational line (not an event).
func (p *printer) infof(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.out
	if p.json {
		w = p.info
	}
	fmt.Fprintf(w, format+"\n", args...)
}

// marshal is JSON without HTML escaping, on one line.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(fmt.Sprintf(`{"messageType":"ERROR","errorMessage":%q}`, err.Error()))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
