package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/status"
	"github.com/ringchat/ringchat/internal/store"
)

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the ring order, the coordinator and its epoch, and who is online where",
		Long: `status reads the store and prints the ring as the successor pointers describe it,
the coordinator and its epoch, every node, and the users logged in at each node.
It changes nothing. --json prints one JSON object for scripts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn, err := g.parseDSN(cmd)
			if err != nil {
				return err
			}
			st, err := store.OpenDSN(cmd.Context(), dsn, store.Options{})
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := status.Collect(cmd.Context(), st, dsn.String())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			return r.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
