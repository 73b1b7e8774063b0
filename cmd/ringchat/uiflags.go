package main

import (
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// uiOptions are the settings of the full-screen client only.
type uiOptions struct {
	bell bool
}

// addUIFlags declares the full-screen client's flags on the root command.
func addUIFlags(root *cobra.Command, o *uiOptions) {
	f := root.Flags()
	f.BoolVar(&o.bell, "bell", true, "ring the terminal's bell when a message names you (env RINGCHAT_BELL)")
}

// resolveUI applies the environment to the UI settings; flags win.
func (g *globals) resolveUI(flags *pflag.FlagSet) (uiOptions, error) {
	o := g.ui
	if v := g.getenv("RINGCHAT_BELL"); v != "" && !flags.Changed("bell") {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, usagef("RINGCHAT_BELL=%q: want true or false", v)
		}
		o.bell = b
	}
	return o, nil
}
