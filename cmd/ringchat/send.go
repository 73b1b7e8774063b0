package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/tui"
)

func newSendCmd(g *globals) *cobra.Command {
	var to, group string
	cmd := &cobra.Command{
		Use:   "send (--to USER | --group GROUP) [TEXT...]",
		Short: "Send one message and exit once it is stored",
		Long: `send logs in, sends TEXT (the arguments joined by spaces; without any,
standard input) to a user or a group, and waits for the ring's receipt.

Exit status: 0 when the message is stored in the ring (it is delivered
when the recipient is online, now or later), 1 when it was refused (no
such user or group, ...) or could not be sent within --timeout, 2 for a
mistake in the command line. If the node dies meanwhile, send logs in at
another node of --nodes and sends the message again: it is stored once.
--json prints the receipt (STORED) or the refusal (ERROR) as JSON.

Messages that arrive for the user meanwhile are not acknowledged: they
stay queued for the user's next session.`,
		Args: usageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.resolve(cmd, nil)
			if err != nil {
				return err
			}
			if err := needUser(cfg, "send"); err != nil {
				return err
			}
			var rcpt client.Recipient
			switch {
			case (to == "") == (group == ""):
				return usagef("send needs exactly one of --to USER and --group GROUP")
			case to != "":
				rcpt, err = client.ParseRecipient(to)
			default:
				rcpt, err = client.ParseRecipient("#" + strings.TrimPrefix(group, "#"))
			}
			if err != nil {
				return &usageError{err}
			}
			text := strings.Join(args, " ")
			if len(args) == 0 {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
				if err != nil {
					return fmt.Errorf("reading the message from standard input: %w", err)
				}
				text = strings.TrimRight(string(b), "\r\n")
			}
			if strings.TrimSpace(text) == "" {
				return usagef("nothing to send")
			}
			out := newPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg.json)
			return sendOnce(cmd.Context(), cfg, out, rcpt, text)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "user to send to")
	cmd.Flags().StringVar(&group, "group", "", "group to send to")
	return cmd
}

// sendOnce sends one message and waits for its receipt, logging in again
// (and sending again, with the same id) if the connection is lost first.
func sendOnce(ctx context.Context, cfg config, out *printer, to client.Recipient, text string) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	o := client.Outgoing{ID: id.String(), To: to, Text: text}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	var last error
	for {
		opts := cfg.options()
		opts.FailFast = last == nil // once the message may be on its way, wait for a node
		conn, err := client.DialV2(ctx, cfg.addrs, cfg.user, cfg.password, opts)
		if err != nil {
			if last != nil {
				err = fmt.Errorf("%w (after: %v)", err, last)
			}
			return describe(err, cfg.timeout)
		}
		out.setUser(conn.User())
		done, err := sendOn(ctx, conn, out, o)
		conn.Close()
		if done {
			return err
		}
		last = err
		pause := time.NewTimer(200 * time.Millisecond) // a busy or stopping node: not at once
		select {
		case <-ctx.Done():
			pause.Stop()
			return fmt.Errorf("send to %s: no receipt: %w (last: %v)", to, ctx.Err(), last)
		case <-pause.C:
		}
	}
}

// sendOn sends o on conn and waits for its answer. done is false when the
// connection ended first.
func sendOn(ctx context.Context, conn *client.Conn, out *printer, o client.Outgoing) (done bool, err error) {
	if err := conn.Resend(ctx, []client.Outgoing{o}); err != nil {
		return ctx.Err() != nil, err
	}
	for {
		select {
		case ev, ok := <-conn.Events():
			if !ok {
				return false, conn.Err()
			}
			switch ev := ev.(type) {
			case client.Stored:
				if ev.ID == o.ID {
					if out.json {
						out.post(func() (client.Outgoing, error) { return o, nil })
						out.event(ev)
					}
					return true, nil
				}
			case client.ErrorMessage:
				switch {
				case ev.ID != o.ID:
				case ev.Code == protocol.CodeBusy || ev.Code == protocol.CodeUnavailable || ev.Code == protocol.CodeShutdown:
					return false, &client.ServerError{Message: ev.Message, Code: ev.Code}
				default:
					err := fmt.Errorf("send to %s: %w", tui.Clean(o.To.String()), &client.ServerError{Message: ev.Message, Code: ev.Code})
					if out.json {
						out.event(ev)
						return true, &reportedError{err}
					}
					return true, err
				}
			}
		case <-ctx.Done():
			return true, fmt.Errorf("send to %s: no receipt: %w", o.To, ctx.Err())
		}
	}
}
