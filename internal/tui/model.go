// Package tui is ringchat's interactive terminal client, a Bubble Tea
// program: a tab bar of conversations with unread counts, a scrolling
// message pane, a status bar (connection, node, user, conversation,
// groups) and an input line that takes text and slash commands.
//
// The Model talks to the ring through a Backend (a *client.Session, which
// reconnects and resends by itself). Everything the network brings reaches
// Update as an EventMsg, and every request runs as a tea.Cmd whose answer
// comes back as a message, so Update never waits and tests drive the model
// by calling Update with key and network messages.
package tui

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// Backend is what the UI needs of its connection to the ring; a
// *client.Session is one.
type Backend interface {
	User() string
	Post(to client.Recipient, text string) (client.Outgoing, error)
	Join(ctx context.Context, group string) error
	JoinInviteOnly(ctx context.Context, group string) error
	Invite(ctx context.Context, group, user string) error
	SetPassword(ctx context.Context, password string) error
	Leave(ctx context.Context, group string) error
	Who(ctx context.Context) ([]protocol.OnlineUser, error)
	Groups(ctx context.Context) ([]protocol.GroupInfo, error)
	// HistoryBefore returns up to limit messages of a conversation older
	// than sequence before (0: the last ones), with the read mark.
	HistoryBefore(ctx context.Context, with client.Recipient, limit int, before int64) (client.History, error)
	Flush(ctx context.Context) error
	SetAway(ctx context.Context, message string) (client.Away, error)
	Whois(ctx context.Context, user string) (client.Whois, error)
	Names(ctx context.Context, group, after string, limit int) (client.Names, error)
	Read(ctx context.Context, user string, seq int64) error
	Typing(ctx context.Context, user string) error
}

// Config configures a Model.
type Config struct {
	Backend Backend
	// Timeout bounds each request (join, who, history, ...). Zero: 10 s.
	Timeout time.Duration
	// QuitGrace is how long /quit waits for the receipts of messages still
	// on their way. Zero: 3 s.
	QuitGrace time.Duration
	// HistoryOnOpen is how many earlier messages a conversation shows when
	// it is opened. Zero: DefaultHistory; negative: none.
	HistoryOnOpen int
	// MaxLines bounds the lines kept per conversation. Zero: 2000.
	MaxLines int
	// MaxMessageBytes is the largest message sent; a longer one is
	// refused before sending. Zero: the Backend's, if it says, else
	// client.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Addr and Node are where the Backend is logged in at the start (the
	// status bar's; later Connected events update them).
	Addr string
	Node int64
	// StateFile, if set, keeps the open conversations between runs: they
	// are opened again, with their recent history, at the start.
	StateFile string
	// LogDir, if set, is where each conversation's messages are appended
	// to a file of its own (see LogFileName); it must exist.
	LogDir string
	// Colors replace the default colours.
	Colors Colors
	// NoBell: a message naming the user does not ring the terminal's bell.
	NoBell bool
	// NoReceipts: the other user of a direct conversation is not told
	// that I have read their messages (READ) or that I am typing
	// (TYPING). Theirs still show.
	NoReceipts bool
	// Now and Location are the clock and the time zone of timestamps
	// (defaults: time.Now, time.Local).
	Now      func() time.Time
	Location *time.Location
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = client.DefaultTimeout
	}
	if c.QuitGrace <= 0 {
		c.QuitGrace = 3 * time.Second
	}
	if c.HistoryOnOpen == 0 {
		c.HistoryOnOpen = DefaultHistory
	}
	if c.MaxLines <= 0 {
		c.MaxLines = 2000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	return c
}

// EventMsg carries an event of the Backend's connection into Update.
type EventMsg struct{ Event client.Event }

// EventsClosedMsg tells Update that the Backend delivers no more events.
type EventsClosedMsg struct{}

