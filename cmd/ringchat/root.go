package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/spf13/cobra"
)

const defaultNode = "127.0.0.1:8001"

// globals are the flags every subcommand shares.
type globals struct {
	node    string
	user    string
	timeout time.Duration
	json    bool
	getenv  func(string) string
}

// execute runs ringchat with args, printing any error to stderr.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return executeWith(ctx, os.Getenv, args, stdin, stdout, stderr)
}

// executeWith is execute with the environment given as getenv.
func executeWith(ctx context.Context, getenv func(string) string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd(getenv)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var u *usageError
	var r *reportedError
	switch {
	case err == nil, errors.As(err, &r):
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "ringchat: %v\nRun 'ringchat --help' for usage.\n", err)
	default:
		fmt.Fprintf(stderr, "ringchat: %v\n", err)
	}
	return err
}

func newRootCmd(getenv func(string) string) *cobra.Command {
	g := &globals{getenv: getenv}
	root := &cobra.Command{
		Use:   "ringchat [--node HOST:PORT | HOST PORT] [--user NAME]",
		Short: "Chat on a ringchat ring",
		Long: `ringchat connects to a ringnode's client port, logs in and reads commands
from standard input, one per line:

` + helpText + `
Received messages and errors are printed one per line (--json: one JSON
object per line). End of input or /quit closes the connection.

The node is --node, else the positional HOST PORT, else $RINGCHAT_NODE, else
` + defaultNode + `. The user is --user, else $RINGCHAT_USER, else the first
input line.`,
		Args:          usageArgs(rootArgs),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.resolve(cmd, args)
			if err != nil {
				return err
			}
			return runLineMode(cmd.Context(), cfg, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })

	f := root.PersistentFlags()
	f.StringVarP(&g.node, "node", "n", defaultNode, "client address HOST:PORT of the node (env RINGCHAT_NODE)")
	f.StringVarP(&g.user, "user", "u", "", "user name to log in as (env RINGCHAT_USER)")
	f.DurationVar(&g.timeout, "timeout", client.DefaultTimeout, "bound on connecting, logging in and each request")
	f.BoolVar(&g.json, "json", false, "print each event as one JSON object per line")

	root.AddCommand(newSendCmd(g), newVersionCmd())
	return root
}

// rootArgs accepts no arguments or the original client's HOST PORT.
func rootArgs(_ *cobra.Command, args []string) error {
	switch len(args) {
	case 0, 2:
		return nil
	case 1:
		return fmt.Errorf("unknown command %q (or give both HOST and PORT)", args[0])
	default:
		return fmt.Errorf("too many arguments: %q", args)
	}
}

// config is what a command needs to connect.
type config struct {
	node    string
	user    string
	timeout time.Duration
	json    bool
}

// resolve applies positional arguments, environment and defaults.
func (g *globals) resolve(cmd *cobra.Command, args []string) (config, error) {
	cfg := config{node: g.node, user: g.user, timeout: g.timeout, json: g.json}
	nodeSet := cmd.Flags().Changed("node")
	switch {
	case len(args) == 2 && nodeSet:
		return cfg, usagef("give the node either as --node or as HOST PORT, not both")
	case len(args) == 2:
		port, err := strconv.Atoi(args[1])
		if err != nil || port < 1 || port > 65535 {
			return cfg, usagef("invalid port %q", args[1])
		}
		cfg.node = net.JoinHostPort(args[0], args[1])
	case !nodeSet && g.getenv("RINGCHAT_NODE") != "":
		cfg.node = g.getenv("RINGCHAT_NODE")
	}
	if _, _, err := net.SplitHostPort(cfg.node); err != nil {
		return cfg, usagef("invalid node address %q: want HOST:PORT", cfg.node)
	}
	if !cmd.Flags().Changed("user") {
		cfg.user = g.getenv("RINGCHAT_USER")
	}
	if cfg.timeout <= 0 {
		return cfg, usagef("--timeout must be positive")
	}
	return cfg, nil
}

// connect dials cfg.node and logs in as cfg.user, both within cfg.timeout.
func connect(ctx context.Context, cfg config) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	conn, err := client.Dial(ctx, cfg.node, client.Options{Timeout: cfg.timeout})
	if err != nil {
		return nil, err
	}
	if err := conn.Login(ctx, cfg.user); err != nil {
		conn.Close()
		return nil, describe(err, cfg.timeout)
	}
	return conn, nil
}

// describe rewords a request's timeout for people.
func describe(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer from the server within %v)", err, timeout)
	}
	return err
}
