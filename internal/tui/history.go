package tui

import (
	"fmt"
	"slices"

	"github.com/ringchat/ringchat/internal/client"
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
)

// history shows the answer to a HISTORY request.
func (m *Model) history(r historyMsg) {
	c := m.open(r.with)
	switch {
	case r.err != nil && r.mode == histAsked:
		m.addErr(c, "%s", errText(r.err))
	case r.err != nil:
		c.historyLoaded = false // opening it again tries again
	case r.mode == histAsked:
		m.listHistory(c, r.msgs)
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
		earlier = append(earlier, m.historyEntry(msg))
		if msg.ID != "" {
			c.ids[msg.ID] = true
		}
	}
	if len(earlier) == 0 {
		return 0
	}
	head := &entry{kind: kindInfo, at: m.cfg.Now(), text: fmt.Sprintf("── %d earlier messages ──", len(earlier))}
	tail := &entry{kind: kindInfo, at: m.cfg.Now(), text: "──"}
	c.entries = slices.Concat([]*entry{head}, earlier, []*entry{tail}, c.entries)
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
	return &entry{kind: kindChat, at: at, from: msg.From, text: msg.Content, id: msg.ID}
}
