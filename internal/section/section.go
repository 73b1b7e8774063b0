// Package section is the seam between the ring's runtime (internal/node)
// and the work done while a node holds the token (internal/chat): the
// critical section's type, its fenced transaction, and an observer for
// measurements. It depends on neither side, so that the chat service and
// the node runtime import it and not each other.
package section

import (
	"context"
	"encoding/json"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

// Fenced runs fn in one store transaction fenced by the visiting token's
// stamp: if a newer token (or another copy of this one) has written, fn does
// not run and the error wraps store.ErrFenced.
type Fenced func(fn func(store.Tx) error) error

// Section is work done while this node holds the token (a critical section
// on the message queue). It gets the token (whose App data it may replace)
// and a way to run fenced transactions; it should touch the store only when
// it has work. It returns the token's new App data and whether it did work.
type Section func(ctx context.Context, tok token.Token, fenced Fenced) (app json.RawMessage, worked bool, err error)

// Observer takes one measurement; a Prometheus histogram is one.
type Observer interface{ Observe(float64) }
