// Command ringnode is the ringchat daemon and its administration tool.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err))
}

// exitCode prints err as one line on stderr and maps it to an exit status:
// 0 success, 2 usage errors, 1 everything else.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	fmt.Fprintln(os.Stderr, "ringnode: "+msg)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	// cobra's own argument errors carry no type; recognise their wording.
	for _, prefix := range []string{"unknown command", "accepts ", "requires ", "required flag", "invalid argument"} {
		if strings.HasPrefix(err.Error(), prefix) {
			return 2
		}
	}
	return 1
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }
