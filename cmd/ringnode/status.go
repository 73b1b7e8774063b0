package main

import (
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/status"
	"github.com/ringchat/ringchat/internal/store"
)

// probeTimeout bounds the wait for each node's answer.
const probeTimeout = 500 * time.Millisecond

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON, probe bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the ring order, the coordinator and its epoch, and who is online where",
		Long: `status reads the store and prints the ring as the successor pointers describe it,
the coordinator and its epoch, every node, and the users logged in at each node.
Each node is asked whether it answers (its client port takes a connection
within 500 ms): the store's rows are the ring as last recorded, and stay so
after the nodes stop. It changes nothing. --json prints one JSON object for
scripts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("nodes") {
				// Named, the node list must be there, as for run.
				if _, err := g.loadNodes(cmd); err != nil {
					return err
				}
			}
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
			if probe {
				r.Probe(cmd.Context(), probeTimeout)
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
	cmd.Flags().BoolVar(&probe, "probe", true, "ask each node whether it answers (a TCP connection to its client port)")
	return cmd
}
