package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/ringchat/ringchat/internal/protocol"
)

// nodeCache keeps the nodes of the rings ringchat logged in to, as the
// nodes listed them (protocol.FeatureFailover), in
// $XDG_CACHE_HOME/ringchat/nodes.json (else ~/.cache/ringchat/nodes.json):
// the next start given one node of a ring (--node HOST:PORT) can move to
// the others when that one is down, cut off or stopped.
type nodeCache struct{ path string } // "": kept nowhere

// maxCachedRings bounds the rings kept; the oldest goes first.
const maxCachedRings = 16

// cachedRings is the file: each ring its nodes, the latest first.
type cachedRings struct {
	Rings [][]protocol.NodeAddr `json:"rings"`
}

// newNodeCache is the cache under the user's cache directory.
func newNodeCache(getenv func(string) string) nodeCache {
	dir := getenv("XDG_CACHE_HOME")
	if !filepath.IsAbs(dir) {
		h := getenv("HOME")
		if h == "" {
			return nodeCache{}
		}
		dir = filepath.Join(h, ".cache")
	}
	return nodeCache{path: filepath.Join(dir, "ringchat", "nodes.json")}
}

func (c nodeCache) load() cachedRings {
	var r cachedRings
	if c.path == "" {
		return r
	}
	b, err := os.ReadFile(c.path)
	if err == nil {
		_ = json.Unmarshal(b, &r) // a damaged file is as none: it is written anew
	}
	return r
}

// extend returns addrs followed by the other nodes of the ring kept for
// the first of addrs, if any.
func (c nodeCache) extend(addrs []string) []string {
	if len(addrs) == 0 {
		return addrs
	}
	for _, ring := range c.load().Rings {
		if !slices.ContainsFunc(ring, func(n protocol.NodeAddr) bool { return n.Addr == addrs[0] }) {
			continue
		}
		out := slices.Clone(addrs)
		for _, n := range ring {
			if n.Addr != "" && !slices.Contains(out, n.Addr) {
				out = append(out, n.Addr)
			}
		}
		return out
	}
	return addrs
}

// save keeps nodes as the nodes of their ring: it replaces a ring kept
// that shares a node with them. Failing to write only loses the hint.
func (c nodeCache) save(nodes []protocol.NodeAddr) {
	if c.path == "" || len(nodes) == 0 {
		return
	}
	r := c.load()
	rings := [][]protocol.NodeAddr{nodes}
	for _, ring := range r.Rings {
		shared := slices.ContainsFunc(ring, func(n protocol.NodeAddr) bool {
			return slices.ContainsFunc(nodes, func(m protocol.NodeAddr) bool { return m.Addr == n.Addr })
		})
		if !shared && len(rings) < maxCachedRings {
			rings = append(rings, ring)
		}
	}
	b, err := json.Marshal(cachedRings{Rings: rings})
	if err != nil || os.MkdirAll(filepath.Dir(c.path), 0o700) != nil {
		return
	}
	tmp := c.path + ".tmp"
	if os.WriteFile(tmp, append(b, '\n'), 0o600) == nil {
		_ = os.Rename(tmp, c.path)
	}
}
