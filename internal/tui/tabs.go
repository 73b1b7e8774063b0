package tui

import (
	"context"
	"slices"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

// leave leaves group (empty: the current tab's) and, with closeTab, closes
// its tab once left.
func (m *Model) leave(group string, closeTab bool) tea.Cmd {
	group, ok := m.groupOr(group, "leave which group? /part GROUP")
	if !ok {
		return nil
	}
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		return joinMsg{group: group, leave: true, close: closeTab, err: b.Leave(ctx, group)}
	})
}

// groupOr returns group, or if it is empty the current tab's; in a tab
// that is no group it says so (ask, then "or go to the group's tab
// first") and returns false.
func (m *Model) groupOr(group, ask string) (string, bool) {
	if group != "" {
		return group, true
	}
	if to := m.convs[m.cur].to; to.Group {
		return to.Name, true
	}
	m.errorf("%s, or go to the group's tab first", ask)
	return "", false
}

// closeCurrent closes the current tab; a group's tab is left first, as
// its messages would open it again.
func (m *Model) closeCurrent() tea.Cmd {
	to := m.convs[m.cur].to
	switch {
	case to.Name == "":
		m.errorf("the status tab stays open (/quit leaves ringchat)")
		return nil
	case to.Group && m.groups[to.Name]:
		return m.leave(to.Name, true)
	}
	return m.closeTab(to)
}

// closeTab forgets the conversation with to; the tab before it becomes
// the current one if it was.
func (m *Model) closeTab(to client.Recipient) tea.Cmd {
	k := key(to)
	i := slices.Index(m.order, k)
	if k == "" || i < 0 {
		return nil
	}
	m.order = slices.Delete(m.order, i, i+1)
	delete(m.convs, k)
	if k != m.cur {
		m.saveState()
		return nil
	}
	return m.switchTo(m.convs[m.order[i-1]].to)
}
