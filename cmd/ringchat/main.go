// Command ringchat is the terminal client of a ringchat ring: it logs in at
// a ringnode's client port with protocol 2 (docs/PROTOCOL.md) and chats in
// a full-screen terminal UI, in line mode for scripts, or with one-shot
// commands (send, tail, who, groups, history).
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// exitCode maps an error from execute to the process status: 0 ok,
// 1 failure, 2 usage.
func exitCode(err error) int {
	var u *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}
