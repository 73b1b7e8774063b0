package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/token"
)

// errRefused is what a visit meets while the database server is down: its
// dial is refused.
var errRefused = fmt.Errorf("store: fenced transaction: 127.0.0.1:3306: %w",
	&net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Op: "connect", Err: syscall.ECONNREFUSED}})

// A node whose visits fail more often than not, light ones committing
// between them, is troubled; commits right after failures do not clear
// it; a failure now and then, or fewer visits than troubleMinVisits, do
// not make it troubled; a trouble whose failures left the window ends.
func TestVisitTroubleFromOutcomes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := func(tr *visitTrouble, start int, outcomes string) (bool, int) {
		got := false
		for i, c := range outcomes {
			got = tr.observe(at(start+100*i), c == 'o')
		}
		return got, start + 100*len(outcomes)
	}
	for _, c := range []struct {
		name, outcomes string
		want           bool
	}{
		{"every visit commits", "oooooooooo", false},
		{"one failure in four", "oxoooxoooxoo", false},
		{"too few visits to judge", "xxx", false},
		{"half fail, light ones commit between", "xoxo", true},
		{"most fail", "oooxxxx", true},
		{"two commits in a row do not clear it", "xxxxoo", true},
		{"three commits in a row do not clear it either", "xxxxooo", true},
		{"nor do ten", "xxxxoooooooooo", true},
	} {
		var tr visitTrouble
		if got, _ := run(&tr, 0, c.outcomes); got != c.want {
			t.Errorf("%s (%s): troubled %v, want %v", c.name, c.outcomes, got, c.want)
		}
	}
	// Failures spread over more than the window are judged in it alone.
	var tr visitTrouble
	for i := range 10 {
		ok := i%3 != 0 // one in three fails
		if got := tr.observe(at(i*int(troubleWindow/time.Millisecond)/2), ok); got {
			t.Fatalf("visit %d: troubled by failures outside the window", i)
		}
	}
	// A troubled node whose visits stopped (its clients left) is not
	// troubled once its last failure is older than the window.
	tr = visitTrouble{}
	_, end := run(&tr, 0, "xxxx")
	if !tr.at(at(end)) {
		t.Fatal("not troubled right after four failures")
	}
	if !tr.at(at(end - 100).Add(troubleWindow)) {
		t.Fatal("trouble ended while its last failure was in the window")
	}
	if tr.at(at(end).Add(troubleWindow)) {
		t.Fatal("still troubled once every failure left the window")
	}
}

// Visits that fail because the store cannot be reached at all (a database
// restart: every node's dial is refused) do not make the node troubled:
// its health watch's ping says so, and clears at once when the store is
// back. Visits that reach the store and fail (timeouts, broken
// connections) do.
func TestVisitTroubleLeavesAnOutageToThePing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"the store refuses connections", errRefused, false},
		{"the store is unavailable", fmt.Errorf("%w: not in the primary component", store.ErrUnavailable), false},
		{"visits time out on the store", fmt.Errorf("store: ack: %w", context.DeadlineExceeded), true},
	} {
		var tr visitTrouble
		got := false
		for i := range 6 {
			got = tr.failedWith(t0.Add(time.Duration(i)*100*time.Millisecond), c.err, false)
		}
		if got != c.want {
			t.Errorf("%s: troubled %v after six failures, want %v", c.name, got, c.want)
		}
	}
}

