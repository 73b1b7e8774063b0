package chat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
)

// downStore fails every unfenced transaction while down is set, as a
// store that went away for a moment.
type downStore struct {
	store.Store
	down atomic.Bool
}

func (d *downStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if d.down.Load() {
		return store.ErrUnavailable
	}
	return d.Store.Update(ctx, fn)
}

// A session that ends while the store is away cannot clear its presence;
// the node clears it once the store is back, soon, not at the next
// periodic presence check, so that the user can log in elsewhere.
func TestPresenceClearedSoonAfterStoreReturns(t *testing.T) {
	st := &downStore{Store: newStore(t, 2)}
	r := newRingOn(t, st, 2, func(c *Config) { c.ReconcileInterval = time.Hour })
	ctx := ctxT(t)
	u := dialV2(t, r.addr(1), "u", "", client.Options{})
	st.down.Store(true)
	u.Close()
	eventually(t, "the session at node 1 ended", func() bool {
		s := r.servers[0]
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.sessions) == 0
	})
	st.down.Store(false)
	var err error
	ok := testutil.WaitFor(waitLimit, 20*time.Millisecond, func() bool {
		c, derr := client.Dial(ctx, r.addr(2), client.Options{Timeout: waitLimit})
		if derr != nil {
			t.Fatal(derr)
		}
		err = c.LoginV2(ctx, "u", "")
		c.Close()
		var se *client.ServerError
		if err != nil && (!errors.As(err, &se) || se.Code != protocol.CodeUserOnline) {
			t.Fatalf("login at node 2: %v", err)
		}
		return err == nil
	})
	if !ok {
		t.Fatalf("login at node 2: %v", err)
	}
}

// A node spliced out of the ring (it stalled) loses its presence rows to
// the coordinator; when it has joined again (Config.Joined), the presence
// check restores them at once, not at the next periodic check, and its
// users get what came meanwhile.
func TestPresenceRestoredWhenTheNodeJoinedAgain(t *testing.T) {
	joined := make(chan struct{}, 1)
	r := newRing(t, 2, func(c *Config) {
		c.ReconcileInterval = time.Hour
		if c.NodeID == 2 {
			c.Joined = joined
		}
	})
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	u := dialV2(t, r.addr(2), "u", "", client.Options{AutoAck: true})
	if err := r.st.Update(ctx, func(tx store.Tx) error { // as the coordinator does when it splices node 2 out
		_, err := tx.ClearNodePresence(2)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendWait(ctx, client.ToUser("u"), "while away"); err != nil {
		t.Fatal(err)
	}
	joined <- struct{}{} // as the node does when it has joined again
	if m := nextChat(t, u); m.Content != "while away" {
		t.Fatalf("u got %q", m.Content)
	}
}

// vanishingStore refuses presence while vanish > 0 (the user online at
// another node) and finds no presence row when it is read, counting down:
// the other session logged out between the two.
type vanishingStore struct {
	store.Store
	vanish atomic.Int64
}

func (v *vanishingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return v.Store.Update(ctx, func(tx store.Tx) error { return fn(vanishingTx{tx, v}) })
}

func (v *vanishingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return v.Store.View(ctx, func(tx store.Tx) error { return fn(vanishingTx{tx, v}) })
}

type vanishingTx struct {
	store.Tx
	v *vanishingStore
}

func (t vanishingTx) SetPresence(userID, nodeID int64) error {
	if t.v.vanish.Load() > 0 {
		return store.ErrUserOnline
	}
	return t.Tx.SetPresence(userID, nodeID)
}

func (t vanishingTx) PresenceOf(userID int64) (store.Presence, error) {
	t.v.vanish.Add(-1)
	return store.Presence{}, store.ErrNotFound
}

// A login that finds the user's presence taken, and the row gone when it
// looks at whose it is (that session just logged out), logs in; only a
// presence that keeps vanishing gives up, with UNAVAILABLE.
func TestLoginRacingALogoutSucceeds(t *testing.T) {
	st := &vanishingStore{Store: newStore(t, 1)}
	r := newRingOn(t, st, 1, nil)
	st.vanish.Store(1)
	dialV2(t, r.addr(1), "u", "", client.Options{})
	st.vanish.Store(100)
	c, err := client.Dial(ctxT(t), r.addr(1), client.Options{Timeout: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.LoginV2(ctxT(t), "w", "")
	if err == nil {
		t.Fatal("a presence that never settles let the login in")
	}
	if se := (*client.ServerError)(nil); !errors.As(err, &se) || se.Code != protocol.CodeUnavailable {
		t.Fatalf("login with a presence that keeps vanishing: %v, want %s", err, protocol.CodeUnavailable)
	}
	if left := st.vanish.Load(); left != 100-presenceTries {
		t.Fatalf("%d looks at the presence, want %d", 100-left, presenceTries)
	}
}
