package tui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"go.uber.org/goleak"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a Backend that answers at once.
type fake struct {
	user     string
	posts    []client.Outgoing
	joins    []string
	who      []protocol.OnlineUser
	groups   []protocol.GroupInfo
	history  map[string][]client.ChatMessage
	fail     map[string]error // by operation: "join", "leave", "who", "groups", "history", "post", "whois", "names", "away"
	flushErr error

	historyCalls int
	readSeq      map[string]int64 // HISTORY's read mark, by conversation
	whois        map[string]client.Whois
	names        map[string][]protocol.Member
	away         []string // AWAY requests
	reads        []string // READ requests: "bob 5"
	typings      []string // TYPING requests: "bob"
	mu           sync.Mutex
}

func (f *fake) User() string { return f.user }
func (f *fake) Post(to client.Recipient, text string) (client.Outgoing, error) {
	if err := f.fail["post"]; err != nil {
		return client.Outgoing{}, err
	}
	o := client.Outgoing{ID: fmt.Sprintf("id-%d", len(f.posts)+1), To: to, Text: text}
	f.posts = append(f.posts, o)
	return o, nil
}
func (f *fake) Join(_ context.Context, g string) error {
	if err := f.fail["join"]; err != nil {
		return err
	}
	f.joins = append(f.joins, "+"+g)
	return nil
}
func (f *fake) Leave(_ context.Context, g string) error {
	if err := f.fail["leave"]; err != nil {
		return err
	}
	f.joins = append(f.joins, "-"+g)
	return nil
}
func (f *fake) Who(context.Context) ([]protocol.OnlineUser, error) { return f.who, f.fail["who"] }
func (f *fake) Groups(context.Context) ([]protocol.GroupInfo, error) {
	return f.groups, f.fail["groups"]
}
func (f *fake) HistoryBefore(_ context.Context, with client.Recipient, limit int, before int64) (client.History, error) {
	f.historyCalls++
	h := f.history[with.String()]
	if before > 0 {
		i := 0
		for i < len(h) && h[i].Seq < before {
			i++
		}
		h = h[:i]
	}
	if len(h) > limit {
		h = h[len(h)-limit:]
	}
	return client.History{To: with, Messages: h, ReadSeq: f.readSeq[with.String()]}, f.fail["history"]
}
func (f *fake) SetAway(_ context.Context, msg string) (client.Away, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.away = append(f.away, msg)
	return client.Away{Message: msg, Since: "2026-03-14T10:15:00Z"}, f.fail["away"]
}
func (f *fake) Whois(_ context.Context, user string) (client.Whois, error) {
	if w, ok := f.whois[user]; ok {
		return w, nil
	}
	if user == f.user {
		return client.Whois{User: user, Online: true, Node: 1}, nil
	}
	return client.Whois{}, f.fail["whois"]
}
func (f *fake) Names(_ context.Context, group, _ string, _ int) (client.Names, error) {
	return client.Names{Group: group, Members: f.names[group]}, f.fail["names"]
}
func (f *fake) Read(_ context.Context, user string, seq int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, fmt.Sprint(user, " ", seq))
	return nil
}
func (f *fake) Typing(_ context.Context, user string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.typings = append(f.typings, user)
	return nil
}
func (f *fake) Flush(context.Context) error { return f.flushErr }

// now is the test clock: 10:20 UTC.
var now = time.Date(2026, 3, 14, 10, 20, 0, 0, time.UTC)

type harness struct {
	t    *testing.T
	m    *Model
	b    *fake
	quit bool
	raw  []string // written to the terminal as it is (the bell)
}

func newHarness(t *testing.T) *harness {
	b := &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{},
		groups: []protocol.GroupInfo{{Group: "ops", Members: 3, Member: true}, {Group: "random", Members: 1}}}
	m := New(Config{Backend: b, Now: func() time.Time { return now }, Location: time.UTC, Addr: "127.0.0.1:8001", Node: 1})
	h := &harness{t: t, m: m, b: b}
	m.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil } // the harness runs commands at once
	h.run(m.Init())
	h.update(tea.WindowSizeMsg{Width: 100, Height: 16})
	return h
}

// update feeds one message and runs the commands it returns.
func (h *harness) update(msg tea.Msg) {
	h.t.Helper()
	_, cmd := h.m.Update(msg)
	h.run(cmd)
}

// run executes a command as the Bubble Tea runtime would, feeding its
// messages back to the model.
func (h *harness) run(cmd tea.Cmd) {
	h.t.Helper()
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case tea.QuitMsg:
		h.quit = true
	case tea.RawMsg:
		h.raw = append(h.raw, fmt.Sprint(msg.Msg))
	default:
		h.update(msg)
	}
}

