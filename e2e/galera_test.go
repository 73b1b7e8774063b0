package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
)

// The most chat may stop when a database server of the cluster dies.
const galeraOutage = 2 * time.Second

// galeraTraffic sends direct messages one after another (each STORED
// before the next) and records what was stored and what arrived, when.
type galeraTraffic struct {
	mu        sync.Mutex
	stored    []string               // ids, in order
	delivered map[string][]time.Time // id -> each arrival
	arrivals  []time.Time
}

func (g *galeraTraffic) storedCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.stored)
}

// receive records every chat message bob's connection shows until it ends.
func (g *galeraTraffic) receive(bob *client.Conn) {
	for ev := range bob.Events() {
		if m, ok := ev.(client.ChatMessage); ok {
			now := time.Now()
			g.mu.Lock()
			g.delivered[m.ID] = append(g.delivered[m.ID], now)
			g.arrivals = append(g.arrivals, now)
			g.mu.Unlock()
		}
	}
}

// send sends until stop is closed; a send that fails (a visit that could
// not store it in time) is not counted: only STORED messages are owed.
func (g *galeraTraffic) send(t *testing.T, alice *client.Conn, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), within)
		st, err := alice.SendWait(ctx, client.ToUser("bob"), fmt.Sprint("g", i))
		cancel()
		if err != nil {
			t.Logf("send %d: %v", i, err)
			continue
		}
		g.mu.Lock()
		g.stored = append(g.stored, st.ID)
		g.mu.Unlock()
	}
}

// longestGap is the longest time without an arrival between from and to.
func (g *galeraTraffic) longestGap(from, to time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, gap := from, time.Duration(0)
	for _, a := range g.arrivals {
		if a.Before(from) || a.After(to) {
			continue
		}
		gap = max(gap, a.Sub(last))
		last = a
	}
	return max(gap, to.Sub(last))
}

// A 5-node ring on a 3-server Galera cluster, nodes spread over the
// servers, loses one server under traffic: every STORED message arrives
// once, chat stops for under 2 s, and the server rejoins (state transfer)
// with the ring undisturbed.
func TestGaleraServerDies(t *testing.T) {
	g := testutil.Galera(t, "../scripts/galera.sh")
	ids := []int64{1, 2, 3, 4, 5}
	first := func(id int64) int { return int(id-1)%3 + 1 } // nodes 1,4 on server 1; 2,5 on 2; 3 on 3
	r := testutil.NewRing(t, ringnodeBin, g.DSN("ringchat", 1), ids...)
	// Messages as fast as they are STORED, past the line rate limit.
	r.Extra = []string{"--client-rate", "0"}
	r.Start(1)
	st := openWhenMigrated(t, g.DSN("ringchat", 3))
	for _, id := range ids[1:] {
		r.Start(id, "--db", g.DSN("ringchat", first(id)))
	}
	c := &chatRing{r: r, st: st}
	testutil.Eventually(t, within, "every node records its database server", func() bool {
		nodes, err := st.Nodes(context.Background())
		return err == nil && len(nodes) == 5 && !slices.ContainsFunc(nodes, func(n store.NodeRow) bool {
			return n.DBServer != g.Host(first(n.ID))
		})
	})
	// Both ends of the conversation on nodes whose server will die.
	alice := c.v2(t, 2, "alice", client.Options{AutoAck: true})
	bob := c.v2(t, 5, "bob", client.Options{AutoAck: true})
	traffic := &galeraTraffic{delivered: map[string][]time.Time{}}
	go traffic.receive(bob)
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() { defer close(sent); traffic.send(t, alice, stop) }()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-sent
	}()
	testutil.Eventually(t, within, "100 messages stored", func() bool { return traffic.storedCount() >= 100 })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	killed := time.Now()
	if err := g.Kill(ctx, 2); err != nil {
		t.Fatal(err)
	}
	before := traffic.storedCount()
	testutil.Eventually(t, within, "messages stored after the kill", func() bool { return traffic.storedCount() >= before+100 })
	if gap := traffic.longestGap(killed, time.Now()); gap > galeraOutage {
		t.Errorf("chat stopped for %v when server 2 died, want under %v", gap, galeraOutage)
	} else {
		t.Logf("server 2 killed: the longest time without a delivery was %v", gap.Round(time.Millisecond))
	}
	testutil.Eventually(t, within, "nodes 2 and 5 record another server", func() bool {
		nodes, err := st.Nodes(context.Background())
		return err == nil && !slices.ContainsFunc(nodes, func(n store.NodeRow) bool { return n.DBServer == g.Host(2) })
	})

	// The server rejoins under traffic: the ring does not notice.
	rejoin := time.Now()
	if err := g.Start(ctx, 2); err != nil {
		t.Fatal(err)
	}
	before = traffic.storedCount()
	testutil.Eventually(t, within, "messages stored after the rejoin", func() bool { return traffic.storedCount() >= before+100 })
	if gap := traffic.longestGap(rejoin, time.Now()); gap > galeraOutage {
		t.Errorf("chat stopped for %v while server 2 rejoined, want under %v", gap, galeraOutage)
	} else {
		t.Logf("server 2 rejoined: the longest time without a delivery was %v", gap.Round(time.Millisecond))
	}
	close(stop)
	<-sent

	traffic.mu.Lock()
	stored := slices.Clone(traffic.stored)
	traffic.mu.Unlock()
	testutil.Eventually(t, within, "every stored message delivered", func() bool {
		traffic.mu.Lock()
		defer traffic.mu.Unlock()
		return !slices.ContainsFunc(stored, func(id string) bool { return len(traffic.delivered[id]) == 0 })
	})
	traffic.mu.Lock()
	defer traffic.mu.Unlock()
	for _, id := range stored {
		if n := len(traffic.delivered[id]); n != 1 {
			t.Errorf("message %s delivered %d times", id, n)
		}
	}
	t.Logf("%d messages stored, each delivered once", len(stored))
}
