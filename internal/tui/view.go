package tui

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// senderColors are the ANSI 256 colours names are shown in; a name always
// gets the same one.
var senderColors = []string{"39", "208", "170", "42", "220", "75", "203", "114", "141", "179", "45", "213"}

type styles struct {
	time, info, err, faint, me lipgloss.Style
	ok, bad                    lipgloss.Style
	tab, tabCur, unread        lipgloss.Style
	mention, found             lipgloss.Style
	bar, barOK, barWarn, barEr lipgloss.Style
	prompt                     lipgloss.Style
	senders                    []lipgloss.Style
}

// Colors are the UI's colours, each an ANSI 256 colour number ("39") or
// "#rrggbb"; empty: the default.
type Colors struct {
	Me, Mention, Time, Info, Error string
	// Senders are the colours of other people's names (each name keeps one).
	Senders []string
}

// fg is the style of colour c, or def if c is empty.
func fg(c, def string) lipgloss.Style {
	return lipgloss.NewStyle().Foreground(lipgloss.Color(cmp.Or(c, def)))
}

func newStyles(c Colors) styles {
	s := styles{
		time:    fg(c.Time, "244"),
		info:    fg(c.Info, "246"),
		err:     fg(c.Error, "203"),
		faint:   lipgloss.NewStyle().Faint(true),
		me:      fg(c.Me, "252").Bold(true),
		ok:      lipgloss.NewStyle().Foreground(lipgloss.Color("42")),
		bad:     lipgloss.NewStyle().Foreground(lipgloss.Color("203")),
		tab:     lipgloss.NewStyle().Foreground(lipgloss.Color("250")),
		tabCur:  lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("231")).Background(lipgloss.Color("25")),
		unread:  lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("220")),
		found:   lipgloss.NewStyle().Reverse(true),
		mention: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("231")).Background(lipgloss.Color(cmp.Or(c.Mention, "161"))),
		bar:     lipgloss.NewStyle().Foreground(lipgloss.Color("252")).Background(lipgloss.Color("236")),
		barOK:   lipgloss.NewStyle().Foreground(lipgloss.Color("42")).Background(lipgloss.Color("236")),
		barWarn: lipgloss.NewStyle().Foreground(lipgloss.Color("220")).Background(lipgloss.Color("236")),
		barEr:   lipgloss.NewStyle().Foreground(lipgloss.Color("203")).Background(lipgloss.Color("236")),
		prompt:  lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("75")),
	}
	senders := c.Senders
	if len(senders) == 0 {
		senders = senderColors
	}
	for _, col := range senders {
		s.senders = append(s.senders, fg(col, "252"))
	}
	return s
}

// sender is the style of a name.
func (s styles) sender(name, me string) lipgloss.Style {
	if name == me {
		return s.me
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return s.senders[h.Sum32()%uint32(len(s.senders))]
}

// layout sizes the pane and the input line, and redraws the pane.
func (m *Model) layout() {
	m.pane.SetWidth(m.width)
	m.pane.SetHeight(max(m.height-3, 1))
	prompt := "› "
	if to := m.convs[m.cur].to; to.Name != "" {
		prompt = Clean(to.String()) + " › "
	}
	m.input.Prompt = prompt
	m.input.SetWidth(max(m.width-ansi.StringWidth(prompt)-1, 1))
	m.refresh()
}

// refresh redraws the current conversation into the pane, keeping the
// pane at the bottom if it was there.
func (m *Model) refresh() {
	follow := m.pane.AtBottom()
	c := m.convs[m.cur]
	var lines []string
	m.lineOf = m.lineOf[:0]
	for _, e := range c.entries {
		m.lineOf = append(m.lineOf, len(lines))
		lines = append(lines, m.render(e)...)
	}
	m.pane.SetContentLines(lines)
	if follow {
		m.pane.GotoBottom()
		m.newBelow = 0
	}
}

// stamp formats a time: the clock for today, with the date otherwise.
func (m *Model) stamp(t time.Time) string {
	t = t.In(m.cfg.Location)
	now := m.cfg.Now().In(m.cfg.Location)
	if y, mo, d := t.Date(); y == now.Year() && mo == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}

// render is one entry as wrapped screen lines: time, sender, text, and the
// receipt of my own messages.
func (m *Model) render(e *entry) []string {
	st := m.st
	prefix := st.time.Render(m.stamp(e.at)) + " "
	body := cleanLines(e.text)
	style := lipgloss.NewStyle()
	var mark string
	switch e.kind {
	case kindChat, kindOwn:
		switch {
		case m.isHit(e):
			style = st.found
		case m.isMention(e):
			style = st.mention
		}
		from := st.sender(e.from, m.me).Render(Clean(e.from)) + " "
		if act, ok := actionOf(e.text); ok {
			from, body = st.info.Render("*")+" "+from, cleanLines(act)
		}
		prefix += from
		if e.kind == kindOwn {
			mark = m.receipt(e.out)
		} else if c := m.convs[m.cur]; e.from == m.me && e.seq > 0 && !c.to.Group && e.seq <= c.readSeq {
			mark = " " + m.st.ok.Render("✓✓") // from history: read
		}
	case kindRoute:
		prefix += st.sender(e.to.Name, m.me).Render("→ "+Clean(e.to.String())) + " "
		if act, ok := actionOf(e.text); ok {
			body = "* " + Clean(m.me) + " " + cleanLines(act)
		}
		mark = m.receipt(e.out)
	case kindInfo:
		prefix += st.info.Render("·") + " "
		style = st.info
	case kindError:
		prefix += st.err.Render("!") + " "
		style = st.err
	}
	indent := ansi.StringWidth(prefix)
	room := m.width - indent
	if room < 16 {
		indent, room = 2, m.width-2
	}
	wrapped := strings.Split(ansi.Wrap(body, max(room, 1), ""), "\n")
	out := make([]string, len(wrapped))
	for i, w := range wrapped {
		w = style.Render(w)
		if i == 0 {
			out[i] = prefix + w
		} else {
			out[i] = strings.Repeat(" ", indent) + w
		}
	}
	out[len(out)-1] += mark
	return out
}

// cleanLines is text made safe to print as Clean does, its line breaks
// kept: a message of several lines shows as lines.
func cleanLines(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = Clean(strings.TrimSuffix(l, "\r"))
	}
	return strings.Join(lines, "\n")
}