func (h *harness) typeText(s string) {
	h.t.Helper()
	for _, r := range s {
		h.update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

func (h *harness) press(code rune, mod ...tea.KeyMod) {
	h.t.Helper()
	k := tea.KeyPressMsg{Code: code}
	for _, md := range mod {
		k.Mod |= md
	}
	h.update(k)
}

// line types a line and presses Enter.
func (h *harness) line(s string) {
	h.t.Helper()
	h.typeText(s)
	h.press(tea.KeyEnter)
}

func (h *harness) event(ev client.Event) {
	h.t.Helper()
	h.update(EventMsg{ev})
}

// screen is the view as text, without colours.
func (h *harness) screen() string { return ansi.Strip(h.m.View().Content) }

func (h *harness) want(parts ...string) {
	h.t.Helper()
	s := h.screen()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			h.t.Fatalf("screen lacks %q:\n%s", p, s)
		}
	}
}

func (h *harness) wantNot(parts ...string) {
	h.t.Helper()
	s := h.screen()
	for _, p := range parts {
		if strings.Contains(s, p) {
			h.t.Fatalf("screen has %q:\n%s", p, s)
		}
	}
}

// lines are the screen's rows.
func (h *harness) lines() []string { return strings.Split(h.screen(), "\n") }

func chat(id, from string, to client.Recipient, text string, at time.Time) client.ChatMessage {
	return client.ChatMessage{ID: id, From: from, To: to, Content: text, Stamp: at.UTC().Format("2006-01-02T15:04:05.000Z")}
}

func TestLayout(t *testing.T) {
	h := newHarness(t)
	rows := h.lines()
	if len(rows) != 16 {
		t.Fatalf("%d rows, want the window's 16:\n%s", len(rows), h.screen())
	}
	for i, r := range rows {
		if w := ansi.StringWidth(r); w > 100 {
			t.Errorf("row %d is %d wide: %q", i, w, r)
		}
	}
	if !strings.HasPrefix(rows[0], " 1:ringchat ") {
		t.Errorf("tab bar %q", rows[0])
	}
	if !strings.Contains(rows[14], "● node 1 127.0.0.1:8001 │ alice │ groups: #ops") {
		t.Errorf("status bar %q", rows[14])
	}
	if strings.TrimRight(rows[15], " ") != "›" {
		t.Errorf("input line %q", rows[15])
	}
	h.want("10:20 · connected to node 1 (127.0.0.1:8001)")
	if c := h.m.View().Cursor; c == nil || c.Y != 15 || c.X != 2 {
		t.Errorf("cursor %+v, want on the input line after the prompt", c)
	}
}

func TestIncomingWhileTyping(t *testing.T) {
	h := newHarness(t)
	h.b.history["bob"] = []client.ChatMessage{
		chat("h1", "bob", client.ToUser("alice"), "earlier", now.Add(-time.Hour)),
		chat("m1", "bob", client.ToUser("alice"), "hi alice", now.Add(-5*time.Minute)),
	}
	h.typeText("hel")
	h.event(chat("m1", "bob", client.ToUser("alice"), "hi alice", now.Add(-5*time.Minute)))
	h.event(chat("m2", "carol", client.ToGroup("ops"), "deploy done", now.Add(-4*time.Minute)))
	h.event(chat("m3", "carol", client.ToGroup("ops"), "\x1b[2Jgotcha", now.Add(-3*time.Minute)))
	h.want(" 2:bob (1@) 3:#ops (2)", "› hel")
	if h.m.View().WindowTitle != "ringchat: alice (3 unread)" {
		t.Errorf("title %q", h.m.View().WindowTitle)
	}
	if h.m.input.Value() != "hel" {
		t.Fatalf("input %q: typing was disturbed", h.m.input.Value())
	}

	// Alt+A goes to a conversation with unread messages, and loads its history.
	h.press('a', tea.ModAlt)
	h.want("09:20 bob earlier", "10:15 bob hi alice", "── 1 earlier message ──", "bob › hel", "│ → bob")
	h.wantNot("(1@)")
	if strings.Count(h.screen(), "hi alice") != 1 {
		t.Errorf("a message shown again by its history:\n%s", h.screen())
	}
	h.press('a', tea.ModAlt)
	h.want("10:16 carol deploy done", `\x1b[2Jgotcha`, "#ops › hel")
	if strings.Contains(h.m.View().Content, "\x1b[2J") {
		t.Error("an escape sequence from the network reached the terminal")
	}
}

