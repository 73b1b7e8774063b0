package tui

import (
	"fmt"
	"slices"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// histMode is why a conversation's history was asked for.
type histMode int

const (
	// histOpen: the conversation was opened; the messages it does not
	// show yet go before what it shows.
	histOpen histMode = iota
	// histAsked: /history; the last N messages are listed at the bottom,
	// whether shown already or not, as asked.
	histAsked
	// histOlder: PageUp at the top; older messages go before what the
	// conversation shows, and the view stays on the line it showed.
	histOlder
	// histAskedNew: /history of a conversation not open: as histAsked,
	// its tab opened once the answer came (a refusal opens none).
	histAskedNew
)

// Paging back in history.
const (
	olderPage  = 50  // messages more than shown asked for by each PageUp at the top
	maxHistory = 100 // the most a HISTORY request returns (docs/PROTOCOL.md)
)

// history shows the answer to a HISTORY request.
func (m *Model) history(r historyMsg) {
	if r.mode == histAskedNew {
		if r.err != nil {
			m.refused(r.with, r.err)
			return
		}
		m.open(r.with).historyLoaded = true
		m.later(m.switchTo(r.with))
		r.mode = histAsked
	}
	c := m.open(r.with)
	if r.err == nil && !r.with.Group {
		m.readUpTo(r.with.Name, r.readSeq)
		defer func() { m.later(m.markRead(c)) }()
	}
	switch {
	case r.err != nil && r.mode == histAsked:
		m.addErr(c, "%s", errText(r.err))
	case r.err != nil && r.mode == histOlder:
		c.loadingOlder = false
		m.addErr(c, "older messages: %s", errText(r.err))
	case r.err != nil:
		c.historyLoaded = false // opening it again tries again
		if isCode(r.err, protocol.CodeUnknownUser, protocol.CodeUnknownGroup) {
			m.forget(r.with)
		}
	case r.mode == histAsked:
		m.listHistory(c, r.msgs)
	case r.mode == histOlder:
		m.olderHistory(c, r)
	default:
		c.historyLoaded = true
		m.prependHistory(c, r.msgs)
	}
}

// listHistory lists msgs at the bottom of c, between two rules.
func (m *Model) listHistory(c *conversation, msgs []client.ChatMessage) {
	if len(msgs) == 0 {
		m.addInfo(c, "no messages with %s", Clean(c.to.String()))
		return
	}
	m.addInfo(c, "── the last %s with %s ──", Plural(len(msgs), "message"), Clean(c.to.String()))
	for _, msg := range msgs {
		m.add(c, m.historyEntry(msg))
	}
	m.addInfo(c, "──")
}

// prependHistory puts the messages of msgs that c does not show yet
// before what it shows, and returns how many it put.
func (m *Model) prependHistory(c *conversation, msgs []client.ChatMessage) int {
	var earlier []*entry
	for _, msg := range msgs {
		if msg.ID != "" && c.ids[msg.ID] {
			continue
		}
		e := m.historyEntry(msg)
		m.noteIn(c, e)
		earlier = append(earlier, e)
		if msg.ID != "" {
			c.ids[msg.ID] = true
		}
	}
	if len(earlier) == 0 {
		return 0
	}
	// One rule above all the earlier messages, however many pages came.
	n, rest := len(earlier), c.entries
	if len(rest) > 0 && rest[0].earlier > 0 {
		n, rest = n+rest[0].earlier, rest[1:]
	} else {
		rest = slices.Concat([]*entry{{kind: kindInfo, at: m.cfg.Now(), text: "──"}}, rest)
	}
	head := &entry{kind: kindInfo, at: m.cfg.Now(), text: "── " + Plural(n, "earlier message") + " ──", earlier: n}
	c.entries = slices.Concat([]*entry{head}, earlier, rest)
	m.trim(c)
	if key(c.to) == m.cur {
		m.refresh()
	}
	return len(earlier)
}

// historyEntry is a chat message (live or from a HISTORY answer) as a line.
func (m *Model) historyEntry(msg client.ChatMessage) *entry {
	m.seeUser(msg.From)
	at, ok := MessageTime(msg)
	if !ok {
		at = m.cfg.Now()
	}
	return &entry{kind: kindChat, at: at, from: msg.From, text: msg.Content, id: msg.ID, seq: msg.Seq}
}

// noteIn keeps lastIn, the newest message of the other user of a direct
// conversation that it shows.
func (m *Model) noteIn(c *conversation, e *entry) {
	if e.kind == kindChat && !c.to.Group && e.from == c.to.Name && e.seq > c.lastIn {
		c.lastIn = e.seq
	}
}

// oldestSeq is the sequence of the oldest message c shows whose place is
// known (0: none).
func oldestSeq(c *conversation) int64 {
	for _, e := range c.entries {
		if e.seq > 0 {
			return e.seq
		}
		if e.out != nil && e.out.seq > 0 {
			return e.out.seq
		}
	}
	return 0
}

// pageUp scrolls up; at the top of a conversation it loads older messages.
func (m *Model) pageUp() tea.Cmd {
	if m.pane.YOffset() > 0 {
		m.pane.PageUp()
		return nil
	}
	c := m.convs[m.cur]
	if c.to.Name == "" || c.loadingOlder || c.noOlder {
		return nil
	}
	if before := oldestSeq(c); before > 0 {
		// The page before the oldest message shown, however far back.
		c.loadingOlder = true
		return m.fetchHistory(c.to, olderPage, before, histOlder)
	}
	shown := 0
	for _, e := range c.entries {
		if e.id != "" {
			shown++
		}
	}
	if shown >= maxHistory {
		c.noOlder = true
		m.prependInfo(c, fmt.Sprintf("── older messages: the server gives the last %d, /history shows them ──", maxHistory))
		return nil
	}
	c.loadingOlder = true
	return m.fetchHistory(c.to, min(shown+olderPage, maxHistory), 0, histOlder)
}

// olderHistory puts the older messages of r before what c shows, keeping
// the view on the line it showed.
func (m *Model) olderHistory(c *conversation, r historyMsg) {
	c.loadingOlder = false
	before := m.pane.TotalLineCount()
	if m.prependHistory(c, r.msgs) == 0 || len(r.msgs) < r.limit {
		c.noOlder = true
		m.prependInfo(c, fmt.Sprintf("── no older messages with %s ──", Clean(c.to.String())))
	}
	if key(c.to) == m.cur {
		m.pane.SetYOffset(m.pane.YOffset() + m.pane.TotalLineCount() - before)
	}
}

// prependInfo puts a note at the top of c.
func (m *Model) prependInfo(c *conversation, text string) {
	c.entries = slices.Insert(c.entries, 0, &entry{kind: kindInfo, at: m.cfg.Now(), text: text})
	if key(c.to) == m.cur {
		m.refresh()
	}
}
