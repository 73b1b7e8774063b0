package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/client"
)

func newRegisterCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "register",
		Short: "Make an account: --user with --password (needed on nodes run with --auth password)",
		Long: `register makes the account --user with the password --password (or
RINGCHAT_PASSWORD) at the first node that answers, without logging in. A name in
use is refused. Then log in as usual with the same --user and --password.
Exit status 0, or 1 on failure.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.resolve(cmd, nil)
			if err != nil {
				return err
			}
			if err := needUser(cfg, "register"); err != nil {
				return err
			}
			if cfg.password == "" {
				return usagef("register needs --password or RINGCHAT_PASSWORD")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), cfg.timeout)
			defer cancel()
			var last error
			for _, addr := range cfg.addrs {
				c, err := client.Dial(ctx, addr, client.Options{Timeout: cfg.timeout})
				if err != nil {
					last = err
					continue
				}
				err = c.Register(ctx, cfg.user, cfg.password)
				c.Close()
				if err != nil {
					return describe(err, cfg.timeout)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "registered %s\n", cfg.user)
				return nil
			}
			return describe(fmt.Errorf("no node answered: %w", last), cfg.timeout)
		},
	}
}