// A node on a lossy link: its visits fail at their budget, and light ones
// commit three or four in a row between them. Once troubled it stays so
// while failures keep coming, and clears at the first visit that commits
// once no failure is left in troubleWindow, not before. Cleared by three
// commits in a row, the flag flapped (set at 335.4 s, cleared at 335.7 s
// in a chaos run at 5 % loss), and a client moved back onto the lossy
// node and starved.
func TestVisitTroubleDoesNotFlap(t *testing.T) {
	var tr visitTrouble
	now := time.Unix(1000, 0)
	step := func(ok bool) bool {
		now = now.Add(100 * time.Millisecond)
		if ok {
			return tr.observe(now, true)
		}
		return tr.failedWith(now, fmt.Errorf("store: mark delivered: %w", context.DeadlineExceeded), true)
	}
	for range 4 {
		step(false)
	}
	if !tr.at(now) {
		t.Fatal("not troubled after four failures in a row")
	}
	lastFail := now
	for i := range 40 { // a failure every half second, commits between
		ok := i%5 != 4
		if !step(ok) || !tr.at(now) {
			t.Fatalf("cleared at visit %d of the lossy run (committed: %v), the last failure %v before", i, ok, now.Sub(lastFail))
		}
		if !ok {
			lastFail = now
		}
	}
	for {
		got := step(true)
		if now.Sub(lastFail) <= troubleWindow {
			if !got {
				t.Fatalf("cleared %v after the last failure, within troubleWindow (%v)", now.Sub(lastFail), troubleWindow)
			}
			continue
		}
		if got || tr.at(now) {
			t.Fatalf("still troubled %v after the last failure, with every visit since committed", now.Sub(lastFail))
		}
		break
	}
}

// A database restart: the visit in flight loses its connection (counted:
// the store had been reached), the next ones cannot connect while the
// server is down (not counted: the health watch's ping tells the clients
// then), and then visits commit again. The node is never troubled, after
// the restart either, whether its visits were many before it or none,
// and whether the server was down briefly or long.
func TestVisitTroubleAfterADatabaseRestart(t *testing.T) {
	lost := fmt.Errorf("store: fenced transaction: %w", mysql.ErrInvalidConn)
	for _, c := range []struct {
		name string
		busy bool
		down time.Duration
	}{
		{"busy, a quick restart", true, 500 * time.Millisecond},
		{"busy, a slow restart", true, 5 * time.Second},
		{"quiet, a quick restart", false, 500 * time.Millisecond},
		{"quiet, a slow restart", false, 5 * time.Second},
	} {
		var tr visitTrouble
		now := time.Unix(1000, 0)
		check := func(when string, troubled bool) {
			t.Helper()
			if troubled {
				t.Errorf("%s: troubled %s (at %v)", c.name, when, now.Sub(time.Unix(1000, 0)))
			}
		}
		if c.busy {
			for range 20 {
				now = now.Add(100 * time.Millisecond)
				check("before the restart", tr.observe(now, true))
			}
		} else {
			now = now.Add(10 * time.Second)
		}
		now = now.Add(100 * time.Millisecond)
		check("by the visit in flight", tr.failedWith(now, lost, false))
		for end := now.Add(c.down); now.Before(end); {
			now = now.Add(100 * time.Millisecond)
			check("while the server is down", tr.failedWith(now, errRefused, true))
		}
		for range 30 {
			now = now.Add(100 * time.Millisecond)
			check("once visits commit again", tr.observe(now, true))
			check("once visits commit again, as the health watch reads it", tr.at(now))
		}
	}
}

// A node on a link that loses 5 % of its packets: one visit in three is
// cancelled at its budget, light ones commit between (fewer than half
// fail). Two such visits within troubleWindow make it troubled, however
// many committed between them; one alone, or two further apart than the
// window, or failures that were refused rather than cut short at the
// budget, do not (the share rule judges those).
func TestVisitTroubleFromVisitsCutAtTheirBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	slow := fmt.Errorf("store: ack: %w", context.DeadlineExceeded)
	lost := fmt.Errorf("store: fenced transaction: %w", mysql.ErrInvalidConn)
	for _, c := range []struct {
		name     string
		outcomes string // o committed, x cut at its budget, r failed otherwise; 100 ms apart
		gapMS    int    // added before the last outcome
		want     bool
	}{
		{"one cut at its budget among commits", "oooxoooooo", 0, false},
		{"two cut at their budget, commits between", "oxooooox", 0, true},
		{"two cut at their budget in a row", "xx", 0, true},
		{"two cut at their budget further apart than the window", "oxoo" + "x", int(troubleWindow / time.Millisecond), false},
		{"two failed otherwise, commits between", "orooooor", 0, false},
		{"one cut at its budget, one failed otherwise", "oxooooor", 0, false},
	} {
		var tr visitTrouble
		now := t0
		got := false
		for i, ch := range c.outcomes {
			now = now.Add(100 * time.Millisecond)
			if i == len(c.outcomes)-1 {
				now = now.Add(time.Duration(c.gapMS) * time.Millisecond)
			}
			switch ch {
			case 'o':
				got = tr.observe(now, true)
			case 'x':
				got = tr.failedWith(now, slow, true)
			case 'r':
				got = tr.failedWith(now, lost, false)
			}
		}
		if got != c.want {
			t.Errorf("%s (%s): troubled %v, want %v", c.name, c.outcomes, got, c.want)
		}
	}
}

