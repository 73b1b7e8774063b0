package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// How typing notices behave: one is sent at most every typingEvery while
// the user types to someone; one received shows for typingShown.
const (
	typingEvery = 3 * time.Second
	typingShown = 6 * time.Second
)

// namesLimit is how many members /names asks for (the server's largest
// page).
const namesLimit = 1000

// Answers to the status requests.
type (
	whoisMsg struct {
		w    client.Whois
		err  error
		self bool // at start-up: my own away status
	}
	namesMsg struct {
		n   client.Names
		err error
	}
	awayMsg struct {
		a   client.Away
		err error
	}
	// typingDoneMsg redraws once a typing notice has run out.
	typingDoneMsg struct{}
)

// WhoText is a WHO answer for people: "online: alice (node 1), bob (node
// 2, away: lunch)".
func WhoText(users []protocol.OnlineUser) string {
	if len(users) == 0 {
		return "nobody is online"
	}
	parts := make([]string, len(users))
	for i, u := range users {
		parts[i] = fmt.Sprintf("%s (node %d)", Clean(u.Username), u.Node)
		if u.Away != "" {
			parts[i] = fmt.Sprintf("%s (node %d, away: %s)", Clean(u.Username), u.Node, Clean(u.Away))
		}
	}
	return "online: " + strings.Join(parts, ", ")
}

// WhoisText is a WHOIS answer for people, times in loc (the clock alone
// for today's).
func WhoisText(w client.Whois, loc *time.Location) string {
	var b strings.Builder
	b.WriteString(Clean(w.User))
	today := time.Now().In(loc).Format(time.DateOnly)
	since := func(stamp string) {
		if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			t = t.In(loc)
			layout := "Jan 2 15:04"
			if t.Format(time.DateOnly) == today {
				layout = "15:04"
			}
			fmt.Fprintf(&b, " since %s", t.Format(layout))
		}
	}
	if w.Online {
		fmt.Fprintf(&b, ": online at node %d", w.Node)
		since(w.Since)
	} else {
		b.WriteString(": not logged in")
	}
	if w.Away != "" {
		b.WriteString("; away")
		since(w.AwaySince)
		b.WriteString(": " + Clean(w.Away))
	}
	return b.String()
}

// NamesText is a NAMES answer for people: the members by name, those
// online first.
func NamesText(n client.Names) string {
	if len(n.Members) == 0 {
		return fmt.Sprintf("#%s has no members", Clean(n.Group))
	}
	ms := slices.Clone(n.Members)
	slices.SortFunc(ms, func(a, b protocol.Member) int {
		if (a.Node == 0) != (b.Node == 0) {
			if a.Node != 0 {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Username, b.Username)
	})
	online := 0
	parts := make([]string, len(ms))
	for i, u := range ms {
		var notes []string
		if u.Node != 0 {
			online++
			notes = append(notes, fmt.Sprintf("node %d", u.Node))
		}
		if u.Away != "" {
			notes = append(notes, "away: "+Clean(u.Away))
		}
		parts[i] = Clean(u.Username)
		if len(notes) > 0 {
			parts[i] += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	more := ""
	if n.Truncated {
		more = ", and more"
	}
	return fmt.Sprintf("#%s, %s (%d online): %s%s", Clean(n.Group), Plural(len(ms), "member"), online, strings.Join(parts, ", "), more)
}

// AwayText is the answer to /away.
func AwayText(a client.Away) string {
	if a.Message == "" {
		return "you are back: no longer marked away"
	}
	return "you are marked away: " + Clean(a.Message) + " (/away alone: back)"
}

// whois asks where user is.
func (m *Model) whois(user string, self bool) tea.Cmd {
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		w, err := b.Whois(ctx, user)
		return whoisMsg{w: w, err: err, self: self}
	})
}

func (m *Model) showWhois(r whoisMsg) {
	switch {
	case r.self:
		if r.err == nil && r.w.Away != "" {
			m.away = r.w.Away
			m.info("you are marked away: %s (/away alone: back)", Clean(r.w.Away))
		}
	case r.err != nil:
		m.errorf("%s", errText(r.err))
	default:
		m.seeUser(r.w.User)
		m.info("%s", WhoisText(r.w, m.cfg.Location))
	}
}

func (m *Model) names(group string) tea.Cmd {
	group, ok := m.groupOr(group, "names of which group? /names #GROUP")
	if !ok {
		return nil
	}
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		n, err := b.Names(ctx, group, "", namesLimit)
		return namesMsg{n: n, err: err}
	})
}