func TestSendWithReceipts(t *testing.T) {
	h := newHarness(t)
	h.line("hello?")
	h.want("! no conversation here: /to USER or /to #GROUP first, or /msg USER TEXT")
	if len(h.b.posts) != 0 {
		t.Fatalf("posted %v", h.b.posts)
	}
	h.line("/to bob")
	h.line("hello bob")
	h.line("//slash")
	if len(h.b.posts) != 2 || h.b.posts[0].To != client.ToUser("bob") || h.b.posts[0].Text != "hello bob" || h.b.posts[1].Text != "/slash" {
		t.Fatalf("posts %+v", h.b.posts)
	}
	h.want("10:20 alice hello bob …", "10:20 alice /slash …")
	h.event(client.Stored{ID: "id-1", Seq: 7})
	h.want("alice hello bob ✓", "alice /slash …")
	h.event(client.ErrorMessage{ID: "id-2", Code: "UNKNOWN_USER", Message: `no user "bob"`})
	h.want(`alice /slash ✗ no user "bob"`)
	h.wantNot(`! not sent to bob`) // one line says it: the message's own

	// /msg elsewhere: shown here with its receipt, and in its conversation.
	h.line("/msg carol psst")
	h.want("→ carol psst …", " 3:carol ")
	h.event(client.Stored{ID: "id-3"})
	h.want("→ carol psst ✓")
	h.line("/to carol")
	h.want("alice psst ✓")

	// A message to myself comes back: delivered.
	h.line("/msg alice note to self")
	h.event(client.Stored{ID: "id-4"})
	h.event(chat("id-4", "alice", client.ToUser("alice"), "note to self", now))
	h.want("→ alice note to self ✓✓")
	if strings.Count(h.screen(), "note to self") != 1 {
		t.Errorf("own message shown twice:\n%s", h.screen())
	}

	h.b.fail["post"] = errors.New("client: send to carol: 10000 messages are waiting to be sent already")
	h.line("one more")
	h.want("! not sent to carol: send to carol: 10000 messages are waiting to be sent already")
}

func TestCommands(t *testing.T) {
	h := newHarness(t)
	h.b.who = []protocol.OnlineUser{{Username: "alice", Node: 1}, {Username: "bob", Node: 4}}
	h.line("/join g1")
	if len(h.b.joins) != 1 || h.b.joins[0] != "+g1" {
		t.Fatalf("joins %v", h.b.joins)
	}
	h.want("· joined #g1", "#g1 › ", "groups: #g1 #ops", "│ → #g1")
	h.line("/who")
	h.want("· online: alice (node 1), bob (node 4)")
	h.line("/groups")
	h.want("· groups: #ops (3, joined), #random (1)")
	h.line("/history")
	h.want("· no messages with #g1")
	h.line("/leave g1")
	h.want("· left #g1")
	h.wantNot("#g1 #ops")
	h.line("/frobnicate")
	h.want(`! unknown command "/frobnicate" (try /help)`)
	h.b.fail["leave"] = errors.New("leave g9: not a member of g9")
	h.line("/leave g9")
	h.want("! leave g9: not a member of g9")
	h.b.fail["who"] = fmt.Errorf("who: %w", client.ErrOffline)
	h.line("/who")
	h.want("! who: not connected (reconnecting)")
	h.b.fail["history"] = context.DeadlineExceeded
	h.line("/history bob 5")
	h.want("! no answer in time")
	h.wantNot(":bob") // not opened: the history never came
	h.line("/help")
	h.want("/close             close the current tab")
	h.line("/to")
	h.want("· talking to #g1")
}

func TestConnectionStates(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.event(client.ConnectionLost{Addr: "127.0.0.1:8001", Err: client.ErrServerClosed})
	h.want("◌ reconnecting: server closed the connection")
	h.wantNot("connection to node 1 lost")
	h.event(client.Reconnecting{Attempt: 2, Err: errors.New("dial tcp 127.0.0.1:8001: connection refused"), Known: 2})
	h.want("! connection to node 1 lost (server closed the connection): reconnecting", "◌ reconnecting: attempt 2: dial tcp 127.0.0.1:8001: connection refused")
	h.line("typed while away")
	h.want("alice typed while away …")
	h.event(client.Connected{Addr: "127.0.0.1:8002", Node: 2, Reconnect: true, Resent: 1})
	h.want("· reconnected at node 2 (127.0.0.1:8002); 1 message sent again", "● node 2 127.0.0.1:8002")
	h.event(client.Stored{ID: "id-1"})
	h.want("alice typed while away ✓")
	h.event(client.ErrorMessage{Code: "RATE_LIMITED", Message: "lines are dropped: slow down"})
	h.want("! lines are dropped: slow down")
	h.event(client.Disconnected{Err: errors.New("login alice: wrong password")})
	h.want("! disconnected: login alice: wrong password (/quit to leave)", "✗ offline: login alice: wrong password")
}