// Answers to requests.
type (
	joinMsg struct {
		group   string
		leave   bool
		private bool // /private: created or joined invite-only
		close   bool // /part, /close: close the group's tab once left
		err     error
	}
	inviteMsg struct {
		user, group string
		err         error
	}
	passwdMsg struct{ err error }
	whoMsg    struct {
		users []protocol.OnlineUser
		err   error
		quiet bool // only learn the names (learnNames)
	}
	groupsMsg struct {
		groups []protocol.GroupInfo
		err    error
		quiet  bool // at start-up: only learn the memberships
	}
	historyMsg struct {
		with    client.Recipient
		msgs    []client.ChatMessage
		readSeq int64
		err     error
		limit   int
		mode    histMode
	}
	flushedMsg struct{ err error }
)

// Connection states, for the status bar.
type connState int

const (
	stateConnecting connState = iota
	stateConnected
	stateReconnecting
	stateOffline
)

// Entry kinds.
type kind int

const (
	kindChat  kind = iota // a message from someone (or from me, in history)
	kindOwn               // a message I sent in this session
	kindRoute             // in another conversation: "→ bob: text" of a message I sent to bob
	kindInfo
	kindError
)

// Delivery states of my messages.
type sendState int

const (
	sending   sendState = iota // written or waiting for a connection; no receipt yet
	stored                     // STORED: durable in the ring
	delivered                  // a message to myself came back
	failed                     // refused with an ERROR
	read                       // READ: its recipient has shown it
)

// outgoing is one message I sent; its entries share it, so a receipt
// shows wherever the message does.
type outgoing struct {
	to    client.Recipient
	state sendState
	err   string
	seq   int64 // from STORED
}

// entry is one line of a conversation (before wrapping).
type entry struct {
	kind kind
	at   time.Time
	from string           // kindChat: the sender
	to   client.Recipient // kindRoute: where the message went
	text string
	id   string
	seq  int64     // kindChat: the message's place in the ring's order (0: unknown)
	out  *outgoing // kindOwn, kindRoute
	// earlier: the rule above the earlier messages a conversation shows
	// (from history), and how many.
	earlier int
}

// conversation is a user, a group, or the status buffer (zero To).
type conversation struct {
	to            client.Recipient
	entries       []*entry
	ids           map[string]bool
	unread        int
	mentioned     bool // an unread line names me
	loadingOlder  bool // PageUp at the top asked for older messages
	noOlder       bool // and there are none (or none the server gives)
	historyLoaded bool
	// Direct conversations: lastIn is the newest sequence of the other
	// user's messages shown, readSent the newest I told them I read,
	// readSeq how far they have read mine.
	lastIn, readSent, readSeq int64
}

// Model is the Bubble Tea model of the chat client.
type Model struct {
	cfg Config
	me  string
	st  styles

	width, height int
	input         textinput.Model
	pane          viewport.Model
	newBelow      int // lines added to the current conversation while scrolled up

	convs map[string]*conversation
	order []string // tab order; "" is the status buffer
	cur   string
	own   map[string]*outgoing
	// joined groups, as far as this client knows
	groups map[string]bool
	// users and groups seen, for completion
	users, knownGroups map[string]bool
	comp               *completion // Tab completion under way
	mention            *regexp.Regexp
	bell               bool // a mention wants the bell rung
	search             *search
	lineOf             []int // the first pane line of each entry of the current conversation
	log                *autolog
	restored           bool // the state file was read: changes are saved

	conn   connState
	addr   string
	node   int64
	detail string // reconnecting or offline: why
	// lost: the connection lost, not yet told in a line (a quick move
	// is told in one line when connected); hinted: the hint for a lone
	// node was shown.
	lost     *client.ConnectionLost
	hinted   bool
	quitting bool
	unsent   error // what /quit could not send

	// pwPrompt: the input line asks for a new password (hidden, not
	// kept in the input history).
	pwPrompt bool
	// keepLine: the line just entered was refused as it is (too long):
	// it stays in the input line.
	keepLine bool
	// blurred: the terminal said its window lost the focus (and has not
	// said it has it again); nothing is marked read meanwhile.
	blurred bool

	away       string                                               // my away message ("": not away)
	typing     map[string]time.Time                                 // users typing to me, until when
	typingTo   string                                               // the user my last TYPING went to
	typingSent time.Time                                            // and when
	pending    []tea.Cmd                                            // for Update to return (see later)
	tick       func(time.Duration, func(time.Time) tea.Msg) tea.Cmd // tea.Tick

	whoAt time.Time // when learnNames last asked

	typed   []string // input history, oldest first
	typedAt int      // position while browsing it with up/down
	draft   string   // the line being typed before browsing
}

