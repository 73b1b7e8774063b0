package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
)

// observer reads the ring's state from the store.
type observer struct {
	st   store.Store
	poll time.Duration
}

// ringState is one reading of the store.
type ringState struct {
	order    []int64 // ring order from the successor pointers
	problems []string
	coord    store.Coordinator
	fence    store.Fence
}

func (o *observer) read(ctx context.Context) (ringState, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	nodes, err := o.st.Nodes(ctx)
	if err != nil {
		return ringState{}, err
	}
	var s ringState
	s.order, s.problems = ring.Order(store.Successors(nodes))
	if s.coord, err = o.st.Coordinator(ctx); err != nil {
		return ringState{}, err
	}
	if s.fence, err = o.st.Fence(ctx); err != nil {
		return ringState{}, err
	}
	return s, nil
}

// repair is the outcome of a wait for the ring to re-form.
type repair struct {
	// Moving is when the token was first seen moving on a ring of exactly
	// the live nodes with a live coordinator: the repair time's end.
	Moving time.Time
	// Settled is when it had moved two rotations (the ring works).
	Settled time.Time
	State   ringState
}

// settled waits until the store shows a ring of exactly the live nodes
// (one cycle), a coordinator among them, and the token moving: the fence
// advanced since the ring first looked right, then by two rotations. It
// returns when that happened, or an error describing the last state seen
// when the deadline passed.
func (o *observer) settled(ctx context.Context, live []int64, within time.Duration) (repair, error) {
	live = slices.Sorted(slices.Values(live))
	deadline := time.Now().Add(within)
	var (
		last    string
		start   store.Fence
		started bool
		res     repair
	)
	for {
		s, err := o.read(ctx)
		sorted := slices.Sorted(slices.Values(s.order))
		switch {
		case err != nil:
			last, started = "store: "+err.Error(), false
		case len(s.problems) > 0:
			last, started = fmt.Sprintf("ring broken: %v (order %v)", s.problems, s.order), false
		case !slices.Equal(sorted, live):
			last, started = fmt.Sprintf("ring %v, live nodes %v", s.order, live), false
		case !slices.Contains(live, s.coord.NodeID):
			last, started = fmt.Sprintf("coordinator %d (epoch %d) is not a live node", s.coord.NodeID, s.coord.Epoch), false
		case !started:
			start, started, res.Moving = s.fence, true, time.Time{}
			last = "waiting for the token to move"
		case res.Moving.IsZero() && start.Less(s.fence):
			res.Moving = time.Now()
			last = "token moving; waiting for two rotations"
		case !res.Moving.IsZero() && (s.fence.Generation > start.Generation || s.fence.Seq >= start.Seq+int64(2*len(live))):
			res.Settled, res.State = time.Now(), s
			return res, nil
		default:
			last = fmt.Sprintf("token at %v since %v", s.fence, start)
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("ring not re-formed within %v: %s", within, last)
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		wait(ctx, o.poll)
	}
}
