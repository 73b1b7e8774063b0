package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/ringchat/ringchat/internal/protocol"
)

// Notice (FeatureFailover) is a node telling its sessions about itself:
// it cannot reach the store (NoticeStoreUnreachable) or is out of the
// ring (NoticeOutOfRing), so that nothing sent there is stored or
// delivered until it heals: log in at another node. NoticeNodeOK says it
// serves again.
type Notice struct {
	Code    protocol.Code
	Node    int64
	Message string
}

// OK reports a notice that the node serves again.
func (n Notice) OK() bool { return n.Code == protocol.NoticeNodeOK }

// Granted reports whether the node granted feature at login (protocol 2).
func (c *Conn) Granted(feature string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.granted, feature)
}

// Nodes is the ring's nodes as the LOGIN answer listed them
// (FeatureFailover), nil if it did not.
func (c *Conn) Nodes() []protocol.NodeAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ring)
}

// Ping sends ALIVE with an id and waits for the node to answer it (a node
// that granted FeatureFailover does). A node that does not answer before
// ctx ends is stalled, or cut off.
func (c *Conn) Ping(ctx context.Context) error {
	if _, err := c.call(ctx, protocol.AliveV2{MessageType: protocol.TypeAlive, ID: c.newID()}); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}
