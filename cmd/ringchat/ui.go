package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/tui"
)

// runUI is the root command on a terminal: log in, then the full-screen
// chat until /quit.
func runUI(ctx context.Context, cfg config, ui uiOptions, in, out *os.File, stderr io.Writer) error {
	if cfg.user == "" {
		fmt.Fprint(stderr, "username: ")
		line, err := bufio.NewReader(io.LimitReader(in, 256)).ReadString('\n')
		if cfg.user = strings.TrimSpace(line); cfg.user == "" {
			if err != nil && ctx.Err() == nil {
				return usagef("no user name: use --user or set RINGCHAT_USER")
			}
			return usagef("no user name given")
		}
	}
	if ui.logDir != "" {
		if err := os.MkdirAll(ui.logDir, 0o700); err != nil {
			return usagef("--log-dir: %v", err)
		}
	}
	fmt.Fprintf(stderr, "connecting to %s as %s…\n", cfg.addrs[0], tui.Clean(cfg.user))
	s, err := startSession(ctx, cfg, protocol.FeatureAway, protocol.FeatureRead, protocol.FeatureTyping)
	if err != nil {
		if interrupted(ctx) {
			return nil
		}
		return err
	}
	defer s.Close()
	addr, node, _ := s.Where()
	tc := tui.Config{Backend: s, Timeout: cfg.timeout, Addr: addr, Node: node,
		NoBell: !ui.bell, NoReceipts: !ui.receipts, LogDir: ui.logDir, Colors: ui.colors, StateFile: stateFile(ui, cfg.user)}
	return tui.Run(ctx, tc, s.Events(), in, out)
}

// stateFile is the file keeping user's open conversations, if any.
func stateFile(ui uiOptions, user string) string {
	if ui.stateDir == "" {
		return ""
	}
	return tui.StateFile(ui.stateDir, user)
}
