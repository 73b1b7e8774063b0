package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/store"
)

// chatOpts are the flags of the client port.
type chatOpts struct {
	listen     string
	maxClients int
	rate       float64
	idle       time.Duration
	retention  time.Duration
}

func addChatFlags(fs *pflag.FlagSet, o *chatOpts) {
	d := chat.DefaultConfig(1)
	fs.StringVar(&o.listen, "client-listen", "", "host:port for chat clients (default: the node's client port, on its address if loopback, else all interfaces)")
	fs.IntVar(&o.maxClients, "max-clients", d.MaxClients, "most chat clients connected to this node at once")
	fs.Float64Var(&o.rate, "client-rate", d.RateLimit, "lines a second one client may send (a burst of four seconds' worth is allowed); 0: no limit")
	fs.DurationVar(&o.idle, "client-idle-timeout", d.IdleTimeout, "close a client connection silent this long (clients send ALIVE)")
	fs.DurationVar(&o.retention, "history-retention", d.Retention, "keep delivered messages this long for HISTORY; 0: forever")
}

// newChatServer configures the client port of node self; want is called
// when clients have work for the token; delivery (may be nil) observes
// delivery latencies.
func newChatServer(self store.Node, st store.Store, o chatOpts, log zerolog.Logger, want func(), delivery node.Observer) (*chat.Server, error) {
	cfg := chat.DefaultConfig(self.ID)
	cfg.Store, cfg.Log, cfg.Want, cfg.DeliveryLatency = st, log, want, delivery
	cfg.Addr = clientListenAddr(self, o.listen)
	cfg.MaxClients, cfg.IdleTimeout, cfg.Retention = o.maxClients, o.idle, o.retention
	cfg.RateLimit = o.rate
	cfg.RateBurst = max(1, int(4*o.rate))
	cfg.FloodLimit = max(1, int(8*o.rate))
	if err := cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	return chat.New(cfg)
}

// clientListenAddr is listenAddr for the client port.
func clientListenAddr(self store.Node, explicit string) string {
	if explicit != "" {
		return explicit
	}
	port := strconv.Itoa(self.ClientPort)
	if ip := net.ParseIP(self.Host); (ip != nil && ip.IsLoopback()) || self.Host == "localhost" {
		return net.JoinHostPort(self.Host, port)
	}
	return net.JoinHostPort("", port)
}

// runWithChat runs the node and its client port until ctx ends. The chat
// server stops first — it stores what its clients sent while the token
// still visits — then the node leaves the ring.
func runWithChat(ctx context.Context, n *node.Node, srv *chat.Server) error {
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNode()
	chatCtx, stopChat := context.WithCancel(ctx)
	defer stopChat()
	chatDone := make(chan error, 1)
	go func() {
		chatDone <- srv.Run(chatCtx)
		stopNode()
	}()
	err := n.Run(nodeCtx)
	stopChat()
	if cerr := <-chatDone; err == nil && cerr != nil {
		err = fmt.Errorf("chat: %w", cerr)
	}
	return err
}

// chatArgs are the chat flags set on a cluster command, for its children.
func chatArgs(fs *pflag.FlagSet) []string {
	var args []string
	for _, name := range []string{"max-clients", "client-rate", "client-idle-timeout", "history-retention"} {
		if f := fs.Lookup(name); f != nil && f.Changed {
			args = append(args, "--"+name, f.Value.String())
		}
	}
	return args
}
