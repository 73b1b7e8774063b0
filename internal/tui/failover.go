package tui

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/ringchat/ringchat/internal/client"
)

// MoveText is the one line telling a reconnection: "moved from node 1 to
// node 2 (why); 1 message sent again", or "reconnected at node 1 (ADDR)
// after: why" when it logged in at the same node again.
func MoveText(ev client.Connected) string {
	why := "connection lost"
	if ev.Why != nil {
		why = errText(ev.Why)
	}
	var text string
	if ev.Moved() {
		text = fmt.Sprintf("moved from node %d to node %d (%s): %s", ev.FromNode, ev.Node, ev.Addr, why)
	} else {
		text = fmt.Sprintf("reconnected at node %d (%s) after: %s", ev.Node, ev.Addr, why)
	}
	if ev.Resent > 0 {
		text += fmt.Sprintf("; %s sent again", Plural(ev.Resent, "message"))
	}
	return text
}

// LoneNodeHint is the hint for a round of reconnection attempts that
// cannot succeed by waiting: the only node known refuses connections (it
// is down), so there is nowhere to move. "" when there is none.
func LoneNodeHint(ev client.Reconnecting) string {
	if ev.Known != 1 || !errors.Is(ev.Err, syscall.ECONNREFUSED) {
		return ""
	}
	return "nothing listens at the only node ringchat knows, and it knows no other node of this ring: " +
		"start that node, or run ringchat with --nodes FILE (the ring's nodes.csv) to move to another"
}

// reconnecting shows a failed round of reconnection: the loss is told in
// a line at the first round, and the hint for a lone node once.
func (m *Model) reconnecting(ev client.Reconnecting) {
	m.conn = stateReconnecting
	m.detail = fmt.Sprintf("attempt %d: %s", ev.Attempt, errText(ev.Err))
	if m.lost != nil {
		m.errorf("connection to node %d lost (%s): reconnecting; what you type is sent once connected", m.node, errText(m.lost.Err))
		m.lost = nil
	}
	if hint := LoneNodeHint(ev); hint != "" && !m.hinted {
		m.hinted = true
		m.errorf("%s", hint)
	}
}

// nodeNotice shows what the node says about itself when the session
// stays (no other node known; a session that moves tells the move).
func (m *Model) nodeNotice(ev client.Notice) {
	if ev.OK() {
		m.info("%s", Clean(ev.Message))
		return
	}
	m.errorf("%s (ringchat knows no other node of this ring: --nodes FILE gives them)", Clean(ev.Message))
}
