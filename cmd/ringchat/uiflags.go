package main

import (
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// uiOptions are the settings of the full-screen client only.
type uiOptions struct {
	bell     bool
	logDir   string
	stateDir string // where the open conversations are kept; empty: nowhere
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
	o.stateDir = stateDir(g.getenv)
	return o, nil
}

// stateDir is ringchat's directory under the user's state directory:
// $XDG_STATE_HOME/ringchat, else ~/.local/state/ringchat.
func stateDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "ringchat")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "ringchat")
	}
	return ""
}
