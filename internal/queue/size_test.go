package queue

import (
	"fmt"
	"testing"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// A visit that fails for a reason not about its data (a timeout, a lost
// connection: the network's or the server's) leaves the next visits at
// least minBatch messages and deliveries: on a lossy link a smaller visit
// costs as many round trips, and smaller still only lets a backlog grow.
// A data error still halves the work, down to one message, to find the
// message the store refuses.
func TestVisitSizeAfterFailures(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		wantFloor bool
	}{
		{"timeouts", outageErrs[1], true},
		{"a lost connection", outageErrs[0], true},
		{"a data error", fmt.Errorf("store: insert messages: %w", dataErr), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			forStores(t, 1, func(t *testing.T, st store.Store) {
				r := newTestRing(t, st, 1, nil)
				a := r.login(1, "a", protocol.V2)
				b := r.login(1, "b", protocol.V2)
				r.rotate(1, false)
				for i := range 40 {
					r.send(1, a, Recipient{Name: "b"}, fmt.Sprint("m", i))
				}
				r.fenced = func(int64, store.Fence, func(store.Tx) error) error { return c.err }
				q := r.nodes[0].q
				for range 4 {
					q.FetchFor(b.user)
					if _, err := r.visit(1); err == nil {
						t.Fatal("an injected failure did not fail the visit")
					}
				}
				if floor := q.v.batch >= minBatch && q.v.fetchMax >= minBatch; floor != c.wantFloor {
					t.Errorf("after four failures: batch %d, fetch %d; kept at minBatch (%d): %v, want %v",
						q.v.batch, q.v.fetchMax, minBatch, floor, c.wantFloor)
				}
				r.fenced = nil
				r.rotate(12, false)
				if got := len(b.contents()); got != 40 {
					t.Errorf("b got %d messages, want 40", got)
				}
			})
		})
	}
}
