package node

// runs on: any goroutine. Addresses is set by the run loop and read by the
// transport's goroutines, under its own RWMutex.

import (
	"slices"
	"sync"

	"github.com/ringchat/ringchat/internal/store"
)

// Addresses is the node table as the runtime last read it: node id to
// coordination address. It is safe for concurrent use (the transport reads
// it from its own goroutines).
type Addresses struct {
	mu    sync.RWMutex
	addrs map[int64]string
}

// NewAddresses returns an address book seeded with nodes.
func NewAddresses(nodes []store.NodeRow) *Addresses {
	a := &Addresses{}
	a.Set(nodes)
	return a
}

// Set replaces the book with the given nodes.
func (a *Addresses) Set(nodes []store.NodeRow) {
	m := make(map[int64]string, len(nodes))
	for _, n := range nodes {
		m[n.ID] = n.CoordAddr()
	}
	a.mu.Lock()
	a.addrs = m
	a.mu.Unlock()
}

// Resolve returns the coordination address of node id.
func (a *Addresses) Resolve(id int64) (string, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	addr, ok := a.addrs[id]
	return addr, ok
}

// IDs returns the known node ids, ascending.
func (a *Addresses) IDs() []int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	ids := make([]int64, 0, len(a.addrs))
	for id := range a.addrs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