// New returns the model of a client logged in through cfg.Backend.
func New(cfg Config) *Model {
	cfg = cfg.withDefaults()
	m := &Model{
		cfg:         cfg,
		me:          cfg.Backend.User(),
		st:          newStyles(cfg.Colors),
		width:       80,
		height:      24,
		convs:       map[string]*conversation{},
		own:         map[string]*outgoing{},
		groups:      map[string]bool{},
		users:       map[string]bool{},
		knownGroups: map[string]bool{},
		typing:      map[string]time.Time{},
		tick:        tea.Tick,
	}
	m.mention = mentionPattern(m.me)
	if cfg.LogDir != "" {
		m.log = &autolog{dir: cfg.LogDir, loc: cfg.Location}
	}
	m.input = textinput.New()
	m.input.SetVirtualCursor(false)
	m.input.Focus()
	m.input.CharLimit = 0 // no cut: a message too long is refused whole (tooLong)
	m.pane = viewport.New()
	m.pane.SoftWrap = true
	m.open(client.Recipient{})
	m.info("ringchat: logged in as %s. /to USER or /to #GROUP starts a conversation, /help lists the commands.", Clean(m.me))
	if cfg.Addr != "" {
		m.event(client.Connected{Addr: cfg.Addr, Node: cfg.Node})
	}
	m.layout()
	return m
}

// Init asks which groups the user is in (for the status bar), and opens
// the conversations of the state file again, with their recent history.
func (m *Model) Init() tea.Cmd {
	groups := m.request(func(ctx context.Context) tea.Msg {
		g, err := m.cfg.Backend.Groups(ctx)
		return groupsMsg{groups: g, err: err, quiet: true}
	})
	self := m.whois(m.me, true)
	names := m.learnNames()
	if m.cfg.StateFile == "" {
		return tea.Batch(groups, self, names)
	}
	restore := m.restore()
	m.restored = true
	return tea.Batch(groups, self, names, restore)
}

// Unsent is why /quit could not deliver everything typed (nil when it
// did), for the caller to report after the program ends.
func (m *Model) Unsent() error { return m.unsent }

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 20), max(msg.Height, 5)
		m.layout()
		return m, nil
	case tea.KeyPressMsg:
		cmd := m.key(msg)
		return m, tea.Batch(cmd, m.markRead(m.convs[m.cur])) // a key may have scrolled a message into view
	case tea.PasteMsg:
		return m, m.paste(msg)
	case tea.FocusMsg:
		m.blurred = false
		return m, m.markRead(m.convs[m.cur])
	case tea.BlurMsg:
		m.blurred = true
		return m, nil
	case EventMsg:
		m.event(msg.Event)
		return m, m.takePending()
	case EventsClosedMsg:
		if !m.quitting && m.conn != stateOffline {
			m.conn, m.detail = stateOffline, "connection closed"
		}
		return m, nil
	}
	return m, m.answered(msg)
}

// answered shows the answer to a request (nil for a message that is
// none).
func (m *Model) answered(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case joinMsg:
		return m.joined(msg)
	case inviteMsg:
		if msg.err != nil {
			m.addErr(m.open(client.ToGroup(msg.group)), "%s", errText(msg.err))
		} else {
			m.invited(msg)
		}
	case passwdMsg:
		if msg.err != nil {
			m.errorf("password not set: %s", errText(msg.err))
		} else {
			m.info("password set: log in with it from now on")
		}
	case whoMsg:
		m.who(msg)
	case groupsMsg:
		m.groupList(msg)
	case historyMsg:
		m.history(msg)
		return m.takePending()
	case whoisMsg:
		m.showWhois(msg)
	case namesMsg:
		m.showNames(msg)
	case awayMsg:
		m.awayDone(msg)
	case typingDoneMsg:
		// drawn again without the note
	case flushedMsg:
		m.unsent = msg.err
		return tea.Quit
	}
	return nil
}

