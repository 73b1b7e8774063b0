package tui

import (
	"context"
	"errors"
	"slices"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// isCode reports whether err is a refusal by the server with one of codes.
func isCode(err error, codes ...protocol.Code) bool {
	var se *client.ServerError
	return errors.As(err, &se) && slices.Contains(codes, se.Code)
}

// forget drops a user or group the ring says does not exist from the
// names Tab completes.
func (m *Model) forget(to client.Recipient) {
	if to.Group {
		delete(m.knownGroups, to.Name)
	} else {
		delete(m.users, to.Name)
	}
}

// refused shows the refusal of a request about a conversation not open
// (/history of a group that does not exist): one line where the user
// is, no tab.
func (m *Model) refused(to client.Recipient, err error) {
	if isCode(err, protocol.CodeUnknownUser, protocol.CodeUnknownGroup) {
		m.forget(to)
	}
	m.errorf("%s", errText(err))
}

// invited shows a successful /invite and tells the user invited, in a
// direct message from me (any client shows it; the ring has no other
// word for it): "* alice invited you to #ops: /join ops".
func (m *Model) invited(r inviteMsg) {
	text := ActionPrefix + "invited you to #" + r.group + ": /join " + r.group
	_, err := m.cfg.Backend.Post(client.ToUser(r.user), text)
	told := Clean(r.user) + " is told in a direct message"
	if err != nil {
		told = Clean(r.user) + " could not be told: " + errText(err)
	}
	m.addInfo(m.open(client.ToGroup(r.group)), "invited %s to #%s: they can /join %s now; %s", Clean(r.user), Clean(r.group), Clean(r.group), told)
}

// whoEvery bounds how often a Tab that completes no name asks the ring
// who is online.
const whoEvery = 2 * time.Second

// learnNames asks the ring who is online, quietly, for Tab to complete
// their names: at the start, and when a Tab found no name (at most every
// whoEvery), so that a user online completes without /who first.
func (m *Model) learnNames() tea.Cmd {
	now := m.cfg.Now()
	if !m.whoAt.IsZero() && now.Sub(m.whoAt) < whoEvery {
		return nil
	}
	m.whoAt = now
	b := m.cfg.Backend
	return m.request(func(ctx context.Context) tea.Msg {
		u, err := b.Who(ctx)
		return whoMsg{users: u, err: err, quiet: true}
	})
}
