package node

import (
	"testing"
	"time"
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
