package node

import (
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// visitTrouble tells from the outcomes of this node's critical sections
// whether the store serves them. A store that answers a ping may still
// fail most visits: on a lossy link every lost packet costs a visit a
// retransmission (200 ms at the least), and a visit of a dozen statements
// loses one often. Seen at 5 % loss: the node's visits failed at their
// budget between light ones that committed, and its users got nothing
// for 20 s while the ping said the store was there. A node in that state
// tells its clients to move, as one that cannot reach the store does.
//
// It is pure: the visit worker's results come in on the node's loop
// goroutine with the time they were judged.
type visitTrouble struct {
	recent   []visitOutcome // within troubleWindow, oldest first
	troubled bool
	okRun    int // visits committed in a row
}

type visitOutcome struct {
	at time.Time
	ok bool
}

const (
	// troubleWindow is how far back outcomes are judged.
	troubleWindow = 2 * time.Second
	// troubleMinVisits is the fewest visits in the window that can make
	// the node troubled: one or two failures are a hiccup.
	troubleMinVisits = 4
	// troubleFailedPct is the share of failed visits in the window, in
	// percent, that makes it troubled.
	troubleFailedPct = 50
	// troubleClearRun is how many visits committed in a row clear it (a
	// light one that commits between failing ones does not).
	troubleClearRun = 3
)

// observe records a visit that committed (ok) or failed at now (a visit
// fenced off by a newer token is not the store's failure: it is not
// observed) and reports whether the node is troubled.
func (t *visitTrouble) observe(now time.Time, ok bool) bool {
	t.forget(now)
	t.recent = append(t.recent, visitOutcome{at: now, ok: ok})
	if ok {
		t.okRun++
	} else {
		t.okRun = 0
	}
	switch {
	case t.troubled && t.okRun >= troubleClearRun:
		t.troubled = false
	case !t.troubled && len(t.recent) >= troubleMinVisits && t.failed()*100 >= troubleFailedPct*len(t.recent):
		t.troubled = true
	}
	return t.troubled
}

// failedWith records a visit that failed at now with err and reports
// whether the node is troubled. A visit whose store could not be reached
// at all is not counted: the health watch's ping fails on the same and
// judges it. Counted, a database restart made every node troubled, and
// each went on refusing logins after the store was back, until three
// visits in a row had committed or the failures had left the window; with
// no clients the ring went quiet and its token rested (the chaos suite's
// pause check failed on it, 761 ms after a restart).
func (t *visitTrouble) failedWith(now time.Time, err error) bool {
	if store.IsUnreachable(err) {
		return t.at(now)
	}
	return t.observe(now, false)
}

// at reports whether the node is troubled at now: a troubled node whose
// last failure has left the window is not (its clients may have left and
// its visits stopped with them; the next failures judge it again).
func (t *visitTrouble) at(now time.Time) bool {
	t.forget(now)
	if t.troubled && t.failed() == 0 {
		t.troubled = false
	}
	return t.troubled
}

func (t *visitTrouble) forget(now time.Time) {
	i := 0
	for i < len(t.recent) && now.Sub(t.recent[i].at) > troubleWindow {
		i++
	}
	t.recent = t.recent[i:]
}

func (t *visitTrouble) failed() int {
	n := 0
	for _, o := range t.recent {
		if !o.ok {
			n++
		}
	}
	return n
}
