package tui

import (
	"context"
	"fmt"
	"io"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

// Run shows the chat UI on a terminal (in and out) until the user quits or
// ctx ends, feeding it the events of events (a Session's). It returns why
// messages typed could not all be delivered, if they could not.
func Run(ctx context.Context, cfg Config, events <-chan client.Event, in io.Reader, out io.Writer) error {
	m := New(cfg)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	go func() {
		for ev := range events {
			p.Send(EventMsg{Event: ev})
		}
		p.Send(EventsClosedMsg{})
	}()
	if _, err := p.Run(); err != nil && ctx.Err() == nil {
		return err
	}
	if err := m.Unsent(); err != nil {
		return fmt.Errorf("not everything typed was sent: %w", err)
	}
	return nil
}
