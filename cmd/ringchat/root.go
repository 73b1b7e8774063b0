package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/tui"
)

const defaultNode = "127.0.0.1:8001"

// globals are the flags every subcommand shares.
type globals struct {
	node     string
	nodes    string
	user     string
	password string
	timeout  time.Duration
	json     bool
	plain    bool
	tls      bool
	ca       string
	getenv   func(string) string
	ui       uiOptions  // the full-screen client's
	config   string     // --config
	file     fileConfig // what the config file sets
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
	return newRootCmdWith(&globals{getenv: getenv})
}

// rootLong is the root command's help.
const rootLong = `ringchat logs in at a ringnode's client port (protocol 2) and chats.

On a terminal it is a full-screen chat: conversations as tabs with unread
counts, the messages of the current one with timestamps and receipts on
your own (… on its way, ✓ stored in the ring), a status bar and an input
line. When standard input or output is not a terminal, or with --plain or
--json, it reads one command per input line and prints one event per line
(--json: one JSON object per line). The commands:
` + tui.HelpText + `
If the node dies, stops answering, or says it cannot reach the store or
the ring, ringchat logs in again at another node of --nodes or of those the
node listed at login (kept in $XDG_CACHE_HOME/ringchat/nodes.json for the
next start), or at the same address, with backoff; it receives what was
queued meanwhile and sends again, once, whatever you typed that has no
receipt yet.

The node is --node (HOST:PORT, or a node id of --nodes), else the
positional HOST PORT, else $RINGCHAT_NODE, else the first node of
--nodes, else ` + defaultNode + `. The user is --user, else $RINGCHAT_USER, else
asked for. --password (else $RINGCHAT_PASSWORD) claims the name on first
use and is needed from then on.

A config file (--config, else $RINGCHAT_CONFIG, else
$XDG_CONFIG_HOME/ringchat/config.toml or ~/.config/ringchat/config.toml)
may set node, nodes, user, bell, log_dir and a [colors] table; flags and
the environment win over it. See the README.

--tls (else RINGCHAT_TLS=1) connects over TLS to a node started with
--tls-cert, verifying its certificate against the system's roots, or
against the CA in --ca FILE (else $RINGCHAT_CA; --ca implies --tls).

Exit status: 0 success, 1 failure (no login, refused, messages not sent),
2 a mistake in the command line.`

// newRootCmdWith is the root command parsing its flags into g.
func newRootCmdWith(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "ringchat [--node HOST:PORT | HOST PORT] [--user NAME] [--nodes FILE]",
		Short:         "Chat on a ringchat ring",
		Long:          rootLong,
		Args:          usageArgs(rootArgs),
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          g.runRoot,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	f := root.PersistentFlags()
	f.StringVarP(&g.node, "node", "n", "", "the node to log in at: HOST:PORT of its client port, or its id in --nodes (env RINGCHAT_NODE)")
	f.StringVar(&g.nodes, "nodes", "", "node list (nodes.csv) whose client ports to fail over to (env RINGCHAT_NODES)")
	f.StringVarP(&g.user, "user", "u", "", "user name to log in as (env RINGCHAT_USER)")
	f.StringVar(&g.password, "password", "", "password (env RINGCHAT_PASSWORD): claims a name never used before; set one for a used name with /passwd")
	f.DurationVar(&g.timeout, "timeout", client.DefaultTimeout, "bound on logging in and on each request")
	f.BoolVar(&g.json, "json", false, "line mode, each event one JSON object per line")
	f.BoolVar(&g.tls, "tls", false, "connect over TLS, verifying the node's certificate (env RINGCHAT_TLS)")
	f.StringVar(&g.config, "config", "", "config file (env RINGCHAT_CONFIG; default $XDG_CONFIG_HOME/ringchat/config.toml or ~/.config/ringchat/config.toml, if there is one)")
	f.StringVar(&g.ca, "ca", "", "PEM file of the CA that signed the nodes' certificates (implies --tls; default: the system's roots; env RINGCHAT_CA)")
	root.Flags().BoolVar(&g.plain, "plain", false, "line mode even on a terminal")
	addUIFlags(root, &g.ui)
	root.AddCommand(newSendCmd(g), newTailCmd(g), newWhoCmd(g), newGroupsCmd(g), newHistoryCmd(g), newRegisterCmd(g), newVersionCmd())
	return root
}