func (m *Model) showNames(r namesMsg) {
	if r.err != nil {
		m.errorf("%s", errText(r.err))
		return
	}
	for _, u := range r.n.Members {
		m.seeUser(u.Username)
	}
	m.info("%s", NamesText(r.n))
}

func (m *Model) setAway(text string) tea.Cmd {
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		a, err := b.SetAway(ctx, text)
		return awayMsg{a: a, err: err}
	})
}

func (m *Model) awayDone(r awayMsg) {
	if r.err != nil {
		m.errorf("%s", errText(r.err))
		return
	}
	m.away = r.a.Message
	m.info("%s", AwayText(r.a))
}

// awayNotice shows, in the conversation with the user, that a user I
// write to is away.
func (m *Model) awayNotice(a client.Away) {
	c := m.open(client.ToUser(a.User))
	since := ""
	if t, err := time.Parse(time.RFC3339Nano, a.Since); err == nil {
		since = " (since " + m.stamp(t) + ")"
	}
	m.addInfo(c, "%s is away%s: %s", Clean(a.User), since, Clean(a.Message))
}

// readUpTo marks my messages to user up to seq as read by them (✓✓).
func (m *Model) readUpTo(user string, seq int64) {
	c := m.convs[key(client.ToUser(user))]
	if c == nil || user == m.me || seq <= c.readSeq {
		return
	}
	c.readSeq = seq
	changed := false
	for _, o := range m.own {
		if o.to == c.to && o.seq > 0 && o.seq <= seq && o.state == stored {
			o.state = read
			changed = true
		}
	}
	if changed || key(c.to) == m.cur {
		m.refresh()
	}
}

// typingNotice shows that user is writing to me, for a while.
func (m *Model) typingNotice(user string) tea.Cmd {
	m.typing[user] = m.cfg.Now().Add(typingShown)
	return m.tick(typingShown, func(time.Time) tea.Msg { return typingDoneMsg{} })
}

// typingStatus is the status bar's note that the current conversation's
// user is typing.
func (m *Model) typingStatus() string {
	to := m.convs[m.cur].to
	if to.Group || to.Name == "" {
		return ""
	}
	if until, ok := m.typing[to.Name]; ok && m.cfg.Now().Before(until) {
		return " │ " + Clean(to.Name) + " is typing…"
	}
	return ""
}

// markRead tells the other user of a direct conversation on screen how far
// I have read their messages, when that moved: up to the newest of them
// that is on screen or was scrolled past, never one below the view (the
// pane scrolled up) or while the terminal says its window has not the
// focus.
func (m *Model) markRead(c *conversation) tea.Cmd {
	if m.cfg.NoReceipts || m.blurred || c.to.Group || c.to.Name == "" || c.to.Name == m.me || c.lastIn <= c.readSent || key(c.to) != m.cur {
		return nil
	}
	seq := m.shownIn(c)
	if seq <= c.readSent {
		return nil
	}
	c.readSent = seq
	b, user := m.cfg.Backend, c.to.Name
	return m.request(func(ctx context.Context) tea.Msg {
		_ = b.Read(ctx, user, seq) // offline: the next one says it
		return nil
	})
}

// shownIn is the newest sequence of the other user's messages in c, the
// current conversation, that the pane shows or has shown above its view.
func (m *Model) shownIn(c *conversation) int64 {
	bottom := m.pane.YOffset() + m.pane.Height() // the first line below the view
	var seq int64
	for i, e := range c.entries {
		if i >= len(m.lineOf) || m.lineOf[i] >= bottom {
			break
		}
		if e.kind == kindChat && e.from == c.to.Name && e.seq > seq {
			seq = e.seq
		}
	}
	return seq
}

// sendTyping tells the user of the current direct conversation that I am
// writing to them, every typingEvery while I type.
func (m *Model) sendTyping() tea.Cmd {
	to := m.convs[m.cur].to
	v := m.input.Value()
	if m.cfg.NoReceipts || to.Group || to.Name == "" || to.Name == m.me || v == "" || (strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//")) {
		return nil
	}
	now := m.cfg.Now()
	if m.typingTo == to.Name && now.Sub(m.typingSent) < typingEvery {
		return nil
	}
	m.typingTo, m.typingSent = to.Name, now
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		_ = b.Typing(ctx, to.Name)
		return nil
	})
}

// later queues a command for Update to return.
func (m *Model) later(cmd tea.Cmd) {
	if cmd != nil {
		m.pending = append(m.pending, cmd)
	}
}

// takePending returns the queued commands, with the bell's.
func (m *Model) takePending() tea.Cmd {
	cmds := append(m.pending, m.takeBell())
	m.pending = nil
	return tea.Batch(cmds...)
}
