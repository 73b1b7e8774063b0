package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/spf13/cobra"
)

func newSendCmd(g *globals) *cobra.Command {
	var to, group string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "send (--to USER | --group GROUP) TEXT...",
		Short: "Send one message and exit",
		Long: `send connects, logs in, sends TEXT (the arguments joined by spaces) to a
user or a group, and exits: 0 when sent, 1 with the server's error.

Protocol v1 has no acknowledgement for a message, so send half-closes the
connection and waits up to --wait for the server to report an error and
close. Messages that arrive for the user meanwhile are printed.`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.resolve(cmd, nil)
			if err != nil {
				return err
			}
			if cfg.user == "" {
				return usagef("send needs --user or RINGCHAT_USER")
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
			if strings.TrimSpace(text) == "" {
				return usagef("nothing to send")
			}
			out := newPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg.json)
			return sendOnce(cmd.Context(), cfg, out, rcpt, text, wait)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "user to send to")
	cmd.Flags().StringVar(&group, "group", "", "group to send to")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Second, "how long to wait for an error from the server after sending")
	return cmd
}

// sendOnce sends one message and reports the first server error that
// arrives before the server closes the connection or wait passes.
func sendOnce(ctx context.Context, cfg config, out *printer, to client.Recipient, text string, wait time.Duration) error {
	conn, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	out.setUser(conn.User())

	serverErr := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for ev := range conn.Events() {
			switch ev := ev.(type) {
			case client.ErrorMessage:
				select {
				case serverErr <- ev.Message:
				default:
				}
			case client.ChatMessage:
				out.event(ev)
			}
		}
	}()

	sendCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := conn.Send(sendCtx, to, text); err != nil {
		return err
	}
	hangUp(ctx, conn, drained, wait)
	select {
	case msg := <-serverErr:
		return fmt.Errorf("send to %s: %w", to, &client.ServerError{Message: msg})
	default:
	}
	if err := conn.Err(); err != nil && !errors.Is(err, client.ErrClosed) && !errors.Is(err, client.ErrServerClosed) {
		return err
	}
	return nil
}
