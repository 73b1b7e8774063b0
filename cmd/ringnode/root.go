package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/logging"
	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// globals are the flags every command shares.
type globals struct {
	db        string
	dbFile    string
	dbCA      string
	nodes     string
	logLevel  string
	logFormat string

	usedDBFile bool // parseDSN read the DSN from --db-file

	log     zerolog.Logger
	fromEnv map[string]string // flags set from the environment: flag -> variable
}

// envPrefix is the prefix of the environment fallbacks: --log-level falls
// back to RINGNODE_LOG_LEVEL, and so on.
const envPrefix = "RINGNODE_"

// envAliases lists extra environment variables for some flags, checked
// before the RINGNODE_ one.
var envAliases = map[string][]string{
	"db": {"RINGCHAT_DB"},
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "ringnode",
		Short: "ringchat token-ring chat server node",
		Long: `ringnode runs one node of a ringchat token ring and administers the ring's store.

Every flag can also be set in the environment: --log-level as RINGNODE_LOG_LEVEL,
and so on; --db also as RINGCHAT_DB. A flag given on the command line wins.

A DSN with a password belongs in a file (--db-file, mode 0600) or the
environment, never on a command line, where ps shows it to every user.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			fromEnv, err := applyEnv(cmd.Flags())
			if err != nil {
				return usageError{err}
			}
			log, err := logging.New(os.Stderr, g.logLevel, g.logFormat)
			if err != nil {
				for _, f := range []string{"log-level", "log-format"} {
					if name, ok := fromEnv[f]; ok {
						err = fmt.Errorf("%w (from environment %s)", err, name)
					}
				}
				return usageError{err}
			}
			g.log = log
			g.fromEnv = fromEnv
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.db, "db", store.DefaultDSN,
		"store DSN: mysql://user:pass@host:port/db, user:pass@tcp(host:port)/db or sqlite:PATH")
	pf.StringVar(&g.dbFile, "db-file", "", "read the store DSN from this file (keep it mode 0600): a password stays off the command line")
	pf.StringVar(&g.dbCA, "db-ca", "", "PEM file of the CA that signed MariaDB's certificate: registers tls=custom, used when the DSN names no tls")
	pf.StringVarP(&g.nodes, "nodes", "f", "nodes.csv", "node list (CSV: id,host,coordination_port,client_port)")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	pf.StringVar(&g.logFormat, "log-format", logging.FormatAuto, "log format: console, json, or auto (console on a terminal)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newMigrateCmd(g), newStatusCmd(g), newVersionCmd(), newRunCmd(g), newClusterCmd(g), newKeygenCmd(), newUserCmd(g))
	// The original system's invocation, ringnode -i 1 -f nodes.csv -e
	// CHANG_ROBERTS -d, runs a node without the "run" word.
	legacy := &runOpts{}
	addRunFlags(root.Flags(), legacy)
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown command %q (see ringnode --help)", args[0])}
		}
		if cmd.Flags().Changed("id") {
			return runNode(cmd, g, legacy)
		}
		return cmd.Help()
	}
	return root
}

// applyEnv sets every flag not given on the command line from its
// environment variable, if that is set, and returns which variable set
// which flag.
func applyEnv(fs *pflag.FlagSet) (map[string]string, error) {
	var firstErr error
	fromEnv := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		names := append(append([]string{}, envAliases[f.Name]...), envPrefix+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")))
		for _, name := range names {
			v, ok := os.LookupEnv(name)
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, v); err != nil {
				firstErr = fmt.Errorf("environment %s=%q: %w", name, v, err)
			}
			fromEnv[f.Name] = name
			return
		}
	})
	return fromEnv, firstErr
}

// loadNodes reads the node list. A missing file is only an error when the
// user named it; the store is the truth once it has nodes.
func (g *globals) loadNodes(cmd *cobra.Command) ([]nodelist.Entry, error) {
	nodes, err := nodelist.Load(g.nodes)
	if err != nil {
		if os.IsNotExist(err) && !cmd.Flags().Changed("nodes") && os.Getenv(envPrefix+"NODES") == "" {
			g.log.Info().Str("nodes", g.nodes).Msg("no node list here; using the nodes already in the store")
			return nil, nil
		}
		return nil, err
	}
	return nodes, nil
}

// parseDSN resolves the store DSN: --db or --db-file (a flag on the command
// line wins over the environment), with --db-ca's TLS configuration.
func (g *globals) parseDSN(cmd *cobra.Command) (store.DSN, error) {
	raw := g.db
	if g.dbFile != "" {
		_, dbEnv := g.fromEnv["db"]
		_, fileEnv := g.fromEnv["db-file"]
		dbCmd := cmd.Flags().Changed("db") && !dbEnv
		switch {
		case dbCmd && !fileEnv:
			return store.DSN{}, usageError{errors.New("give the store as --db or --db-file, not both")}
		case dbCmd: // --db on the command line wins over RINGNODE_DB_FILE
		case dbEnv && fileEnv:
			return store.DSN{}, usageError{fmt.Errorf("both %s and %s are set: keep one", g.fromEnv["db"], g.fromEnv["db-file"])}
		default:
			b, err := os.ReadFile(g.dbFile)
			if err != nil {
				return store.DSN{}, usageError{fmt.Errorf("--db-file: %w", err)}
			}
			raw = strings.TrimSpace(string(b))
			g.usedDBFile = true
			if raw == "" {
				return store.DSN{}, usageError{fmt.Errorf("--db-file %s is empty: it should hold the store DSN", g.dbFile)}
			}
			if fi, err := os.Stat(g.dbFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
				g.log.Warn().Str("file", g.dbFile).Str("mode", fi.Mode().Perm().String()).
					Msg("the DSN file is readable by other users: chmod 600 it")
			}
		}
	}
	if g.dbCA != "" {
		if err := store.RegisterTLSCA(store.TLSCustom, g.dbCA); err != nil {
			return store.DSN{}, usageError{fmt.Errorf("--db-ca: %w", err)}
		}
	}
	dsn, err := store.ParseDSN(raw)
	if err != nil {
		return dsn, usageError{err}
	}
	if g.dbCA != "" {
		if dsn.Dialect != "mysql" {
			return dsn, usageError{fmt.Errorf("--db-ca is for a MariaDB store; %s is not one", dsn)}
		}
		if dsn.MySQL.TLSConfig == "" {
			dsn.MySQL.TLSConfig = store.TLSCustom
		}
	}
	return dsn, nil
}

// prepared is an open, migrated store with the node list's new nodes added.
type prepared struct {
	dsn   store.DSN
	nodes []nodelist.Entry // the node list as read (nil if there was none)
	st    store.Store
	res   store.Prepared
}

// prepareStore parses --db, reads the node list and prepares the store:
// what migrate, run and cluster all start with. The store logs to log
// (a change of database server). The caller closes p.st.
func (g *globals) prepareStore(cmd *cobra.Command, log zerolog.Logger) (prepared, error) {
	var p prepared
	var err error
	if p.dsn, err = g.parseDSN(cmd); err != nil {
		return p, err
	}
	if p.nodes, err = g.loadNodes(cmd); err != nil {
		return p, err
	}
	p.st, p.res, err = store.Prepare(cmd.Context(), p.dsn, p.nodes, store.Options{Log: log})
	return p, err
}
