package node

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/token"
	"github.com/ringchat/ringchat/internal/transport"
	"github.com/ringchat/ringchat/internal/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cluster runs in-process nodes over the in-memory network and a shared
// SQLite store.
type cluster struct {
	t      *testing.T
	st     store.Store
	net    *transport.MemNetwork
	nodes  map[int64]*Node
	cancel map[int64]context.CancelFunc
	errs   map[int64]chan error
}

func newCluster(t *testing.T, ids ...int64) *cluster {
	t.Helper()
	return newClusterWith(t, transport.NewMemNetwork(), ids...)
}

// newTestStore opens a fresh SQLite store holding nodes ids in its node
// table, closed when the test ends.
func newTestStore(t *testing.T, ids ...int64) store.Store {
	t.Helper()
	var list []nodelist.Entry
	for _, id := range ids {
		list = append(list, nodelist.Entry{ID: id, Host: "127.0.0.1", CoordPort: 5000 + int(id), ClientPort: 8000 + int(id)})
	}
	dsn, err := store.ParseDSN("sqlite:" + filepath.Join(t.TempDir(), "ring.db"))
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := store.Prepare(context.Background(), dsn, list, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newClusterWith(t *testing.T, network *transport.MemNetwork, ids ...int64) *cluster {
	t.Helper()
	st := newTestStore(t, ids...)
	c := &cluster{t: t, st: st, net: network, nodes: map[int64]*Node{},
		cancel: map[int64]context.CancelFunc{}, errs: map[int64]chan error{}}
	t.Cleanup(c.stopAll)
	return c
}

func fastConfig(id int64) ring.Config {
	c := ring.DefaultConfig(id)
	c.Tick = 2 * time.Millisecond
	return c
}

func (c *cluster) start(id int64, sections ...Section) {
	c.t.Helper()
	c.startWith(id, func(cfg *Config) { cfg.Sections = sections })
}

// startWith starts node id with its configuration changed by tweak.
func (c *cluster) startWith(id int64, tweak func(*Config)) {
	c.t.Helper()
	nodes, err := c.st.Nodes(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := DefaultConfig(id)
	cfg.Ring = fastConfig(id)
	cfg.Store = c.st
	cfg.Transport = c.net.Transport(id)
	cfg.Addresses = NewAddresses(nodes)
	cfg.PeerRefresh = 100 * time.Millisecond
	cfg.Log = zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.InfoLevel)
	tweak(&cfg)
	n, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	c.nodes[id], c.cancel[id], c.errs[id] = n, cancel, errc
}

// crash stops a node without a clean leave: its links break at once.
func (c *cluster) crash(id int64) {
	c.t.Helper()
	c.net.Isolate(id)
	c.cancel[id]()
	<-c.errs[id]
	delete(c.nodes, id)
	c.net.Unisolate(id)
}

// leave stops a node cleanly and returns Run's error.
func (c *cluster) leave(id int64) error {
	c.cancel[id]()
	err := <-c.errs[id]
	delete(c.nodes, id)
	return err
}

// stopWait bounds how long stopAll waits for one node to leave: the ring
// machine ends a leave within about 2 s (LeaveRetries).
const stopWait = 20 * time.Second

// stopAll stops every node cleanly. A node that has not left within
// stopWait fails the test with its status, and its log is printed with
// the test's, instead of the package hanging until its timeout.
func (c *cluster) stopAll() {
	for id, n := range c.nodes {
		c.cancel[id]()
		select {
		case <-c.errs[id]:
		case <-time.After(stopWait):
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, ok := n.Status(ctx)
			cancel()
			c.t.Errorf("node %d has not left %v after it was told to (status answered: %v): phase %v, coordinator %d epoch %d (is it: %v), successor %d up %v, predecessor %d, holds the token %v",
				id, stopWait, ok, st.Phase, st.Coordinator, st.Epoch, st.IsCoord, st.Successor, st.SuccessorUp, st.Predecessor, st.HoldsToken)
		}
	}
	c.nodes = map[int64]*Node{}
}

// healthy: the store's ring is one cycle of the running nodes, each links
// to its store successor, one of them is the store's coordinator, and the
// token fence has moved since mark.
func (c *cluster) healthy(mark store.Fence) bool {
	ctx := context.Background()
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return false
	}
	topo := store.Successors(nodes)
	order, problems := ring.Order(topo)
	var running []int64
	for id := range c.nodes {
		running = append(running, id)
	}
	slices.Sort(running)
	slices.Sort(order)
	if len(problems) > 0 || !slices.Equal(order, running) {
		return false
	}
	coord, err := c.st.Coordinator(ctx)
	if err != nil || c.nodes[coord.NodeID] == nil {
		return false
	}
	for id, n := range c.nodes {
		s, ok := n.Status(ctx)
		if !ok || s.Phase != ring.PhaseInRing || s.Successor != topo[id] || !s.SuccessorUp || s.Epoch != coord.Epoch {
			return false
		}
	}
	f, err := c.st.Fence(ctx)
	return err == nil && f.Generation >= mark.Generation && (f.Generation > mark.Generation || f.Seq > mark.Seq+int64(2*len(running)))
}

func (c *cluster) waitHealthy(what string) {
	c.t.Helper()
	mark, _ := c.st.Fence(context.Background())
	testutil.Eventually(c.t, 10*time.Second, what, func() bool { return c.healthy(mark) })
}

func TestRingFormsMovesAndHeals(t *testing.T) {
	c := newCluster(t, 1, 2, 3, 4)
	probe := MutexProbe(zerolog.Nop())
	for _, id := range []int64{3, 1, 4, 2} {
		c.start(id, probe)
	}
	c.waitHealthy("formation")
	c.crash(2)
	c.waitHealthy("after node 2 crashed")
	coord, _ := c.st.Coordinator(context.Background())
	c.crash(coord.NodeID)
	c.waitHealthy("after the coordinator crashed")
	c.start(2, probe)
	c.start(coord.NodeID, probe)
	c.waitHealthy("after restarts")
	if err := c.leave(1); err != nil {
		t.Fatalf("clean leave: %v", err)
	}
	c.waitHealthy("after a clean leave")
}

// TestJoinedSignalledAfterRejoin: Joined is signalled when the node joins,
// and again when it was cut off, spliced out, and has joined again.
func TestJoinedSignalledAfterRejoin(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	probe := MutexProbe(zerolog.Nop()) // the fence moves at every visit: waitHealthy sees the token
	joined := map[int64]chan struct{}{}
	for _, id := range []int64{1, 2, 3} {
		joined[id] = make(chan struct{}, 1)
		c.startWith(id, func(cfg *Config) {
			cfg.Sections = []Section{probe}
			cfg.Joined = joined[id]
		})
	}
	signalled := func(id int64) func() bool {
		return func() bool {
			select {
			case <-joined[id]:
				return true
			default:
				return false
			}
		}
	}
	c.waitHealthy("formation")
	// The victim is not the coordinator: a coordinator cut off loses its
	// role and may come back through an election, in the ring all along
	// in its own eyes (no join; the chat service's periodic check brings
	// its presence back then).
	coord, err := c.st.Coordinator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	victim := int64(3)
	if coord.NodeID == victim {
		victim = 2
	}
	testutil.Eventually(t, 10*time.Second, "Joined signalled when the victim joined", signalled(victim))
	c.net.Isolate(victim)
	testutil.Eventually(t, 10*time.Second, "the victim spliced out", func() bool {
		nodes, err := c.st.Nodes(context.Background())
		return err == nil && slices.ContainsFunc(nodes, func(n store.NodeRow) bool { return n.ID == victim && !n.InRing() })
	})
	signalled(victim)() // a signal of before the cut does not count for the rejoin
	c.net.Unisolate(victim)
	c.waitHealthy("after the victim rejoined")
	testutil.Eventually(t, 10*time.Second, "Joined signalled when the victim joined again", signalled(victim))
}

// TestForgedFramesAreDropped: a process without the cluster key sends
// every kind of ring frame to every node; none is acted on, each is counted,
// and the ring goes on.
func TestForgedFramesAreDropped(t *testing.T) {
	key := []byte("the-real-cluster-key-of-this-ring")
	codecs := map[int64]*wire.Codec{}
	var mu sync.Mutex
	network := transport.NewMemNetwork(transport.WithCodecs(func(id int64) *wire.Codec {
		k := key
		if id == 99 {
			k = []byte("a-guessed-key-that-is-wrong-1234")
		}
		c, err := wire.NewCodec(k)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		codecs[id] = c
		mu.Unlock()
		return c
	}))
	c := newClusterWith(t, network, 1, 2, 3)
	for _, id := range []int64{1, 2, 3} {
		c.start(id, MutexProbe(zerolog.Nop()))
	}
	c.waitHealthy("formation")
	rogue := network.Transport(99)
	defer rogue.Close()
	forged := []ring.Msg{
		{Type: ring.MsgSuccessor, Succ: 99, Ver: 1000},
		{Type: ring.MsgRejoin},
		{Type: ring.MsgCoordinator},
		{Type: ring.MsgHandoff},
		{Type: ring.MsgLeave},
		{Type: ring.MsgToken, Token: &token.Token{Stamp: token.Stamp{Gen: 1 << 40}}},
	}
	sent := 0
	for _, target := range []int64{1, 2, 3} {
		for _, m := range forged {
			p, _ := m.Payload()
			// Claim to be the coordinator, with a huge epoch.
			_ = rogue.Send(target, wire.Frame{Type: string(m.Type), Src: 3, Epoch: 1 << 40, Payload: p})
			sent++
		}
	}
	testutil.Eventually(t, 5*time.Second, "forged frames counted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		var bad uint64
		for id, codec := range codecs {
			if id != 99 {
				bad += codec.Stats().BadMAC
			}
		}
		return bad >= uint64(sent)
	})
	c.waitHealthy("after the forged frames")
	coord, _ := c.st.Coordinator(context.Background())
	if coord.Epoch >= 1<<40 {
		t.Errorf("a forged epoch reached the store: %+v", coord)
	}
}

