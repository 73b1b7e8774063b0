package wire

import "sync"

// replayKey identifies a frame for replay detection: nonces are random per
// sender, so the same nonce from two senders is two frames.
type replayKey struct {
	src   int64
	nonce uint64
}

type replayEntry struct {
	key replayKey
	exp int64 // Unix ms after which the frame is refused as stale anyway
}

// replayCache remembers the nonces of accepted frames until their frames
// could no longer be accepted. It holds at most cap entries, dropping the
// oldest when full.
type replayCache struct {
	mu   sync.Mutex
	cap  int
	seen map[replayKey]int64 // key -> exp of its latest entry in queue
	// queue holds entries in insertion order; queue[head:] are live. A key
	// may appear more than once if it was added again after expiring; only
	// the entry whose exp matches seen owns the map slot.
	queue []replayEntry
	head  int
}

func newReplayCache(cap int) *replayCache {
	return &replayCache{cap: cap, seen: make(map[replayKey]int64)}
}

// add records k, valid until exp, and reports whether it was new: false if
// k was recorded already and has not expired at now.
func (r *replayCache) add(k replayKey, exp, now int64, st *counters) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Expire from the front. Entries are in insertion order, not exp order,
	// so some expired ones may linger a little: lookups ignore them.
	for r.head < len(r.queue) && r.queue[r.head].exp < now {
		r.pop()
	}
	if e, ok := r.seen[k]; ok && e >= now {
		return false
	}
	if len(r.queue)-r.head >= r.cap {
		if r.queue[r.head].exp >= now {
			st.evictions.Add(1)
		}
		r.pop()
	}
	r.seen[k] = exp
	r.queue = append(r.queue, replayEntry{k, exp})
	return true
}

// pop drops the oldest entry of the queue.
func (r *replayCache) pop() {
	e := r.queue[r.head]
	if r.seen[e.key] == e.exp {
		delete(r.seen, e.key)
	}
	r.head++
	switch {
	case r.head == len(r.queue):
		r.queue, r.head = r.queue[:0], 0
	case r.head >= 1024 && 2*r.head >= len(r.queue):
		n := copy(r.queue, r.queue[r.head:])
		r.queue, r.head = r.queue[:n], 0
	}
}

// len returns the number of keys held, for tests.
func (r *replayCache) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
