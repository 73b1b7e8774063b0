package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ringchat/ringchat/internal/buildinfo"
	"github.com/ringchat/ringchat/internal/store"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the schema version this binary brings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			schema, err := store.SchemaVersion()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ringnode %s, schema %d\n", buildinfo.String(), schema)
			return nil
		},
	}
}
