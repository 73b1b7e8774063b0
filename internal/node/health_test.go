package node

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/testutil"
)

// A node in the ring whose visits commit says nothing; out of the ring,
// failing its visits, or (as coordinator) avoiding links, it says so.
func TestHealthLine(t *testing.T) {
	for _, c := range []struct {
		name string
		st   Status
		want string
	}{
		{"serving", Status{Phase: ring.PhaseInRing}, ""},
		{"left cleanly", Status{Phase: ring.PhaseLeft}, ""},
		{"joining (the store's ring says so)", Status{Phase: ring.PhaseJoining}, ""},
		{"visits failing", Status{Phase: ring.PhaseInRing, VisitsFailing: true},
			"most of its critical sections fail (the store answers, but not its visits)"},
		{"coordinator avoiding links", Status{Phase: ring.PhaseInRing, IsCoord: true, AvoidedLinks: [][2]int64{{3, 4}, {2, 5}}},
			"avoids links that keep failing: 3-4, 2-5"},
		{"a member does not speak for links", Status{Phase: ring.PhaseInRing, AvoidedLinks: [][2]int64{{3, 4}}}, ""},
		{"both", Status{Phase: ring.PhaseInRing, IsCoord: true, VisitsFailing: true, AvoidedLinks: [][2]int64{{1, 2}}},
			"most of its critical sections fail (the store answers, but not its visits); avoids links that keep failing: 1-2"},
	} {
		if got := healthLine(c.st); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A running node reports its health to the store at start and again
// every healthEvery: a serving node's row says nothing, just now.
func TestNodeReportsItsHealth(t *testing.T) {
	c := newCluster(t, 1)
	c.start(1, MutexProbe(zerolog.Nop()))
	c.waitHealthy("formation")
	// reported is when the row was last written, by its age.
	reported := func() (time.Time, bool) {
		nodes, err := c.st.Nodes(context.Background())
		if err != nil || len(nodes) != 1 || nodes[0].Health != "" || nodes[0].HealthAge < 0 {
			return time.Time{}, false
		}
		return time.Now().Add(-nodes[0].HealthAge), true
	}
	var first time.Time
	testutil.Eventually(t, testutil.WaitLimit, "a serving node's report", func() bool {
		at, ok := reported()
		first = at
		return ok
	})
	testutil.Eventually(t, testutil.WaitLimit, "the report renewed", func() bool {
		at, ok := reported()
		return ok && at.Sub(first) >= healthEvery/2
	})
}