// key handles a key press: editing and sending go to the input line,
// a few keys move between conversations and scroll the pane.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if s != "tab" && s != "shift+tab" {
		m.comp = nil
	}
	if cmd, ok := m.lineKey(s); ok {
		return cmd
	}
	if cmd, ok := m.viewKey(s); ok {
		return cmd
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return tea.Batch(cmd, m.sendTyping())
}

// lineKey handles the keys that act on the input line as a whole:
// quitting, Enter, completion, search, Esc and the input history. It
// reports whether key s was one of them (Ctrl-D is one on an empty line
// only).
func (m *Model) lineKey(s string) (tea.Cmd, bool) {
	switch s {
	case "ctrl+c":
		if m.quitting {
			return tea.Quit, true
		}
		return m.quit(), true
	case "ctrl+d":
		if m.input.Value() == "" {
			return m.quit(), true
		}
	case "enter":
		return m.enter(), true
	case "alt+enter", "ctrl+j":
		if !m.pwPrompt {
			m.input, _ = m.input.Update(tea.PasteMsg{Content: LineBreak})
		}
		return nil, true
	case "tab":
		if !m.complete(1) {
			return m.learnNames(), true // the next Tab may find the name
		}
		return nil, true
	case "shift+tab":
		m.complete(-1)
		return nil, true
	case "ctrl+r":
		m.searchEarlier()
		return nil, true
	case "esc":
		m.escape()
		return nil, true
	case "up", "down":
		if !m.pwPrompt {
			m.browse(s == "up")
		}
		return nil, true
	}
	return nil, false
}

// enter runs the input line, or sets the password typed at the password
// prompt.
func (m *Model) enter() tea.Cmd {
	line := m.input.Value()
	m.input.Reset()
	if m.pwPrompt {
		return m.passwd(line)
	}
	m.remember(line)
	m.pane.GotoBottom() // what the line does shows at the bottom
	m.newBelow = 0
	cmd := m.submit(line)
	if m.keepLine {
		m.keepLine = false
		m.input.SetValue(line)
		m.input.CursorEnd()
	}
	return cmd
}

// escape ends a search, or else the password prompt, or else scrolls the
// pane back to the bottom.
func (m *Model) escape() {
	if m.endSearch() {
		return
	}
	if m.pwPrompt {
		m.input.Reset()
		m.endPrompt()
		m.info("password unchanged")
		return
	}
	m.pane.GotoBottom()
	m.newBelow = 0
}

// viewKey handles the keys that move between conversations (Ctrl-N,
// Ctrl-P, Alt+A, Alt+1..9) and scroll the pane. It reports whether key s
// was one of them.
func (m *Model) viewKey(s string) (tea.Cmd, bool) {
	switch s {
	case "ctrl+n":
		return m.cycle(1), true
	case "ctrl+p":
		return m.cycle(-1), true
	case "alt+a":
		return m.nextActive(), true
	case "pgup":
		return m.pageUp(), true
	case "pgdown":
		m.pane.PageDown()
		if m.pane.AtBottom() {
			m.newBelow = 0
		}
		return nil, true
	case "shift+up":
		m.pane.ScrollUp(1)
		return nil, true
	case "shift+down":
		m.pane.ScrollDown(1)
		return nil, true
	}
	if n, ok := strings.CutPrefix(s, "alt+"); ok && len(n) == 1 && n[0] >= '1' && n[0] <= '9' {
		if i := int(n[0] - '1'); i < len(m.order) {
			return m.switchTo(m.convs[m.order[i]].to), true
		}
		return nil, true
	}
	return nil, false
}

// remember adds a line to the input history.
func (m *Model) remember(line string) {
	if strings.TrimSpace(line) != "" && (len(m.typed) == 0 || m.typed[len(m.typed)-1] != line) {
		m.typed = append(m.typed, line)
		if len(m.typed) > 500 {
			m.typed = m.typed[1:]
		}
	}
	m.typedAt, m.draft = len(m.typed), ""
}

