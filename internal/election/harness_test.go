package election

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// cluster is a minimal host for unit tests: messages are delivered one at a
// time, in order (or in a random order with shuffle), with no delay; a Win
// is claimed at once and the new coordinator observed by every live node.
type cluster struct {
	t       *testing.T
	ids     []int64
	ms      map[int64]*Machine
	down    map[int64]bool
	queue   []Msg
	rng     *rand.Rand // nil: FIFO
	epoch   int64
	coord   int64
	sent    map[Method]map[Kind]int
	drop    func(Msg) bool // lose a message
	reports map[int64][]Report
}

func testConfig(id int64, m Method) Config {
	return Config{ID: id, Method: m, TimeoutTicks: 2, Retries: 2, ResultTicks: 200, ChallengeTicks: 5, LeaseTicks: 30}
}

func newCluster(t *testing.T, m Method, ids ...int64) *cluster {
	c := &cluster{t: t, ids: slices.Sorted(slices.Values(ids)), ms: map[int64]*Machine{}, down: map[int64]bool{},
		sent: map[Method]map[Kind]int{}, reports: map[int64][]Report{}}
	for _, id := range ids {
		mc := New(testConfig(id, m))
		mc.SetPeers(ids)
		c.ms[id] = mc
	}
	return c
}

func seq(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids
}

// collect takes every machine's outputs.
func (c *cluster) collect() {
	for _, id := range c.ids {
		c.collectFrom(id)
	}
}

func (c *cluster) collectFrom(id int64) {
	if c.down[id] {
		return
	}
	m := c.ms[id]
	rd := m.Ready()
	for _, msg := range rd.Msgs {
		if msg.From != id || msg.To == id || msg.To == 0 {
			c.t.Fatalf("node %d sent a message with From %d To %d", id, msg.From, msg.To)
		}
		if c.sent[msg.Method] == nil {
			c.sent[msg.Method] = map[Kind]int{}
		}
		c.sent[msg.Method][msg.Kind]++
		if c.drop == nil || !c.drop(msg) {
			c.queue = append(c.queue, msg)
		}
	}
	c.reports[id] = append(c.reports[id], rd.Reports...)
	if rd.Win {
		c.epoch++
		c.coord = id
		m.Claimed(c.epoch)
		c.observeAll(id, c.epoch)
	}
}

func (c *cluster) observeAll(coord, epoch int64) {
	for _, id := range c.ids {
		if !c.down[id] {
			c.ms[id].Observe(coord, epoch)
		}
	}
	c.collect()
}

// deliver runs until no message is queued, ticking when idle, at most
// limit ticks.
func (c *cluster) deliver(limit int) {
	c.collect()
	for ticks := 0; ticks <= limit; {
		if len(c.queue) == 0 {
			if c.allIdle() {
				return
			}
			for _, id := range c.ids {
				if !c.down[id] {
					c.ms[id].Tick()
				}
			}
			ticks++
			c.collect()
			continue
		}
		i := 0
		if c.rng != nil {
			i = c.rng.IntN(len(c.queue))
		}
		msg := c.queue[i]
		c.queue = slices.Delete(c.queue, i, i+1)
		if c.down[msg.To] {
			continue
		}
		c.ms[msg.To].Heard(msg.From)
		c.ms[msg.To].Step(msg)
		c.collectFrom(msg.To)
	}
}

func (c *cluster) allIdle() bool {
	for _, id := range c.ids {
		if !c.down[id] && c.ms[id].NextDeadline() != 1<<63-1 {
			return false
		}
	}
	return true
}

func (c *cluster) count(m Method, k Kind) int { return c.sent[m][k] }

// agreed checks that every live node observed the highest live id.
func (c *cluster) agreed() {
	c.t.Helper()
	want := int64(0)
	for _, id := range c.ids {
		if !c.down[id] {
			want = id
		}
	}
	if c.coord != want {
		c.t.Fatalf("coordinator %d, want %d", c.coord, want)
	}
	for _, id := range c.ids {
		if m := c.ms[id]; !c.down[id] && (m.coord != want || m.Electing()) {
			c.t.Fatalf("node %d: coordinator %d electing %v, want %d", id, m.coord, m.Electing(), want)
		}
	}
}
