package main

import (
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// uiOptions are the settings of the full-screen client only.
type uiOptions struct {
	bell   bool
	logDir string
}

// addUIFlags declares the full-screen client's flags on the root command.
func addUIFlags(root *cobra.Command, o *uiOptions) {
	f := root.Flags()
	f.BoolVar(&o.bell, "bell", true, "ring the terminal's bell when a message names you (env RINGCHAT_BELL)")
	f.StringVar(&o.logDir, "log-dir", "", "append each conversation to DIR/NAME.log, as irssi's autolog (env RINGCHAT_LOG_DIR)")
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
	if v := g.getenv("RINGCHAT_LOG_DIR"); v != "" && !flags.Changed("log-dir") {
		o.logDir = v
	}
	return o, nil
}
