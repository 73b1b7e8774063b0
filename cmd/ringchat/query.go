package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/tui"
)

// query logs in, runs one request, prints its answer and logs out.
func query(cmd *cobra.Command, g *globals, name string, run func(ctx context.Context, c *client.Conn, out *printer) error) error {
	cfg, err := g.resolve(cmd, nil)
	if err != nil {
		return err
	}
	if err := needUser(cfg, name); err != nil {
		return err
	}
	conn, err := dial(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	out := newPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg.json)
	out.setUser(conn.User())
	ctx, cancel := context.WithTimeout(cmd.Context(), cfg.timeout)
	defer cancel()
	return describe(run(ctx, conn, out), cfg.timeout)
}

func newWhoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "who",
		Short: "List the users online and their nodes",
		Long: `who logs in and prints the users online in the ring, one per line as
NAME<TAB>NODE (--json: the WHO object). Exit status 0, or 1 on failure.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return query(cmd, g, "who", func(ctx context.Context, c *client.Conn, out *printer) error {
				users, err := c.Who(ctx)
				if err != nil {
					return err
				}
				if out.json {
					out.event(client.Who{Users: users})
					return nil
				}
				for _, u := range users {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d\n", tui.Clean(u.Username), u.Node)
				}
				return nil
			})
		},
	}
}

func newGroupsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "groups",
		Short: "List the groups",
		Long: `groups logs in and prints every group, one per line as
GROUP<TAB>MEMBERS<TAB>member|- (whether the user is a member; --json: the
GROUPS object). Exit status 0, or 1 on failure.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return query(cmd, g, "groups", func(ctx context.Context, c *client.Conn, out *printer) error {
				groups, err := c.Groups(ctx)
				if err != nil {
					return err
				}
				if out.json {
					out.event(client.Groups{Groups: groups})
					return nil
				}
				for _, gr := range groups {
					member := "-"
					if gr.Member {
						member = "member"
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d\t%s\n", tui.Clean(gr.Group), gr.Members, member)
				}
				return nil
			})
		},
	}
}

func newHistoryCmd(g *globals) *cobra.Command {
	var to, group string
	var limit int
	cmd := &cobra.Command{
		Use:   "history (--to USER | --group GROUP)",
		Short: "Print the last messages of a conversation",
		Long: `history logs in and prints the last --limit messages between the user
and USER, or of GROUP (members only), oldest first, one per line (--json:
the HISTORY object). Exit status 0, or 1 on failure.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var with client.Recipient
			var err error
			switch {
			case (to == "") == (group == ""):
				return usagef("history needs exactly one of --to USER and --group GROUP")
			case to != "":
				with, err = client.ParseRecipient(to)
			default:
				with, err = client.ParseRecipient("#" + strings.TrimPrefix(group, "#"))
			}
			if err != nil {
				return &usageError{err}
			}
			if limit < 1 || limit > 100 {
				return usagef("--limit must be 1 to 100")
			}
			return query(cmd, g, "history", func(ctx context.Context, c *client.Conn, out *printer) error {
				msgs, err := c.History(ctx, with, limit)
				if err != nil {
					return err
				}
				out.event(client.History{To: with, Messages: msgs})
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the conversation with this user")
	cmd.Flags().StringVar(&group, "group", "", "the conversation of this group")
	cmd.Flags().IntVar(&limit, "limit", tui.DefaultHistory, "how many messages (1 to 100)")
	return cmd
}
