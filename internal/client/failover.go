package client

import (
	"context"
	"fmt"
	"slices"
)

// FeatureFailover (Options.Features) asks the node for what moving to
// another node needs: the LOGIN answer lists the ring's nodes
// (Conn.Nodes), ALIVE is answered (Conn.Ping), and Notice events tell
// when the node cannot reach the store or is out of the ring. A Session
// always asks for it.
const FeatureFailover = "failover"

// TypeNotice is the node's word about itself (FeatureFailover).
const TypeNotice MessageType = "NOTICE"

// Notice codes.
const (
	NoticeStoreUnreachable = "STORE_UNREACHABLE"
	NoticeOutOfRing        = "OUT_OF_RING"
	NoticeNodeOK           = "NODE_OK"
)

// Notice (FeatureFailover) is a node telling its sessions about itself:
// it cannot reach the store (NoticeStoreUnreachable) or is out of the
// ring (NoticeOutOfRing), so that nothing sent there is stored or
// delivered until it heals: log in at another node. NoticeNodeOK says it
// serves again.
type Notice struct {
	Code    string
	Node    int64
	Message string
}

// OK reports a notice that the node serves again.
func (n Notice) OK() bool { return n.Code == NoticeNodeOK }

// NodeAddr is a node of the ring: its id and client port.
type NodeAddr struct {
	Node int64  `json:"node"`
	Addr string `json:"addr"`
}

type pingWire struct {
	MessageType MessageType `json:"messageType"`
	ID          string      `json:"id"`
}

// Granted reports whether the node granted feature at login (protocol 2).
func (c *Conn) Granted(feature string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.granted, feature)
}

// Nodes is the ring's nodes as the LOGIN answer listed them
// (FeatureFailover), nil if it did not.
func (c *Conn) Nodes() []NodeAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ring)
}

// Ping sends ALIVE with an id and waits for the node to answer it (a node
// that granted FeatureFailover does). A node that does not answer before
// ctx ends is stalled, or cut off.
func (c *Conn) Ping(ctx context.Context) error {
	if _, err := c.call(ctx, pingWire{TypeAlive, c.newID()}); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}
