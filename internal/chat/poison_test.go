package chat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/store"
)

// badMessageStore fails every visit that stores a message with the content
// "bad" (while failing > 0, counting down; -1: always).
type badMessageStore struct {
	store.Store
	failing atomic.Int64
}

func (b *badMessageStore) Fenced(ctx context.Context, f store.Fence, fn func(store.Tx) error) error {
	return b.Store.Fenced(ctx, f, func(tx store.Tx) error { return fn(badMessageTx{tx, b}) })
}

type badMessageTx struct {
	store.Tx
	b *badMessageStore
}

func (t badMessageTx) InsertMessages(ms []store.NewMessage, rcpts [][]int64) ([]store.Inserted, error) {
	for _, m := range ms {
		if m.Content != "bad" {
			continue
		}
		if n := t.b.failing.Load(); n != 0 {
			if n > 0 {
				t.b.failing.Add(-1)
			}
			return nil, errors.New("the statement fails on this message")
		}
	}
	return t.Tx.InsertMessages(ms, rcpts)
}

// A message whose storing fails on its own, visit after visit, for longer
// than PoisonStreak is set aside: refused to its sender with UNAVAILABLE,
// counted, and the node's other messages flow.
func TestMessageThatFailsAloneIsSetAside(t *testing.T) {
	st := &badMessageStore{Store: newStore(t, 1)}
	st.failing.Store(-1)
	r := newRingOn(t, st, 1, func(c *Config) { c.PoisonStreak = 100 * time.Millisecond })
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "bad"); err == nil {
		t.Fatal("the bad message was stored")
	} else if se := (*client.ServerError)(nil); !errors.As(err, &se) || se.Code != string(CodeUnavailable) {
		t.Fatalf("refusal %v, want %s", err, CodeUnavailable)
	}
	if _, err := a.SendWait(ctx, client.ToUser("b"), "fine"); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, b); m.Content != "fine" {
		t.Fatalf("b got %q", m.Content)
	}
	if p := r.servers[0].Stats().Poisoned; p != 1 {
		t.Fatalf("%d pieces of work set aside, want 1", p)
	}
}

// A message that fails alone for less than PoisonStreak (the store busy
// for a moment) is not set aside: it waits and is stored once the store
// takes it.
func TestMessageFailingBrieflyIsStored(t *testing.T) {
	st := &badMessageStore{Store: newStore(t, 1)}
	st.failing.Store(4 * poisonAfter)
	r := newRingOn(t, st, 1, func(c *Config) { c.PoisonStreak = time.Minute })
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	if _, err := a.SendWait(ctx, client.ToUser("b"), "bad"); err != nil {
		t.Fatalf("a message that failed %d times: %v", 4*poisonAfter, err)
	}
	if m := nextChat(t, b); m.Content != "bad" {
		t.Fatalf("b got %q", m.Content)
	}
	if n := st.failing.Load(); n != 0 {
		t.Fatalf("%d failures left: the visits never retried it", n)
	}
	if p := r.servers[0].Stats().Poisoned; p != 0 {
		t.Fatalf("%d pieces of work set aside, want none", p)
	}
}