func TestScrolling(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	for i := range 30 {
		h.event(chat(fmt.Sprint("m", i), "bob", client.ToUser("alice"), fmt.Sprint("line ", i), now))
	}
	h.want("line 29")
	h.press(tea.KeyPgUp)
	h.wantNot("line 29")
	h.event(chat("new", "bob", client.ToUser("alice"), "newest", now))
	h.want("↓ 1 new (Esc)")
	h.wantNot("newest")
	h.press(tea.KeyEscape)
	h.want("newest")
	h.wantNot("↓ 1 new")
	h.press(tea.KeyPgUp)
	h.line("/who") // a command's answer shows: the pane goes down
	h.want("· nobody is online")
	// A long message wraps under its text.
	h.event(chat("long", "bob", client.ToUser("alice"), strings.Repeat("word ", 40), now))
	h.want("10:20 bob word word", "\n          word word")
}

func TestInputHistoryAndQuit(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.line("first")
	h.typeText("draft")
	h.press(tea.KeyUp)
	if v := h.m.input.Value(); v != "first" {
		t.Fatalf("up: %q", v)
	}
	h.press(tea.KeyUp)
	if v := h.m.input.Value(); v != "/to bob" {
		t.Fatalf("up twice: %q", v)
	}
	h.press(tea.KeyDown)
	h.press(tea.KeyDown)
	if v := h.m.input.Value(); v != "draft" {
		t.Fatalf("back down: %q", v)
	}
	h.b.flushErr = errors.New("client: 1 messages without receipt: context deadline exceeded")
	h.press('c', tea.ModCtrl)
	if !h.quit {
		t.Fatal("ctrl+c did not quit")
	}
	if h.m.Unsent() == nil {
		t.Error("unsent messages not reported")
	}
	h2 := newHarness(t)
	h2.line("/quit")
	if !h2.quit || h2.m.Unsent() != nil {
		t.Fatalf("/quit: %v %v", h2.quit, h2.m.Unsent())
	}
}

func TestSwitchWithAltNumber(t *testing.T) {
	h := newHarness(t)
	h.event(chat("a", "bob", client.ToUser("alice"), "one", now))
	h.event(chat("b", "dave", client.ToUser("alice"), "two", now))
	h.press('3', tea.ModAlt)
	h.want("dave › ", "dave two")
	h.press('1', tea.ModAlt)
	h.want("› ", "connected to node 1")
	h.press('p', tea.ModCtrl)
	h.want("dave › ")
	h.press('n', tea.ModCtrl)
	h.want("› ", "connected to node 1")
	h.press('n', tea.ModCtrl)
	h.want("bob › ")
}

// TestMoveOneLine: a client that leaves its node (it said it cannot reach
// the store, or stopped answering) and logs in at another at once says
// so in one line; a lone dead node gets a hint, once.
func TestMoveOneLine(t *testing.T) {
	h := newHarness(t)
	h.line("/to bob")
	h.line("typed before the move")
	why := errors.New("node 1 cannot reach the store")
	h.event(client.ConnectionLost{Addr: "127.0.0.1:8001", Err: why})
	h.want("◌ reconnecting: node 1 cannot reach the store")
	h.event(client.Connected{Addr: "127.0.0.1:8002", Node: 2, Reconnect: true, Resent: 1, From: "127.0.0.1:8001", FromNode: 1, Why: why})
	h.want("· moved from node 1 to node 2 (127.0.0.1:8002): node 1 cannot reach the store; 1 message sent", "● node 2 127.0.0.1:8002")
	rows := 0
	for _, r := range h.lines() {
		if strings.Contains(r, "node 1") {
			rows++
		}
	}
	if rows != 1 {
		t.Fatalf("%d rows tell of node 1, want the one line of the move:\n%s", rows, h.screen())
	}

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	h.event(client.ConnectionLost{Addr: "127.0.0.1:8002", Err: client.ErrServerClosed})
	h.event(client.Reconnecting{Attempt: 1, Err: refused, Known: 1})
	h.want("! nothing listens at the only node ringchat knows")
	h.event(client.Reconnecting{Attempt: 2, Err: refused, Known: 1})
	if n := strings.Count(h.screen(), "nothing listens at the only node"); n != 1 {
		t.Fatalf("hint shown %d times, want once:\n%s", n, h.screen())
	}
}
