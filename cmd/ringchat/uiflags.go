package main

import (
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/tui"
)

// uiOptions are the settings of the full-screen client only.
type uiOptions struct {
	bell     bool
	receipts bool
	logDir   string
	colors   tui.Colors
	stateDir string // where the open conversations are kept; empty: nowhere
}

// addUIFlags declares the full-screen client's flags on the root command.
func addUIFlags(root *cobra.Command, o *uiOptions) {
	f := root.Flags()
	f.BoolVar(&o.bell, "bell", true, "ring the terminal's bell when a message names you (env RINGCHAT_BELL)")
	f.BoolVar(&o.receipts, "receipts", true, "tell the other user of a direct conversation when you have read their messages (✓✓) and when you are typing (env RINGCHAT_RECEIPTS)")
	f.StringVar(&o.logDir, "log-dir", "", "append each conversation to DIR/NAME.log, as irssi's autolog (env RINGCHAT_LOG_DIR)")
}

// resolveUI applies the environment and the config file (read by
// resolve) to the UI settings: flags win, then the environment.
func (g *globals) resolveUI(flags *pflag.FlagSet) (uiOptions, error) {
	o := g.ui
	if g.file.bell != nil && !flags.Changed("bell") {
		o.bell = *g.file.bell
	}
	if g.file.receipts != nil && !flags.Changed("receipts") {
		o.receipts = *g.file.receipts
	}
	if g.file.logDir != "" && !flags.Changed("log-dir") {
		o.logDir = g.file.logDir
	}
	o.colors = g.file.colors
	if v := g.getenv("RINGCHAT_BELL"); v != "" && !flags.Changed("bell") {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, usagef("RINGCHAT_BELL=%q: want true or false", v)
		}
		o.bell = b
	}
	if v := g.getenv("RINGCHAT_RECEIPTS"); v != "" && !flags.Changed("receipts") {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, usagef("RINGCHAT_RECEIPTS=%q: want true or false", v)
		}
		o.receipts = b
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
