package queue

// runs on: the visit goroutine alone (visitState is Queue.v: visits of
// one node never overlap, and nothing else reads or writes it).

import (
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

type visitState struct {
	batch int
	// fetchMax bounds the deliveries one fetch reads (and the users it
	// reads, and so its rows: each user's share is fetchMax over the
	// users). It adapts as the batch does: a quarter after a failed
	// visit that fetched, back up by halves while visits are fast.
	fetchMax int
	// pruneSlice is the messages the next prune slice examines (adapts
	// like fetchMax; see pruneSliceStart).
	pruneSlice int
	// ackMax bounds the acknowledged rows the next visit removes (adapts
	// like fetchMax, up to maxAckRows).
	ackMax    int
	lastGen   int64
	fetchDone uint64
	lastFetch time.Time
	lastPrune time.Time
	// unmark: deliveries marked in the store but never handed to a
	// session (the session was gone, or the visit failed, perhaps after
	// its commit reached the store); the next visit makes them pending
	// again.
	unmark []marked
	// fails counts visits failed in a row: each does less than the last.
	fails int
	// dataFail: a visit failed with an error about its data since the
	// last commit; shrunk visits narrow that work down (shrink).
	dataFail bool
	// shrinkUntil: visits stay shrunk until then (shrinkKeep after the
	// last one that failed over its budget, another having done so
	// shrinkKeep before it at most); zero: not past such failures.
	shrinkUntil time.Time
	// lastOver: when a visit last failed over its budget.
	lastOver time.Time
	// kept is the kind of work (of shrinkKinds) the last shrunk visit
	// that took turns kept.
	kept string
	// cutShort: the last visit's fetch was cut with little time given it,
	// and its size was kept (adaptFetch); the next such cut shrinks it.
	cutShort bool
	// suspect is the one piece of work the last failed visit did alone.
	suspect suspect
	// setAside: users whose fetch failed alone, until when.
	setAside map[int64]time.Time
	// fetchTurn rotates the users a fetch reads when there are more than
	// one fetch takes.
	fetchTurn int
	// pruneNext: the sequence the next prune slice starts after (0: a new
	// round, after the prune interval).
	pruneNext int64
}

// marked is rows a visit marked delivered, with the mark's stamp.
type marked struct {
	stamp int64
	rows  []store.RecipientSeq
}