// browse walks the input history.
func (m *Model) browse(back bool) {
	if m.typedAt == len(m.typed) {
		m.draft = m.input.Value()
	}
	switch {
	case back && m.typedAt > 0:
		m.typedAt--
	case !back && m.typedAt < len(m.typed):
		m.typedAt++
	default:
		return
	}
	if m.typedAt == len(m.typed) {
		m.input.SetValue(m.draft)
	} else {
		m.input.SetValue(m.typed[m.typedAt])
	}
	m.input.CursorEnd()
}

// submit runs one input line.
func (m *Model) submit(line string) tea.Cmd {
	c, err := ParseUI(line)
	if err != nil {
		m.errorf("%v", err)
		return nil
	}
	b := m.cfg.Backend
	switch c.Act {
	case ActSend:
		m.sendLine(c)
	case ActJoin:
		return m.request(func(ctx context.Context) tea.Msg {
			return joinMsg{group: c.Group, err: b.Join(ctx, c.Group)}
		})
	case ActPrivate:
		return m.request(func(ctx context.Context) tea.Msg {
			return joinMsg{group: c.Group, private: true, err: b.JoinInviteOnly(ctx, c.Group)}
		})
	case ActInvite:
		return m.invite(c.User, c.Group)
	case ActPasswd:
		m.pwPrompt = true
		m.input.EchoMode = textinput.EchoPassword
		m.info("new password (hidden; Enter sets it, Esc cancels):")
	case ActLeave:
		return m.leave(c.Group, c.Close)
	case ActClose:
		return m.closeCurrent()
	case ActSearch:
		m.startSearch(c.Text)
	case ActTo:
		return m.talkTo(c.To)
	case ActWho:
		return m.request(func(ctx context.Context) tea.Msg {
			u, err := b.Who(ctx)
			return whoMsg{users: u, err: err}
		})
	case ActGroups:
		return m.request(func(ctx context.Context) tea.Msg {
			g, err := b.Groups(ctx)
			return groupsMsg{groups: g, err: err}
		})
	case ActHistory:
		return m.askHistory(c.To, c.Limit)
	case ActWhois:
		return m.whois(c.User, false)
	case ActNames:
		return m.names(c.Group)
	case ActAway:
		return m.setAway(c.Text)
	case ActHelp:
		for _, l := range strings.Split(strings.TrimRight(HelpText+UIHelpText+KeysText, "\n"), "\n") {
			m.info("%s", l)
		}
	case ActQuit:
		return m.quit()
	}
	return nil
}

// sendLine sends the text of c to its recipient, or to the current
// conversation.
func (m *Model) sendLine(c Command) {
	to := c.To
	if c.ToCurrent {
		to = m.convs[m.cur].to
		if to.Name == "" {
			m.errorf("no conversation here: /to USER or /to #GROUP first, or /msg USER TEXT")
			return
		}
	}
	m.send(to, c.Text)
}

// invite asks the ring to invite user into group (empty: the current
// conversation's).
func (m *Model) invite(user, group string) tea.Cmd {
	group, ok := m.groupOr(group, "invite to which group? /invite USER #GROUP")
	if !ok {
		return nil
	}
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		return inviteMsg{user: user, group: group, err: b.Invite(ctx, group, user)}
	})
}

// talkTo makes to the current conversation; without to, it says which
// conversation is the current one.
func (m *Model) talkTo(to client.Recipient) tea.Cmd {
	if to.Name == "" {
		if cur := m.convs[m.cur].to; cur.Name != "" {
			m.info("talking to %s", Clean(cur.String()))
		} else {
			m.info("no conversation here: /to USER or /to #GROUP")
		}
		return nil
	}
	return m.switchTo(to)
}

// askHistory fetches the last limit messages with with (zero: the current
// conversation), to show in that conversation's tab.
func (m *Model) askHistory(with client.Recipient, limit int) tea.Cmd {
	if with.Name == "" {
		if with = m.convs[m.cur].to; with.Name == "" {
			m.errorf("history of what? /history USER, /history #GROUP, or /to one first")
			return nil
		}
	}
	if m.convs[key(with)] == nil {
		// Opened once the ring answers: a user or group that does not
		// exist gets no tab (nor one at the next start).
		return m.fetchHistory(with, limit, 0, histAskedNew)
	}
	if key(with) != m.cur { // shown where it belongs: go there
		m.open(with).historyLoaded = true
		m.switchTo(with)
	}
	return m.fetchHistory(with, limit, 0, histAsked)
}