func TestSleepUntilTick(t *testing.T) {
	start := time.Now()
	tick := 20 * time.Millisecond
	if d := SleepUntilTick(start, tick, 1<<62); d != time.Hour {
		t.Errorf("far deadline: %v, want the 1 h cap", d)
	}
	if d := SleepUntilTick(start, tick, 0); d != 0 {
		t.Errorf("past deadline: %v, want 0", d)
	}
	if d := SleepUntilTick(start, tick, 50); d <= 0 || d > time.Second {
		t.Errorf("deadline 50 ticks on: %v", d)
	}
}

// A store outage fails every visit: the node logs the first failure, then
// at most one line a second with the count, and one line when sections
// succeed again; every failure is counted.
func TestSectionFailuresLoggedOncePerSecond(t *testing.T) {
	var buf bytes.Buffer
	n := &Node{log: zerolog.New(&buf)}
	fail := visitResult{err: errors.New("store: fenced transaction: invalid connection")}
	for range 100 {
		n.logSection(fail)
	}
	n.logSection(visitResult{})
	n.logSection(visitResult{})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "critical section failed") || !strings.Contains(lines[1], `"failed_unlogged":99`) {
		t.Fatalf("log:\n%s", buf.String())
	}
	if n.stats.SectionFailures != 100 {
		t.Fatalf("SectionFailures = %d", n.stats.SectionFailures)
	}
}

