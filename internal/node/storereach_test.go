package node

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/token"
)

// TestStoreReachTrips: two visits in a row cut short at their budget make
// the store out of reach; a visit that committed, or failed otherwise (a
// refusal, a fence), between them starts the count again; an answered
// ping clears it.
func TestStoreReachTrips(t *testing.T) {
	cut := context.DeadlineExceeded
	refused := errors.New("connection refused")
	type visit struct {
		err  error
		over bool
		trip bool // visitEnded's answer
		down bool // skip after it
	}
	for _, tc := range []struct {
		name   string
		visits []visit
	}{
		{"one cut short is a lost packet", []visit{{cut, true, false, false}}},
		{"two in a row trip", []visit{{cut, true, false, false}, {cut, true, true, true}}},
		{"a third does not trip again", []visit{{cut, true, false, false}, {cut, true, true, true}, {cut, true, false, true}}},
		{"a commit between", []visit{{cut, true, false, false}, {nil, false, false, false}, {cut, true, false, false}}},
		{"a refusal between", []visit{{cut, true, false, false}, {refused, false, false, false}, {cut, true, false, false}}},
		{"refusals never trip", []visit{{refused, false, false, false}, {refused, false, false, false}, {refused, false, false, false}}},
	} {
		var r storeReach
		for i, v := range tc.visits {
			if got := r.visitEnded(v.err, v.over); got != v.trip {
				t.Errorf("%s: visit %d: trip %v, want %v", tc.name, i, got, v.trip)
			}
			if r.skip() != v.down {
				t.Errorf("%s: after visit %d: skip %v, want %v", tc.name, i, r.skip(), v.down)
			}
		}
	}
	var r storeReach
	r.visitEnded(cut, true)
	r.visitEnded(cut, true)
	r.answered()
	if r.skip() {
		t.Fatal("visits still skipped after a ping answered")
	}
	if r.visitEnded(cut, true) {
		t.Fatal("one visit cut short after a ping answered tripped: it takes two again")
	}
}

// pingCut is a store whose Ping waits on its context while cut is on, as
// a ping to a store the node cannot reach does.
type pingCut struct {
	store.Control
	cut *atomic.Bool
}

func (p pingCut) Ping(ctx context.Context) error {
	if p.cut.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return p.Control.Ping(ctx)
}

// cutSections is section waiting on its context while cut is on, as a
// visit to a store the node cannot reach does; tried counts the visits
// that found the store cut, ran counts the others.
func cutSections(section Section, cut *atomic.Bool, tried, ran *atomic.Int64) Section {
	return func(ctx context.Context, tok token.Token, fenced Fenced) (json.RawMessage, bool, error) {
		if cut.Load() {
			tried.Add(1)
			<-ctx.Done()
			return tok.App, false, ctx.Err()
		}
		ran.Add(1)
		return section(ctx, tok, fenced)
	}
}

// TestNodeCutFromTheStorePassesTheTokenOn: node 2 is cut from the store
// alone. Its first visits (two at the most) run out of their budget;
// after them it passes the token on without trying its sections (the token keeps
// visiting it, and the other nodes commit), until a ping answers; then
// its visits run again.
func TestNodeCutFromTheStorePassesTheTokenOn(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	probe := MutexProbe(zerolog.Nop())
	var cut atomic.Bool
	var tried, ran atomic.Int64
	c.start(1, probe)
	c.startWith(2, func(cfg *Config) {
		cfg.Sections = []Section{cutSections(probe, &cut, &tried, &ran)}
		cfg.Store = pingCut{Control: c.st, cut: &cut}
	})
	c.start(3, probe)
	c.waitHealthy("a ring of three")

	visits := func(id int64) uint64 {
		st, _ := c.nodes[id].Status(context.Background())
		return st.Stats.TokenVisits
	}
	cut.Store(true)
	from2, from1 := visits(2), visits(1)
	testutil.Eventually(t, 10*time.Second, "twenty more token visits at node 2 and at node 1 while node 2 is cut from the store", func() bool {
		return visits(2) >= from2+20 && visits(1) >= from1+20
	})
	// At most reachTrip: a visit cut short by the test's load just before
	// the cut counts towards the trip too.
	if got := tried.Load(); got < 1 || got > reachTrip {
		t.Fatalf("node 2 tried its sections %d times while cut (in %d visits); want 1 to %d, then the token passed on untried", got, visits(2)-from2, reachTrip)
	}
	before := ran.Load()
	cut.Store(false)
	testutil.Eventually(t, 10*time.Second, "node 2 runs its sections again after the heal", func() bool {
		return ran.Load() >= before+3
	})
}