// passwd sets the password typed at the password prompt.
func (m *Model) passwd(password string) tea.Cmd {
	m.endPrompt()
	if password == "" {
		m.info("password unchanged")
		return nil
	}
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		return passwdMsg{err: b.SetPassword(ctx, password)}
	})
}

func (m *Model) endPrompt() {
	m.pwPrompt = false
	m.input.EchoMode = textinput.EchoNormal
}

// request runs f as a command bounded by the request timeout.
func (m *Model) request(f func(ctx context.Context) tea.Msg) tea.Cmd {
	timeout := m.cfg.Timeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return f(ctx)
	}
}

func (m *Model) fetchHistory(with client.Recipient, limit int, before int64, mode histMode) tea.Cmd {
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		h, err := b.HistoryBefore(ctx, with, limit, before)
		return historyMsg{with: with, msgs: h.Messages, readSeq: h.ReadSeq, err: err, limit: limit, mode: mode}
	})
}

// quit sends what is still on its way (for a while) and ends the program.
func (m *Model) quit() tea.Cmd {
	if m.quitting {
		return nil
	}
	m.quitting = true
	b, grace := m.cfg.Backend, m.cfg.QuitGrace
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		return flushedMsg{err: b.Flush(ctx)}
	}
}

// send posts a message; it shows at once, its receipt later. A message
// longer than the node takes is refused here, whole.
func (m *Model) send(to client.Recipient, text string) {
	text = messageText(text)
	if m.tooLong(text) {
		return
	}
	o, err := m.cfg.Backend.Post(to, text)
	if err != nil {
		m.errorf("not sent to %s: %s", Clean(to.String()), errText(err))
		return
	}
	out := &outgoing{to: to}
	m.own[o.ID] = out
	m.typingTo = "" // the message ended their "is typing": the next key says it again
	now := m.cfg.Now()
	c := m.open(to)
	m.add(c, &entry{kind: kindOwn, at: now, from: m.me, text: text, id: o.ID, out: out})
	m.logMessage(to, now, m.me, text)
	if key(to) != m.cur {
		m.add(m.convs[m.cur], &entry{kind: kindRoute, at: now, to: to, text: text, out: out})
	}
}

// event handles what the connection brought.
func (m *Model) event(ev client.Event) {
	switch ev := ev.(type) {
	case client.ChatMessage:
		m.incoming(ev)
	case client.Stored:
		m.markStored(ev)
	case client.ReadNotice:
		m.readUpTo(ev.User, ev.Seq)
	case client.TypingNotice:
		m.later(m.typingNotice(ev.User))
	case client.Away:
		if ev.User != "" {
			m.awayNotice(ev)
		}
	case client.ErrorMessage:
		m.serverError(ev)
	case client.ProtocolError:
		m.errorf("bad message from the server: %v", ev.Err)
	case client.Connected:
		m.connected(ev)
	case client.ConnectionLost:
		// No line yet: a move to another node is told in one line
		// (connected); a reconnection that fails a round is told then.
		m.conn, m.detail, m.lost = stateReconnecting, errText(ev.Err), &ev
	case client.Reconnecting:
		m.reconnecting(ev)
	case client.Notice:
		m.nodeNotice(ev)
	case client.Disconnected:
		m.conn, m.detail = stateOffline, errText(ev.Err)
		m.errorf("disconnected: %s (/quit to leave)", errText(ev.Err))
	}
}

// markStored marks my message stored (or read, if its READ came first).
func (m *Model) markStored(ev client.Stored) {
	if o := m.own[ev.ID]; o != nil && o.state == sending {
		o.state, o.seq = stored, ev.Seq
		if c := m.convs[key(o.to)]; c != nil && !o.to.Group && ev.Seq <= c.readSeq {
			o.state = read // its READ came first
		}
		m.refresh()
	}
}

