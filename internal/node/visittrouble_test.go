package node

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// A node whose visits fail more often than not, light ones committing
// between them, is troubled; three commits in a row clear it; a failure
// now and then, or fewer visits than troubleMinVisits, do not make it
// troubled; a trouble whose failures left the window ends.
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
		{"three commits in a row clear it", "xxxxooo", false},
		{"failures again after a clear", "xxxxoooxxxx", true},
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
	refused := fmt.Errorf("store: fenced transaction: 127.0.0.1:3306: %w",
		&net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Op: "connect", Err: syscall.ECONNREFUSED}})
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"the store refuses connections", refused, false},
		{"the store is unavailable", fmt.Errorf("%w: not in the primary component", store.ErrUnavailable), false},
		{"visits time out on the store", fmt.Errorf("store: ack: %w", context.DeadlineExceeded), true},
	} {
		var tr visitTrouble
		got := false
		for i := range 6 {
			got = tr.failedWith(t0.Add(time.Duration(i)*100*time.Millisecond), c.err)
		}
		if got != c.want {
			t.Errorf("%s: troubled %v after six failures, want %v", c.name, got, c.want)
		}
	}
}
