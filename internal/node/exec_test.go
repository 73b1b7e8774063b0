package node

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
)

// A claim-if-stale the store refuses because the coordinator's lease is
// live says how long the lease has left: the claimant tries again then,
// neither in a loop nor a whole lease later.
func TestClaimIfStaleLostSaysWhenTheLeaseEnds(t *testing.T) {
	ctx := context.Background()
	dsn, err := store.ParseDSN("sqlite:" + filepath.Join(t.TempDir(), "ring.db"))
	if err != nil {
		t.Fatal(err)
	}
	list := []nodelist.Entry{{ID: 1, Host: "127.0.0.1", CoordPort: 5001, ClientPort: 8001}, {ID: 2, Host: "127.0.0.1", CoordPort: 5002, ClientPort: 8002}}
	st, _, err := store.Prepare(ctx, dsn, list, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.ClaimCoordinator(ctx, 1, 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	r := execOp(ctx, st, nil, 2, ring.Op{Kind: ring.OpClaim, IfStale: true, LeaseTTL: time.Second})
	if r.Outcome != ring.Lost || r.Coord != 1 {
		t.Fatalf("claim-if-stale over a live lease: %+v, want lost to node 1", r)
	}
	if r.LeaseRemaining <= 9*time.Second || r.LeaseRemaining > 10*time.Second {
		t.Errorf("lease remaining %v, want about 10s", r.LeaseRemaining)
	}
}
