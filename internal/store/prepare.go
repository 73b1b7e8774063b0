package store

import (
	"context"

	"github.com/ringchat/ringchat/internal/nodelist"
)

// Prepared reports what Prepare did.
type Prepared struct {
	// Applied lists the migrations applied now (none when already current).
	Applied []Migration
	// NodesAdded counts node-list rows that were new to the store.
	NodesAdded int
}

// Prepare is what `ringnode migrate` and node start-up do: open the store
// (creating it if needed), bring the schema up to date, and add the nodes of
// the node list that the store does not know yet. On error nothing stays open.
func Prepare(ctx context.Context, dsn DSN, nodes []nodelist.Entry, opts Options) (Store, Prepared, error) {
	opts.Create = true
	st, err := OpenDSN(ctx, dsn, opts)
	if err != nil {
		return nil, Prepared{}, err
	}
	var p Prepared
	if p.Applied, err = Migrate(ctx, st); err != nil {
		st.Close()
		return nil, Prepared{}, err
	}
	if len(nodes) > 0 {
		if p.NodesAdded, err = st.AddNodes(ctx, nodes); err != nil {
			st.Close()
			return nil, Prepared{}, err
		}
	}
	return st, p, nil
}
