package node

import (
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/ring"
)

// TestOpTimeout: a store operation gets StoreTimeout, a check a token may
// wait on CheckTimeout, and a lease renewal no longer than the lease it
// renews (so that, under heavy loss on the coordinator's packets, the
// repair queued behind a renewal does not wait the whole StoreTimeout).
func TestOpTimeout(t *testing.T) {
	c := DefaultConfig(1)
	lease := time.Duration(c.Ring.AliveTicks) * c.Ring.Tick
	for _, tc := range []struct {
		op   ring.Op
		want time.Duration
	}{
		{ring.Op{Kind: ring.OpRepair}, c.StoreTimeout},
		{ring.Op{Kind: ring.OpJoin}, c.StoreTimeout},
		{ring.Op{Kind: ring.OpClaim, LeaseTTL: lease}, c.StoreTimeout},
		{ring.Op{Kind: ring.OpReadFence}, c.CheckTimeout},
		{ring.Op{Kind: ring.OpCheckMember}, c.CheckTimeout},
		{ring.Op{Kind: ring.OpAlive, LeaseTTL: lease}, lease},
		{ring.Op{Kind: ring.OpAlive, LeaseTTL: time.Minute}, c.StoreTimeout},
		{ring.Op{Kind: ring.OpAlive}, c.StoreTimeout},
	} {
		if got := c.opTimeout(tc.op); got != tc.want {
			t.Errorf("%s (lease %v): %v, want %v", tc.op.Kind, tc.op.LeaseTTL, got, tc.want)
		}
	}
	if lease >= c.StoreTimeout {
		t.Fatalf("the default lease %v is not shorter than StoreTimeout %v: the test shows nothing", lease, c.StoreTimeout)
	}
}
