package node

import (
	"context"
	"github.com/rs/zerolog"
	"testing"

	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/token"
)

// TestNodePublishesItsSecrets: a node hands its transport (Config.Keys)
// the secret of the generation the store confirmed to it, so that its
// HELLOs prove themselves, and follows the store to a new generation.
func TestNodePublishesItsSecrets(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	keys := map[int64]*token.Keys{1: {}, 2: {}, 3: {}}
	probe := MutexProbe(zerolog.Nop()) // visits that commit: the ring's health is read from the fence
	for _, id := range []int64{1, 2, 3} {
		c.startWith(id, func(cfg *Config) { cfg.Keys, cfg.Sections = keys[id], []Section{probe} })
	}
	c.waitHealthy("formation")
	ctx := context.Background()
	published := func(id int64) bool {
		f, err := c.st.Fence(ctx)
		if err != nil {
			return false
		}
		p := keys[id].HelloProofs(id, 9)
		return len(p) > 0 && p[0].Gen == f.Generation && p[0].Proof == token.ProveHello(f.Secret, f.Generation, id, 9)
	}
	for _, id := range []int64{1, 2, 3} {
		testutil.Eventually(t, testutil.WaitLimit, "node's keys hold the store's generation", func() bool { return published(id) })
	}
	// A new generation in the store (as a coordinator's regeneration
	// makes): the old token is fenced out, the nodes read the new one.
	before, err := c.st.Fence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testutil.WaitLimit, "a new generation", func() bool {
		co, err := c.st.Coordinator(ctx)
		if err != nil {
			return false
		}
		if _, err := c.st.NewGeneration(ctx, co); err != nil {
			return false
		}
		f, err := c.st.Fence(ctx)
		return err == nil && f.Generation > before.Generation
	})
	for _, id := range []int64{1, 2, 3} {
		testutil.Eventually(t, testutil.WaitLimit, "node's keys follow the store's generation", func() bool { return published(id) })
	}
}