// receipt is the mark after my message: … on its way, ✓ stored in the
// ring, ✓✓ shown to its recipient (READ) or delivered (to myself), ✗
// refused.
func (m *Model) receipt(o *outgoing) string {
	switch o.state {
	case stored:
		return " " + m.st.ok.Render("✓")
	case delivered, read:
		return " " + m.st.ok.Render("✓✓")
	case failed:
		return " " + m.st.bad.Render("✗ "+Clean(o.err))
	default:
		return " " + m.st.faint.Render("…")
	}
}

// View draws the tab bar, the pane, the status bar and the input line.
func (m *Model) View() tea.View {
	rows := []string{m.tabs(), m.pane.View(), m.statusBar(), m.input.View()}
	v := tea.NewView(strings.Join(rows, "\n"))
	v.AltScreen = true
	v.ReportFocus = true // no read mark while the window is not in front (markRead)
	v.WindowTitle = m.title()
	if c := m.input.Cursor(); c != nil {
		c.Y = m.height - 1
		v.Cursor = c
	}
	return v
}

func (m *Model) title() string {
	t := "ringchat: " + Clean(m.me)
	unread := 0
	for _, c := range m.convs {
		unread += c.unread
	}
	if unread > 0 {
		t += fmt.Sprintf(" (%d unread)", unread)
	}
	return t
}

// tabs is the conversation bar: the current one highlighted, unread counts.
func (m *Model) tabs() string {
	var b strings.Builder
	for i, k := range m.order {
		c := m.convs[k]
		label := Clean(k)
		if k == "" {
			label = "ringchat"
		}
		label = fmt.Sprintf("%d:%s", i+1, label)
		switch {
		case k == m.cur:
			b.WriteString(m.st.tabCur.Render(" " + label + " "))
		case c.mentioned:
			b.WriteString(m.st.tab.Render(" "+label+" ") + m.st.mention.Render(fmt.Sprintf("(%d@)", c.unread)))
		case c.unread > 0:
			b.WriteString(m.st.tab.Render(" "+label+" ") + m.st.unread.Render(fmt.Sprintf("(%d)", c.unread)))
		default:
			b.WriteString(m.st.tab.Render(" " + label + " "))
		}
	}
	return ansi.Truncate(b.String(), m.width, "…")
}

// statusBar shows the connection, the user, the conversation and the
// joined groups.
func (m *Model) statusBar() string {
	st := m.st
	var conn string
	switch m.conn {
	case stateConnecting:
		conn = st.barWarn.Render(" ◌ connecting")
	case stateConnected:
		conn = st.barOK.Render(fmt.Sprintf(" ● node %d", m.node)) + st.bar.Render(" "+m.addr)
	case stateReconnecting:
		conn = st.barWarn.Render(" ◌ reconnecting: " + m.detail)
	case stateOffline:
		conn = st.barEr.Render(" ✗ offline: " + m.detail)
	}
	if m.quitting {
		conn = st.barWarn.Render(" leaving…")
	}
	parts := []string{conn, st.bar.Render(" │ " + Clean(m.me))}
	if m.away != "" {
		parts = append(parts, st.barWarn.Render(" (away)"))
	}
	if to := m.convs[m.cur].to; to.Name != "" {
		parts = append(parts, st.bar.Render(" │ → "+Clean(to.String())))
	}
	groups := make([]string, 0, len(m.groups))
	for g := range m.groups {
		groups = append(groups, "#"+Clean(g))
	}
	slices.Sort(groups)
	if len(groups) > 0 {
		parts = append(parts, st.bar.Render(" │ groups: "+strings.Join(groups, " ")))
	}
	if s := m.typingStatus(); s != "" {
		parts = append(parts, st.barOK.Render(s))
	}
	if s := m.searchStatus(); s != "" {
		parts = append(parts, st.barWarn.Render(s))
	}
	if m.newBelow > 0 && !m.pane.AtBottom() {
		parts = append(parts, st.barWarn.Render(fmt.Sprintf(" │ ↓ %d new (Esc)", m.newBelow)))
	}
	bar := ansi.Truncate(strings.Join(parts, ""), m.width, "…")
	if pad := m.width - ansi.StringWidth(bar); pad > 0 {
		bar += st.bar.Render(strings.Repeat(" ", pad))
	}
	return bar
}
