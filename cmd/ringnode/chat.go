package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/store"
)

// chatOpts are the flags of the client port.
type chatOpts struct {
	listen     string
	maxClients int
	maxPerIP   int
	tlsCert    string
	tlsKey     string
	rate       float64
	idle       time.Duration
	retention  time.Duration
	auth       string
}

func addChatFlags(fs *pflag.FlagSet, o *chatOpts) {
	d := chat.DefaultConfig(1)
	fs.StringVar(&o.listen, "client-listen", "", "host:port for chat clients (default: the node's client port, on its address if loopback, else all interfaces)")
	fs.IntVar(&o.maxClients, "max-clients", d.MaxClients, "most chat clients connected to this node at once")
	fs.IntVar(&o.maxPerIP, "max-clients-per-ip", d.MaxClientsPerIP, "most chat clients connected from one source address at once")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve the client port over TLS with this certificate (PEM; with --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the private key (PEM) of --tls-cert")
	fs.Float64Var(&o.rate, "client-rate", d.RateLimit, "lines a second one client may send (a burst of four seconds' worth is allowed); 0: no limit")
	fs.DurationVar(&o.idle, "client-idle-timeout", d.IdleTimeout, "close a protocol-2 session silent this long (its client sends ALIVE); protocol 1 is never closed for silence (TCP keep-alive finds its dead peers)")
	fs.DurationVar(&o.retention, "history-retention", d.Retention, "keep delivered messages this long for HISTORY; 0: forever")
	fs.StringVar(&o.auth, "auth", "", "login policy: open (protocol-1 clients and names without passwords; the default when every node and the client port are on loopback) or password (protocol 2 and a password for every login; the default otherwise)")
}

// authMode is the login policy of node self: --auth, else open when every
// node of the table and the client port are on loopback (a development
// ring on one machine), else password.
func authMode(o chatOpts, self store.NodeRow, table []store.NodeRow) (chat.AuthMode, error) {
	if o.auth != "" {
		m, err := chat.ParseAuthMode(o.auth)
		if err != nil {
			return "", usageError{fmt.Errorf("--auth: %w", err)}
		}
		return m, nil
	}
	for _, n := range table {
		if !isLoopback(n.Host) {
			return chat.AuthPassword, nil
		}
	}
	if host, _, err := net.SplitHostPort(clientListenAddr(self, o.listen)); err != nil || !isLoopback(host) {
		return chat.AuthPassword, nil
	}
	return chat.AuthOpen, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return (ip != nil && ip.IsLoopback()) || host == "localhost"
}

// chatConfig configures the client port of node self from its flags (the
// server sets its log and token); a configuration that cannot run is a
// usage error.
func chatConfig(self store.NodeRow, st store.Store, o chatOpts, auth chat.AuthMode) (chat.Config, error) {
	cfg := chat.DefaultConfig(self.ID)
	cfg.Auth, cfg.Store = auth, st
	cfg.Addr = clientListenAddr(self, o.listen)
	cfg.MaxClients, cfg.IdleTimeout, cfg.Retention = o.maxClients, o.idle, o.retention
	cfg.MaxClientsPerIP = o.maxPerIP
	tc, err := serverTLS(o.tlsCert, o.tlsKey)
	if err != nil {
		return cfg, err
	}
	cfg.TLS = tc
	cfg.RateLimit = o.rate
	cfg.RateBurst = max(1, int(4*o.rate))
	cfg.FloodLimit = max(1, int(8*o.rate))
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

// serverTLS loads the client port's certificate; nil without one.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, usageError{errors.New("--tls-cert and --tls-key go together: give both, or neither for plain TCP")}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("client port TLS (--tls-cert %s, --tls-key %s): %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// clientListenAddr is listenAddr for the client port.
func clientListenAddr(self store.NodeRow, explicit string) string {
	if explicit != "" {
		return explicit
	}
	port := strconv.Itoa(self.ClientPort)
	if ip := net.ParseIP(self.Host); (ip != nil && ip.IsLoopback()) || self.Host == "localhost" {
		return net.JoinHostPort(self.Host, port)
	}
	return net.JoinHostPort("", port)
}

// chatArgs are the chat flags set on a cluster command, for its children.
func chatArgs(fs *pflag.FlagSet) []string {
	var args []string
	for _, name := range []string{"max-clients", "max-clients-per-ip", "tls-cert", "tls-key", "client-rate", "client-idle-timeout", "history-retention", "auth"} {
		if f := fs.Lookup(name); f != nil && f.Changed {
			args = append(args, "--"+name, f.Value.String())
		}
	}
	return args
}
