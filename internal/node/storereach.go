package node

// runs on: the visit worker's goroutine (visitWorker) alone: storeReach
// is its local state. The ping it starts (awaitStore) runs on a goroutine
// of its own and says when the store answers again over a channel.

import (
	"context"
	"fmt"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// A node cut from the store alone (its neighbours still reach it) stays in
// the ring, and the token passes through it. Each of its visits used to
// run the critical sections against the store it cannot reach until the
// visit's budget ran out, and the budget is stretched to 4 × MaxHold after
// visits cut short (nextStretch, meant for a lossy link): the token stood
// there 0.3-0.4 s a lap, and the users of the ring's other nodes, whose
// store works, waited for it (2.42 s without a delivery between users of
// two other nodes in a chaos run, a 2-s bound).
//
// After reachTrip visits in a row cut short at their budget, the visit
// worker stops trying: it pings the store (awaitStore) and, until a ping
// answers, passes each token on at once without its sections (a failed
// visit to the ring machine: the work waits here). One visit cut short is
// a lost packet on a lossy link, which the stretched budget is for; a
// store that takes a whole stretched budget twice in a row is not serving
// this node's visits, and a ping tells whether it answers at all. A ping
// that answers lets the next visit try again with the stretched budget.
//
// A store that refuses at once (a database server restarting: connection
// refused) costs the ring nothing per visit and trips nothing here.
type storeReach struct {
	overInARow int  // visits in a row cut short at their budget
	down       bool // visits pass the token on without their sections
}

// reachTrip is the number of visits in a row cut short at their budget
// after which visits are skipped until a ping answers.
const reachTrip = 2

// Ping timing while the store is out of reach: each ping may take
// reachPingTimeout (a packet the database server loses costs its 200-ms
// retransmission; at 20 % loss, with 1.5 s, the node skipped its visits
// for 0.24 s at the median and 3.6 s at the most), and a ping that failed
// at once is tried again after reachPingEvery.
const (
	reachPingTimeout = 500 * time.Millisecond
	reachPingEvery   = 100 * time.Millisecond
)

// errStoreOutOfReach is a visit skipped while the store is out of reach.
// It is store.ErrUnavailable: the health watch's ping judges an outage,
// not the visits (visitTrouble.failedWith).
var errStoreOutOfReach = fmt.Errorf("the store did not answer this node's last visits; waiting for it to answer a ping: %w", store.ErrUnavailable)

// skip reports whether a visit passes the token on without its sections.
func (r *storeReach) skip() bool { return r.down }

// visitEnded records a visit that ran its sections: it failed (err) or
// committed, cut short at its budget or not (over). It reports whether
// the store is now taken for out of reach: the caller starts a ping and
// skips visits until the ping answers (answered).
func (r *storeReach) visitEnded(err error, over bool) (trip bool) {
	if err == nil || !over {
		r.overInARow = 0
		return false
	}
	r.overInARow++
	if r.overInARow < reachTrip || r.down {
		return false
	}
	r.down = true
	return true
}

// answered records that a ping answered: the next visit runs its sections.
func (r *storeReach) answered() {
	r.down = false
	r.overInARow = 0
}

// awaitStore pings the store until it answers, then says so on back; it
// returns without a word when ctx ends.
func awaitStore(ctx context.Context, st store.Control, back chan<- struct{}) {
	for {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, reachPingTimeout)
		err := st.Ping(pctx)
		cancel()
		if err == nil {
			select {
			case back <- struct{}{}:
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(reachPingEvery - time.Since(start)):
		}
	}
}