// runRoot chats: full-screen when standard input and output are both
// terminals (and neither --plain nor --json is given), else in line mode.
func (g *globals) runRoot(cmd *cobra.Command, args []string) error {
	cfg, err := g.resolve(cmd, args)
	if err != nil {
		return err
	}
	ui, err := g.resolveUI(cmd.Flags())
	if err != nil {
		return err
	}
	in, out := cmd.InOrStdin(), cmd.OutOrStdout()
	if fin, fout, ok := terminals(in, out); ok && !cfg.plain && !cfg.json {
		return runUI(cmd.Context(), cfg, ui, fin, fout, cmd.ErrOrStderr())
	}
	return runLineMode(cmd.Context(), cfg, in, out, cmd.ErrOrStderr())
}

// terminals reports whether in and out are both terminals.
func terminals(in io.Reader, out io.Writer) (*os.File, *os.File, bool) {
	fin, ok1 := in.(*os.File)
	fout, ok2 := out.(*os.File)
	if !ok1 || !ok2 || !isatty.IsTerminal(fin.Fd()) || !isatty.IsTerminal(fout.Fd()) {
		return nil, nil, false
	}
	return fin, fout, true
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
	addrs    []string // the chosen node first, then the others of the node list
	user     string
	password string
	timeout  time.Duration
	json     bool
	plain    bool
	tls      *tls.Config // nil: plain TCP
	// cache keeps the ring's nodes as the node logged in to lists them;
	// addrs holds those of the chosen node's ring already.
	cache nodeCache
}

// options are the connection options of cfg.
func (cfg config) options() client.Options {
	return client.Options{Timeout: cfg.timeout, TLS: cfg.tls}
}

// resolve applies positional arguments, the environment, the node list
// and defaults.
func (g *globals) resolve(cmd *cobra.Command, args []string) (config, error) {
	flags := cmd.Flags()
	if err := g.loadConfigFile(flags); err != nil {
		return config{}, err
	}
	cfg := config{user: g.user, password: g.password, timeout: g.timeout, json: g.json, plain: g.plain}
	env := func(name, flag, val string) string {
		if !flags.Changed(flag) && g.getenv(name) != "" {
			return g.getenv(name)
		}
		return val
	}
	node, err := g.nodeArg(flags, args, env)
	if err != nil {
		return cfg, err
	}
	listFile := env("RINGCHAT_NODES", "nodes", g.nodes)
	cfg.user = env("RINGCHAT_USER", "user", cfg.user)
	cfg.password = env("RINGCHAT_PASSWORD", "password", cfg.password)
	if cfg.timeout <= 0 {
		return cfg, usagef("--timeout must be positive")
	}
	if cfg.tls, err = g.tlsConfig(flags, env); err != nil {
		return cfg, err
	}
	if cfg.addrs, err = nodeAddrs(node, listFile); err != nil {
		return cfg, err
	}
	cfg.cache = newNodeCache(g.getenv)
	cfg.addrs = cfg.cache.extend(cfg.addrs)
	return cfg, nil
}

// nodeArg is the node asked for: the positional HOST PORT, else --node,
// else $RINGCHAT_NODE (env reads the environment unless the flag is
// given). It is "" when none is.
func (g *globals) nodeArg(flags *pflag.FlagSet, args []string, env func(name, flag, val string) string) (string, error) {
	switch {
	case len(args) == 2 && flags.Changed("node"):
		return "", usagef("give the node either as --node or as HOST PORT, not both")
	case len(args) == 2:
		port, err := strconv.Atoi(args[1])
		if err != nil || port < 1 || port > 65535 {
			return "", usagef("invalid port %q", args[1])
		}
		return net.JoinHostPort(args[0], args[1]), nil
	default:
		return env("RINGCHAT_NODE", "node", g.node), nil
	}
}

// tlsConfig is the TLS configuration of --tls (else $RINGCHAT_TLS) and
// --ca (else $RINGCHAT_CA; it implies --tls), or nil for plain TCP.
func (g *globals) tlsConfig(flags *pflag.FlagSet, env func(name, flag, val string) string) (*tls.Config, error) {
	useTLS := g.tls
	if !flags.Changed("tls") && g.getenv("RINGCHAT_TLS") != "" {
		v, err := strconv.ParseBool(g.getenv("RINGCHAT_TLS"))
		if err != nil {
			return nil, usagef("RINGCHAT_TLS=%q: want true or false", g.getenv("RINGCHAT_TLS"))
		}
		useTLS = v
	}
	ca := env("RINGCHAT_CA", "ca", g.ca)
	if ca == "" && !useTLS {
		return nil, nil
	}
	tc, err := clientTLS(ca)
	if err != nil {
		return nil, &usageError{err}
	}
	return tc, nil
}

