package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
)

func newTailCmd(g *globals) *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print incoming messages until interrupted",
		Long: `tail logs in and prints every message that arrives for the user (first
those queued while the user was offline), one per line (--json: one JSON
object per line), until interrupted, or until --count messages have been
printed. Each message printed is acknowledged: it leaves the queue. If the
node dies, tail logs in again at another node of --nodes; connection
notices go to standard error.

Exit status: 0 when interrupted or after --count messages, 1 when it
cannot log in (or is refused for good later), 2 for a mistake in the
command line.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runTail(cmd, g, count) },
	}
	cmd.Flags().IntVarP(&count, "count", "c", 0, "exit after this many messages (0: never)")
	return cmd
}

// runTail logs in and prints the messages that arrive for the user, and
// the connection notices to standard error, until interrupted or until
// count messages (0: no limit) have been printed.
func runTail(cmd *cobra.Command, g *globals, count int) error {
	cfg, err := g.resolve(cmd, nil)
	if err != nil {
		return err
	}
	if err := needUser(cfg, "tail"); err != nil {
		return err
	}
	if count < 0 {
		return usagef("--count must not be negative")
	}
	s, err := startSession(cmd.Context(), cfg)
	if err != nil {
		if interrupted(cmd.Context()) {
			return nil
		}
		return err
	}
	defer s.Close()
	out := newPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg.json)
	out.setUser(s.User())
	notices := newPrinter(cmd.ErrOrStderr(), cmd.ErrOrStderr(), false)
	notices.setUser(s.User())
	addr, node, _ := s.Where()
	notices.event(client.Connected{Addr: addr, Node: node})
	return tail(cmd.Context(), s, out, notices, count)
}

// tail prints the session's chat messages to out and its other events to
// notices until ctx ends, the session ends or gives up, or count messages
// (0: no limit) have been printed.
func tail(ctx context.Context, s *client.Session, out, notices *printer, count int) error {
	printed := 0
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return nil
			}
			switch ev := ev.(type) {
			case client.ChatMessage:
				out.event(ev)
				if printed++; count > 0 && printed >= count {
					return nil
				}
			case client.Disconnected:
				return fmt.Errorf("disconnected: %w", ev.Err)
			default:
				notices.event(ev)
			}
		case <-ctx.Done():
			return nil
		}
	}
}