// movingServer is a store whose database server changes when the test
// says (as the failover connector's does when a server dies).
type movingServer struct {
	store.Store
	server atomic.Value
}

func (m *movingServer) Server() string { return m.server.Load().(string) }

// A node records the database server it uses at start and again within
// about a second of a change, whatever its PeerRefresh.
func TestRecordsDatabaseServerChange(t *testing.T) {
	c := newCluster(t, 1)
	st := &movingServer{Store: c.st}
	st.server.Store("db-1:3306")
	c.startWith(1, func(cfg *Config) {
		cfg.Store = st
		cfg.PeerRefresh = time.Hour
	})
	recorded := func(want string) func() bool {
		return func() bool {
			nodes, err := c.st.Nodes(context.Background())
			return err == nil && len(nodes) == 1 && nodes[0].DBServer == want
		}
	}
	testutil.Eventually(t, testutil.WaitLimit, "db-1 recorded at start", recorded("db-1:3306"))
	st.server.Store("db-2:3306")
	testutil.Eventually(t, testutil.WaitLimit, "db-2 recorded after the change", recorded("db-2:3306"))
}

// TestVisitBudgetStretchesAfterCutShortVisits: a visit cancelled at its
// budget gives the next one twice the time, up to maxStretch; a committed
// visit brings it back to one MaxHold only once none was cut short for
// stretchKeep; other failures change nothing.
func TestVisitBudgetStretchesAfterCutShortVisits(t *testing.T) {
	long, recent := stretchKeep, stretchKeep-time.Millisecond
	for _, tc := range []struct {
		stretch  int
		ok, over bool
		sinceCut time.Duration
		want     int
	}{
		{1, false, true, 0, 2},
		{2, false, true, 0, 4},
		{4, false, true, 0, 4},
		{3, false, true, 0, 4},
		{4, true, false, long, 1},
		{4, true, false, recent, 4}, // a light visit committed between lossy ones
		{2, true, false, recent, 2},
		{1, true, false, long, 1},
		{1, true, false, recent, 1},
		{2, false, false, long, 2},
		{1, false, false, long, 1},
	} {
		if got := nextStretch(tc.stretch, tc.ok, tc.over, tc.sinceCut); got != tc.want {
			t.Errorf("nextStretch(%d, ok=%v, over=%v, since cut %v) = %d, want %d", tc.stretch, tc.ok, tc.over, tc.sinceCut, got, tc.want)
		}
	}
	if maxStretch*100*time.Millisecond < 2*200*time.Millisecond {
		t.Errorf("maxStretch %d: a stretched visit must outlast a lost packet's retransmission (200 ms) with room for the rest", maxStretch)
	}
}