// nodeAddrs is the client addresses to log in at: node (HOST:PORT, or
// the id of a node in the node list listFile) first, then the other nodes
// of the list; with neither, defaultNode.
func nodeAddrs(node, listFile string) ([]string, error) {
	var list []nodelist.Entry
	if listFile != "" {
		var err error
		if list, err = nodelist.Load(listFile); err != nil {
			return nil, &usageError{fmt.Errorf("--nodes: %w", err)}
		}
	}
	if id, err := strconv.ParseInt(node, 10, 64); err == nil {
		if list == nil {
			return nil, usagef("--node %s is a node id: give the node list with --nodes", node)
		}
		i := slices.IndexFunc(list, func(n nodelist.Entry) bool { return n.ID == id })
		if i < 0 {
			return nil, usagef("no node %d in %s", id, listFile)
		}
		node = list[i].ClientAddr()
	}
	var addrs []string
	switch {
	case node != "":
		if _, _, err := net.SplitHostPort(node); err != nil {
			return nil, usagef("invalid node address %q: want HOST:PORT", node)
		}
		addrs = []string{node}
	case len(list) == 0:
		addrs = []string{defaultNode}
	}
	for _, n := range list {
		if a := n.ClientAddr(); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

// clientTLS is the TLS configuration for --tls: the system's roots, or
// only the CA in caFile.
func clientTLS(caFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in the file", caFile)
	}
	return tc, nil
}

// startSession logs in within the timeout, asking for the notices of
// features (protocol.FeatureAway, ...), and keeps the login alive. It
// acknowledges cumulatively (ACK_UPTO) where the node grants it.
func startSession(ctx context.Context, cfg config, features ...string) (*client.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	opts := cfg.options()
	opts.Features = features
	opts.CumulativeAck = true // one ACK_UPTO per burst where the node has it; ids where not
	s, err := client.StartSession(ctx, client.SessionConfig{Addrs: cfg.addrs, User: cfg.user, Password: cfg.password,
		Options: opts, OnNodes: cfg.cache.save})
	if err != nil {
		return nil, describeLogin(err, cfg)
	}
	return s, nil
}

// interrupted tells an error caused by an interrupt (Ctrl-C, SIGTERM): the
// user asked to stop, which is no failure.
func interrupted(ctx context.Context) bool { return ctx.Err() != nil }

// dial logs in at the first node that lets the user in, for one-shot
// commands: nothing is acknowledged, so messages that arrive meanwhile
// stay queued for the user's real client.
func dial(ctx context.Context, cfg config) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	opts := cfg.options()
	opts.FailFast = true
	opts.Features = []string{protocol.FeatureFailover} // the answer lists the ring's nodes, kept for the next start
	c, err := client.DialV2(ctx, cfg.addrs, cfg.user, cfg.password, opts)
	if err != nil {
		return nil, describeLogin(err, cfg)
	}
	cfg.cache.save(c.Nodes())
	return c, nil
}

// describe rewords a request's timeout for people.
func describe(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, client.ErrNothingListens):
		return fmt.Errorf("%w (is the ring running? `make run` starts a local one)", err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w (no answer from the server within %v)", err, timeout)
	}
	return err
}

// describeLogin rewords a failed login as describe does, with a hint
// when nothing listens and ringchat knows no other node of the ring.
func describeLogin(err error, cfg config) error {
	if len(cfg.addrs) != 1 || !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, client.ErrNothingListens) {
		return describe(err, cfg.timeout)
	}
	const hint = "ringchat knows no other node of this ring: start that node, or give the others with --nodes FILE (the ring's nodes.csv)"
	if errors.Is(err, client.ErrNothingListens) {
		return fmt.Errorf("%w (is the ring running? %s)", err, hint)
	}
	return fmt.Errorf("%w (nothing listens at %s; %s)", err, cfg.addrs[0], hint)
}

// needUser is the check of the one-shot commands.
func needUser(cfg config, cmd string) error {
	if cfg.user == "" {
		return usagef("%s needs --user or RINGCHAT_USER", cmd)
	}
	return nil
}
