package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/store"
)

func newMigrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the store's schema and add the node list's new nodes",
		Long: `migrate applies every pending schema migration (safe to run from several nodes
at once: they take turns and each version is applied once), then adds the nodes of
the node list whose ids the store does not know yet. Nodes already in the store are
left as they are: the store is the truth once a node is in it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := g.prepareStore(cmd, g.log)
			if err != nil {
				return err
			}
			dsn, nodes, st, res := p.dsn, p.nodes, p.st, p.res
			defer st.Close()
			out := cmd.OutOrStdout()
			for _, m := range res.Applied {
				fmt.Fprintf(out, "applied %s\n", m.Name)
			}
			applied, err := store.AppliedMigrations(cmd.Context(), st)
			if err != nil {
				return err
			}
			version := int64(0)
			if len(applied) > 0 {
				version = applied[len(applied)-1]
			}
			fmt.Fprintf(out, "store %s at schema version %d\n", dsn, version)
			if nodes != nil {
				fmt.Fprintf(out, "node list %s: %d nodes, %d new to the store\n", g.nodes, len(nodes), res.NodesAdded)
			}
			return nil
		},
	}
}