// The coordinator that splices a crashed node out clears the presence
// rows of the users logged in there (Config.ClearPresence, the chat's
// part of the store), so they can log in elsewhere at once.
func TestSplicedOutNodesPresenceCleared(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	var mu sync.Mutex
	var cleared []int64
	clearPresence := func(ctx context.Context, node int64) error {
		mu.Lock()
		cleared = append(cleared, node)
		mu.Unlock()
		return c.st.Update(ctx, func(tx store.Tx) error {
			_, err := tx.ClearNodePresence(node)
			return err
		})
	}
	probe := MutexProbe(zerolog.Nop())
	for _, id := range []int64{1, 2, 3} {
		c.startWith(id, func(cfg *Config) { cfg.Sections, cfg.ClearPresence = []Section{probe}, clearPresence })
	}
	c.waitHealthy("formation")
	ctx := context.Background()
	storetest.Present(t, c.st, "carol", 3)
	c.crash(3)
	c.waitHealthy("after node 3 crashed")
	testutil.Eventually(t, testutil.WaitLimit, "carol's presence at node 3 cleared", func() bool {
		online, err := c.st.Online(ctx)
		return err == nil && len(online) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(cleared, 3) {
		t.Errorf("presence cleared for nodes %v, want node 3", cleared)
	}
}