// serverError shows an ERROR: in the conversation of my message it
// refuses, or else in the current one.
func (m *Model) serverError(ev client.ErrorMessage) {
	if o := m.own[ev.ID]; ev.ID != "" && o != nil {
		// The message's line says it, with its ✗ and the reason: no
		// second line saying the same.
		o.state, o.err = failed, ev.Message
		m.markUnread(m.open(o.to))
		if ev.Code == protocol.CodeUnknownUser || ev.Code == protocol.CodeUnknownGroup {
			m.forget(o.to)
		}
		m.refresh() // the ✗ shows wherever the message does, here too
		return
	}
	m.errorf("%s", Clean(ev.Message))
}

// connected notes where the connection is and says so: at the first
// connection, and at every reconnection (with the messages sent again).
func (m *Model) connected(ev client.Connected) {
	first := m.conn == stateConnecting
	quiet := m.lost != nil // the loss has not been told: this line tells it
	m.conn, m.addr, m.node, m.detail, m.lost, m.hinted = stateConnected, ev.Addr, ev.Node, "", nil, false
	switch {
	case quiet && ev.Reconnect:
		m.info("%s", MoveText(ev))
	case ev.Reconnect && ev.Resent > 0:
		m.info("reconnected at node %d (%s); %s sent again", ev.Node, ev.Addr, Plural(ev.Resent, "message"))
	case ev.Reconnect:
		m.info("reconnected at node %d (%s)", ev.Node, ev.Addr)
	case first:
		m.info("connected to node %d (%s)", ev.Node, ev.Addr)
	}
}

// incoming shows a chat message in its conversation.
func (m *Model) incoming(msg client.ChatMessage) {
	if o := m.own[msg.ID]; o != nil { // a message to myself came back
		if o.state != failed {
			o.state = delivered
			m.refresh()
		}
		return
	}
	conv := Conversation(msg, m.me)
	c := m.open(conv)
	if msg.ID != "" && c.ids[msg.ID] {
		return
	}
	e := m.historyEntry(msg)
	delete(m.typing, msg.From)
	m.add(c, e)
	m.logMessage(conv, e.at, e.from, e.text)
	m.markUnread(c)
	m.noticeMention(c, e)
	m.later(m.markRead(c))
}

// markUnread counts a new line of c as unread unless c is on screen.
func (m *Model) markUnread(c *conversation) {
	if key(c.to) != m.cur {
		c.unread++
		m.saveState() // the count comes back at the next start
	}
}

// joined shows the answer to a join, /private or leave: after a join it
// switches to the group's tab, after /part or /close it closes it.
func (m *Model) joined(r joinMsg) tea.Cmd {
	var cmd tea.Cmd
	switch {
	case r.err == nil && !r.leave:
		cmd = m.switchTo(client.ToGroup(r.group))
	case r.err == nil && r.close:
		cmd = m.closeTab(client.ToGroup(r.group))
	}
	verb := "joined"
	if r.leave {
		verb = "left"
	}
	if r.err != nil {
		m.errorf("%s", errText(r.err))
		var se *client.ServerError
		if errors.As(r.err, &se) && se.Code == protocol.CodeNotInvited {
			m.info("#%s is private: ask one of its members to /invite %s, then /join %s again", Clean(r.group), Clean(m.me), Clean(r.group))
		}
		return cmd
	}
	if r.private {
		verb = "joined invite-only"
	}
	if r.leave {
		delete(m.groups, r.group)
	} else {
		m.groups[r.group] = true
	}
	m.info("%s #%s", verb, Clean(r.group))
	return cmd
}

func (m *Model) who(r whoMsg) {
	if r.err != nil {
		if !r.quiet {
			m.errorf("%s", errText(r.err))
		}
		return
	}
	for _, u := range r.users {
		m.seeUser(u.Username)
	}
	if !r.quiet {
		m.info("%s", WhoText(r.users))
	}
}

