// Package e2e holds the end-to-end tests: real ringnode processes on
// 127.0.0.1 over a real MariaDB, killed, stopped and restarted.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/node"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
)

var ringnodeBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, "./cmd/ringnode", &ringnodeBin))
}

// within bounds every wait for the ring to settle; the targets are far
// lower (docs/BENCHMARKS.md), this only keeps a slow CI machine green.
const within = 20 * time.Second

type checker struct {
	t  *testing.T
	st store.Store
	r  *testutil.Ring
}

// ringOf returns the store's ring order, or an error describing why it is
// not one healthy cycle.
func (c *checker) ringOf(ctx context.Context) ([]int64, error) {
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	order, problems := ring.Order(store.Successors(nodes))
	if len(problems) > 0 {
		return order, fmt.Errorf("ring broken: %v", problems)
	}
	return order, nil
}

// settled waits until the store's ring is exactly the live nodes, the
// coordinator is one of them, and the token is moving (the fence advanced
// by two rotations).
func (c *checker) settled(what string, live ...int64) {
	c.t.Helper()
	ctx := context.Background()
	slices.Sort(live)
	var last string
	var start store.Fence
	startSet := false
	settled := testutil.WaitFor(within, 20*time.Millisecond, func() bool {
		order, err := c.ringOf(ctx)
		sorted := slices.Clone(order)
		slices.Sort(sorted)
		coord, cerr := c.st.Coordinator(ctx)
		f, ferr := c.st.Fence(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case cerr != nil || ferr != nil:
			last = fmt.Sprint(cerr, ferr)
		case !slices.Equal(sorted, live):
			last = fmt.Sprintf("ring %v, live nodes %v", order, live)
		case !slices.Contains(live, coord.NodeID):
			last = fmt.Sprintf("coordinator %d is not a live node", coord.NodeID)
		case !startSet:
			start, startSet = f, true
			last = "waiting for the token to move"
		case f.Generation > start.Generation || f.Seq >= start.Seq+int64(2*len(live)):
			return true
		default:
			last = fmt.Sprintf("token at %d/%d since %d/%d", f.Generation, f.Seq, start.Generation, start.Seq)
		}
		return false
	})
	if !settled {
		c.t.Fatalf("%s: ring not settled within %v: %s", what, within, last)
	}
}