// A node whose every fourth visit runs out of its time budget (a lossy
// link to the store), the others committing, says its visits are failing:
// fewer than half fail, so it is the visits cut at their budget that tell
// (the visit worker hands the budget's expiry to the judge). Its
// neighbours, whose visits all commit, do not.
func TestNodeTroubledByVisitsCutAtTheirBudget(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	probe := MutexProbe(zerolog.Nop())
	var visits atomic.Int64
	var on atomic.Bool
	on.Store(true)
	c.start(1, probe)
	c.start(2, cutOneInFour(probe, &on, &visits))
	c.start(3, probe)
	var failed uint64
	testutil.Eventually(t, 10*time.Second, "node 2 says its visits fail", func() bool {
		st, ok := c.nodes[2].Status(context.Background())
		failed = st.Stats.SectionFailures
		return ok && st.VisitsFailing
	})
	// One visit cut at its budget is a hiccup; it takes two. (Counted by
	// the node, not by the visits cut here: on a loaded machine a visit
	// of the probe's may run out of its budget too, the first one most
	// often, and counts the same.)
	if failed < 2 {
		t.Fatalf("node 2 troubled after %d failed visits (%d visits)", failed, visits.Load())
	}
	for _, id := range []int64{1, 3} {
		if st, ok := c.nodes[id].Status(context.Background()); !ok || st.VisitsFailing {
			t.Errorf("node %d: status %+v (answered %v): its visits all commit", id, st, ok)
		}
	}
}

// TestTroubledCoordinatorHandsItsRoleOn: the coordinator's visits run out
// of their budget (one in four), so the node is troubled: it hands the
// coordinator role to the highest other member and stays in the ring.
func TestTroubledCoordinatorHandsItsRoleOn(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	probe := MutexProbe(zerolog.Nop())
	var visits atomic.Int64
	var lossyOn atomic.Bool
	c.start(1, probe)
	c.start(2, probe)
	c.start(3, cutOneInFour(probe, &lossyOn, &visits))
	testutil.Eventually(t, 10*time.Second, "node 3 coordinator", func() bool {
		st, ok := c.nodes[3].Status(context.Background())
		return ok && st.IsCoord && st.Phase == ring.PhaseInRing
	})
	lossyOn.Store(true)
	testutil.Eventually(t, 10*time.Second, "node 2 coordinator, node 3 in the ring", func() bool {
		s2, ok2 := c.nodes[2].Status(context.Background())
		s3, ok3 := c.nodes[3].Status(context.Background())
		return ok2 && ok3 && s2.IsCoord && !s3.IsCoord && s3.Coordinator == 2 && s3.Phase == ring.PhaseInRing
	})
}

// cutOneInFour is section with every fourth visit made while on holds
// waiting on its context, as a statement waiting on a lost packet does,
// so that it runs out of its time budget; visits counts the visits made
// while on.
func cutOneInFour(section Section, on *atomic.Bool, visits *atomic.Int64) Section {
	return func(ctx context.Context, tok token.Token, fenced Fenced) (json.RawMessage, bool, error) {
		if on.Load() && visits.Add(1)%4 == 0 {
			<-ctx.Done()
			return tok.App, false, ctx.Err()
		}
		return section(ctx, tok, fenced)
	}
}