func (m *Model) groupList(r groupsMsg) {
	if r.err != nil {
		if !r.quiet {
			m.errorf("%s", errText(r.err))
		}
		return
	}
	clear(m.groups)
	var parts []string
	for _, g := range r.groups {
		m.seeGroup(g.Group)
		if g.Member {
			m.groups[g.Group] = true
		}
		var notes []string
		if g.Member {
			notes = append(notes, "joined")
		}
		if g.InviteOnly {
			notes = append(notes, "invite-only")
		}
		if g.Invited {
			notes = append(notes, "you are invited: /join "+Clean(g.Group))
		}
		p := fmt.Sprintf("#%s (%d)", Clean(g.Group), g.Members)
		if len(notes) > 0 {
			p = fmt.Sprintf("#%s (%d, %s)", Clean(g.Group), g.Members, strings.Join(notes, ", "))
		}
		parts = append(parts, p)
	}
	switch {
	case r.quiet:
	case len(parts) == 0:
		m.info("no groups yet: /join GROUP creates one")
	default:
		m.info("groups: %s", strings.Join(parts, ", "))
	}
}

// open returns the conversation with to, creating it.
func (m *Model) open(to client.Recipient) *conversation {
	k := key(to)
	c := m.convs[k]
	if c == nil {
		c = &conversation{to: to, ids: map[string]bool{}}
		if to.Group {
			m.seeGroup(to.Name)
		} else {
			m.seeUser(to.Name)
		}
		m.convs[k] = c
		m.order = append(m.order, k)
		m.saveState()
	}
	return c
}

// switchTo makes to the current conversation, and fetches its recent
// history the first time.
func (m *Model) switchTo(to client.Recipient) tea.Cmd {
	c := m.open(to)
	read := c.unread > 0
	c.unread, c.mentioned = 0, false
	if m.cur != key(to) || read {
		m.cur = key(to)
		m.saveState()
	}
	m.search = nil
	m.newBelow = 0
	m.layout()
	m.pane.GotoBottom()
	return tea.Batch(m.loadOnOpen(to), m.markRead(c))
}

// loadOnOpen opens the conversation with to and fetches its recent
// history the first time.
func (m *Model) loadOnOpen(to client.Recipient) tea.Cmd {
	c := m.open(to)
	if to.Name == "" || c.historyLoaded || m.cfg.HistoryOnOpen < 0 {
		return nil
	}
	c.historyLoaded = true // one request at a time
	return m.fetchHistory(to, m.cfg.HistoryOnOpen, 0, histOpen)
}

// cycle moves to the next (or previous) conversation.
func (m *Model) cycle(step int) tea.Cmd {
	i, n := slices.Index(m.order, m.cur), len(m.order)
	return m.switchTo(m.convs[m.order[((i+step)%n+n)%n]].to)
}

// nextActive moves to the next conversation with unread messages.
func (m *Model) nextActive() tea.Cmd {
	i, n := slices.Index(m.order, m.cur), len(m.order)
	for j := 1; j < n; j++ {
		if k := m.order[(i+j)%n]; m.convs[k].unread > 0 {
			return m.switchTo(m.convs[k].to)
		}
	}
	return nil
}

func (m *Model) add(c *conversation, e *entry) {
	m.noteIn(c, e)
	c.entries = append(c.entries, e)
	if e.id != "" {
		c.ids[e.id] = true
	}
	m.trim(c)
	if key(c.to) == m.cur {
		if !m.pane.AtBottom() {
			m.newBelow++
		}
		m.refresh()
	}
}

func (m *Model) trim(c *conversation) {
	if extra := len(c.entries) - m.cfg.MaxLines; extra > 0 {
		c.entries = slices.Delete(c.entries, 0, extra)
	}
}

func (m *Model) info(format string, args ...any) {
	m.addInfo(m.convs[m.cur], format, args...)
}

func (m *Model) errorf(format string, args ...any) {
	m.addErr(m.convs[m.cur], format, args...)
}

func (m *Model) addInfo(c *conversation, format string, args ...any) {
	m.add(c, &entry{kind: kindInfo, at: m.cfg.Now(), text: fmt.Sprintf(format, args...)})
}

func (m *Model) addErr(c *conversation, format string, args ...any) {
	m.add(c, &entry{kind: kindError, at: m.cfg.Now(), text: fmt.Sprintf(format, args...)})
}

// key names a conversation: "" for the status buffer, "#g" or "user".
func key(to client.Recipient) string {
	if to.Name == "" {
		return ""
	}
	return to.String()
}

// errText is an error for people: without the package prefixes.
func errText(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	return Clean(strings.ReplaceAll(err.Error(), "client: ", ""))
}
