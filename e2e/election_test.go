package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/election"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestElections runs, once per election method, 5 ringnode processes on
// MariaDB: nodes 1-4 form the ring (the highest becomes coordinator by
// election), the coordinator is killed with -9 (the next-highest live node
// takes over with a newer epoch and the token keeps moving), then node 5
// starts (it becomes coordinator). With the lease method the lease holder
// stays coordinator until it dies, whatever the ids.
func TestElections(t *testing.T) {
	for _, m := range election.Methods {
		t.Run(string(m), func(t *testing.T) { testElection(t, m) })
	}
}

func testElection(t *testing.T, m election.Method) {
	dsn := testutil.MySQLDSN(t)
	r := testutil.NewRing(t, ringnodeBin, dsn, 1, 2, 3, 4, 5)
	r.Extra = []string{"--mutex-probe", "--election", string(m), "--lease-ttl", "600ms"}
	ctx := context.Background()
	r.Start(1)
	st := openWhenMigrated(t, dsn)
	c := &checker{t: t, st: st, r: r}
	for _, id := range []int64{2, 3, 4} {
		r.Start(id)
	}
	voting := m != election.Lease
	live := []int64{1, 2, 3, 4}
	c.settled("formation", live...)
	if voting {
		c.coordinatorIs(4, "after formation")
	}
	before, _ := st.Coordinator(ctx)

	r.Kill(before.NodeID)
	live = slices.DeleteFunc(live, func(id int64) bool { return id == before.NodeID })
	c.settled(fmt.Sprintf("after kill -9 of coordinator %d", before.NodeID), live...)
	if voting {
		c.coordinatorIs(live[len(live)-1], "after the coordinator's death")
	}
	after, _ := st.Coordinator(ctx)
	if after.Epoch <= before.Epoch {
		t.Errorf("epoch did not advance: %d -> %d", before.Epoch, after.Epoch)
	}

	r.Start(5)
	live = append(live, 5)
	c.settled("after node 5 started", live...)
	if voting {
		c.coordinatorIs(5, "after a higher node joined")
	} else if now, _ := st.Coordinator(ctx); now.NodeID != after.NodeID || now.Epoch != after.Epoch {
		t.Errorf("lease: coordinator changed from %+v to %+v without a failure", after, now)
	}

	h, err := st.CoordinatorHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(h); i++ {
		if h[i].Epoch <= h[i-1].Epoch {
			t.Errorf("history out of order: %+v", h)
		}
	}
	t.Logf("%s: coordinator history %v", m, terms(h))
	if voting {
		reports := electionReports(r, live)
		won := slices.IndexFunc(reports, func(l electionLine) bool { return l.Role == "won" && l.Leader == 5 })
		if won < 0 {
			t.Fatalf("node 5 logged no won election (%d reports)", len(reports))
		}
		for _, rep := range reports {
			if rep.Method != string(m) {
				t.Errorf("a %s ring logged a %q election", m, rep.Method)
			}
		}
		t.Logf("%d election reports; node 5's win: %+v", len(reports), reports[won])
	}
	for _, id := range live {
		if r.Exited(id) {
			t.Errorf("node %d exited without being killed", id)
		}
	}
}

// coordinatorIs waits until the store names want as coordinator.
func (c *checker) coordinatorIs(want int64, what string) {
	c.t.Helper()
	testutil.Eventually(c.t, within, fmt.Sprintf("%s: coordinator %d", what, want), func() bool {
		co, err := c.st.Coordinator(context.Background())
		return err == nil && co.NodeID == want
	})
}

// openWhenMigrated opens the test's store once the first node has migrated
// it (so checks can read while the other nodes start); closed at cleanup.
func openWhenMigrated(t *testing.T, dsn string) store.Store {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	testutil.Eventually(t, within, "store ready", func() bool {
		s, err := store.Open(ctx, dsn, store.Options{})
		if err != nil {
			return false
		}
		if v, err := store.AppliedMigrations(ctx, s); err != nil || len(v) == 0 {
			s.Close()
			return false
		}
		st = s
		return true
	})
	t.Cleanup(func() { st.Close() })
	return st
}

func terms(h []store.CoordinatorTerm) []string {
	out := make([]string, len(h))
	for i, term := range h {
		out[i] = fmt.Sprintf("e%d:n%d", term.Epoch, term.NodeID)
	}
	return out
}

type electionLine struct {
	Msg          string `json:"message"`
	Method       string `json:"method"`
	Initiator    int64  `json:"initiator"`
	Leader       int64  `json:"leader"`
	Role         string `json:"role"`
	Participants int    `json:"participants"`
	MessagesSent int    `json:"messages_sent"`
	Duration     any    `json:"duration_ms"`
}

// electionReports returns the "election finished" log lines of the nodes.
func electionReports(r *testutil.Ring, ids []int64) []electionLine {
	var out []electionLine
	for _, id := range ids {
		sc := bufio.NewScanner(bytes.NewReader(r.Log(id)))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l electionLine
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "election finished" {
				out = append(out, l)
			}
		}
	}
	return out
}
