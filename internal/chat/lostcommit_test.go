package chat

import (
	"errors"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
)

// A visit whose commit reached the store but was reported failed (the
// connection broke during COMMIT) has marked deliveries it never handed
// out. The next visit makes them pending again and delivers them, in
// order, while the user stays logged in.
func TestLostCommitOfDeliveries(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	r.rotations(2) // the logins' visits are done
	r.loseCommits(2, 1)
	for _, text := range []string{"one", "two"} {
		if _, err := a.SendWait(ctx, client.ToUser("b"), text); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"one", "two"} {
		if m := nextChat(t, b); m.Content != want {
			t.Fatalf("b got %q, want %q", m.Content, want)
		}
	}
	r.mu.Lock()
	left := r.lost[2]
	r.mu.Unlock()
	if left != 0 {
		t.Fatal("no commit of node 2 was lost: the test tested nothing")
	}
	eventually(t, "all acknowledged", func() bool { return storetest.PendingFor(t, r.st, "b") == 0 })
}

// A visit that stored messages and whose commit was reported failed: the
// next visit stores them again, which finds them stored (same ids), sends
// one receipt each, and tells the recipients' nodes, which the failed
// visit could not.
func TestLostCommitOfStores(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(2), "b", "", client.Options{AutoAck: true})
	r.rotations(2)
	r.loseCommits(1, 1)
	id, err := a.Post(ctx, client.ToUser("b"), "once")
	if err != nil {
		t.Fatal(err)
	}
	m := nextChat(t, b)
	if m.ID != id || m.Content != "once" {
		t.Fatalf("b got %+v", m)
	}
	stored := 0
	deadline := time.After(waitLimit)
	for stored == 0 {
		select {
		case ev := <-a.Events():
			if s, ok := ev.(client.Stored); ok && s.ID == id {
				stored++
			}
		case <-deadline:
			t.Fatal("no STORED for the message")
		}
	}
	r.rotations(3)
	for {
		select {
		case ev := <-a.Events():
			if s, ok := ev.(client.Stored); ok {
				t.Fatalf("second receipt %+v", s)
			}
			continue
		case ev := <-b.Events():
			if m, ok := ev.(client.ChatMessage); ok {
				t.Fatalf("b got a second message %+v", m)
			}
			continue
		default:
		}
		break
	}
	r.mu.Lock()
	left := r.lost[1]
	r.mu.Unlock()
	if left != 0 {
		t.Fatal("no commit of node 1 was lost: the test tested nothing")
	}
}

// A visit takes its work (the sessions it delivers to) before its
// transaction; if the user's session ends and the user logs in again at the
// same node in between, the visit marks the user's rows delivered (the user
// is present here) for the session that is gone. The next visit makes them
// pending again, and the new session gets them.
func TestSessionGoneBeforeVisitTx(t *testing.T) {
	r := newRing(t, 2, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	seen := client.NewSeen(0)
	opts := client.Options{AutoAck: true, Seen: seen, Timeout: waitLimit}
	b := dialV2(t, r.addr(2), "b", "", opts)
	var bID int64
	if err := r.st.Update(ctx, func(tx store.Tx) error {
		u, err := tx.UserByName("b")
		bID = u.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r.rotations(2)
	type result struct {
		c   *client.Conn
		err error
	}
	again := make(chan result, 1)
	r.beforeNextTx(2, func() {
		b.Close()
		srv := r.servers[1]
		gone := testutil.WaitFor(waitLimit, 2*time.Millisecond, func() bool {
			srv.mu.Lock()
			defer srv.mu.Unlock()
			return srv.sessions[bID] == nil
		})
		if !gone {
			again <- result{err: errors.New("b's session did not end")}
			return
		}
		c, err := client.Dial(ctx, r.addr(2), opts)
		if err == nil {
			if err = c.LoginV2(ctx, "b", ""); err != nil {
				c.Close()
			}
		}
		again <- result{c, err}
	})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "kept"); err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-again:
	case <-time.After(waitLimit):
		t.Fatal("node 2 made no visit with b's session")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.c.Close()
	if m := nextChat(t, res.c); m.Content != "kept" {
		t.Fatalf("b's new session got %q", m.Content)
	}
}