// probeValues returns the counter values the nodes logged as committed,
// and those logged with their COMMIT unanswered (in the store or not).
func probeValues(t *testing.T, r *testutil.Ring, ids []int64) (out, unknown []int64) {
	for _, id := range ids {
		sc := bufio.NewScanner(bytes.NewReader(r.Log(id)))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg   string `json:"message"`
				Value int64  `json:"value"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Msg {
			case node.ProbeLogMessage:
				out = append(out, line.Value)
			case node.ProbeUnknownLogMessage:
				unknown = append(unknown, line.Value)
			}
		}
	}
	return out, unknown
}

// TestRingSurvivesFaults: 5 processes on MariaDB with the mutex probe; kill
// -9 a node, then the coordinator, then the token holder; SIGSTOP and
// SIGCONT a node; SIGTERM a node and restart it. After each step the ring
// is one cycle of the live nodes with a live coordinator and a moving token.
// Throughout, no two critical sections overlapped.
func TestRingSurvivesFaults(t *testing.T) {
	dsn := testutil.MySQLDSN(t)
	ids := []int64{1, 2, 3, 4, 5}
	r := testutil.NewRing(t, ringnodeBin, dsn, ids...)
	r.Extra = []string{"--mutex-probe"}
	ctx := context.Background()
	// Migrate first, so that the checker can read while nodes start.
	r.Start(1)
	st := openWhenMigrated(t, dsn)
	c := &checker{t: t, st: st, r: r}
	for _, id := range ids[1:] {
		r.Start(id)
	}
	live := slices.Clone(ids)
	c.settled("formation", live...)
	kills := 0

	remove := func(id int64) { live = slices.DeleteFunc(live, func(x int64) bool { return x == id }) }

	// A plain node.
	coord, _ := st.Coordinator(ctx)
	victim := int64(1)
	if victim == coord.NodeID {
		victim = 2
	}
	r.Kill(victim)
	kills++
	remove(victim)
	c.settled(fmt.Sprintf("after kill -9 of node %d", victim), live...)

	// The coordinator.
	coord, _ = st.Coordinator(ctx)
	r.Kill(coord.NodeID)
	kills++
	remove(coord.NodeID)
	c.settled(fmt.Sprintf("after kill -9 of coordinator %d", coord.NodeID), live...)
	if now, _ := st.Coordinator(ctx); now.Epoch <= coord.Epoch {
		t.Errorf("coordinator epoch did not advance: %d -> %d", coord.Epoch, now.Epoch)
	}

	// The current token holder (the last node whose critical section ran).
	f, _ := st.Fence(ctx)
	holder := f.Holder
	r.Kill(holder)
	kills++
	remove(holder)
	c.settled(fmt.Sprintf("after kill -9 of token holder %d", holder), live...)

	// Bring the dead back, so the next steps have a full ring.
	for _, id := range ids {
		if !slices.Contains(live, id) {
			r.Start(id)
			live = append(live, id)
		}
	}
	c.settled("after restarting the killed nodes", live...)

	// A stalled node is spliced out, and rejoins after SIGCONT.
	stalled := live[2]
	r.Signal(stalled, syscall.SIGSTOP)
	remove(stalled)
	c.settled(fmt.Sprintf("after SIGSTOP of node %d", stalled), live...)
	r.Signal(stalled, syscall.SIGCONT)
	live = append(live, stalled)
	c.settled(fmt.Sprintf("after SIGCONT of node %d", stalled), live...)

	// A clean leave, then a restart.
	leaver := live[0]
	r.Signal(leaver, syscall.SIGTERM)
	if code := r.Wait(leaver, within); code != 0 {
		t.Fatalf("node %d exited with %d after SIGTERM, want 0", leaver, code)
	}
	remove(leaver)
	c.settled(fmt.Sprintf("after SIGTERM of node %d", leaver), live...)
	r.Start(leaver)
	live = append(live, leaver)
	c.settled(fmt.Sprintf("after restarting node %d", leaver), live...)

	// Every node still runs: nothing crashed on its own.
	for _, id := range live {
		if r.Exited(id) {
			t.Errorf("node %d exited without being killed", id)
		}
	}

	// Mutual exclusion: the probe's increments never overlapped. Every
	// logged value is unique; the counter may exceed the number of logged
	// increments only by increments whose log line died with a killed node.
	var counter int64
	err := st.Update(ctx, func(tx store.Tx) error {
		var err error
		counter, err = tx.ProbeCounter()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	values, unknown := probeValues(t, r, ids)
	slices.Sort(values)
	if dup := len(values) - len(slices.Compact(slices.Clone(values))); dup > 0 {
		t.Errorf("%d probe values were written twice: critical sections overlapped", dup)
	}
	// An increment whose COMMIT went unanswered may be in the store; if
	// it is not, the next holder writes the same value and logs it.
	inStore := 0
	for _, v := range slices.Compact(slices.Sorted(slices.Values(unknown))) {
		if _, logged := slices.BinarySearch(values, v); v <= counter && !logged {
			inStore++
		}
	}
	if len(values) == 0 || values[len(values)-1] > counter || counter-int64(len(values)+inStore) > int64(kills) {
		t.Errorf("probe counter %d, %d logged increments (max %v), %d unanswered COMMITs in the store, %d kills",
			counter, len(values), values[len(values)-1:], inStore, kills)
	}
	t.Logf("probe: counter %d, %d logged increments, %d unanswered COMMITs in the store, %d kills", counter, len(values), inStore, kills)
	h, _ := st.CoordinatorHistory(ctx)
	t.Logf("coordinator history: %+v", h)
}
