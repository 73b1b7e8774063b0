package transport

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/ringchat/ringchat/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait for an event: long, since -race is slow;
// a passing test never waits that long.
const waitTimeout = 10 * time.Second

var testKey = []byte("transport-test-key-0123456789abcdef")

func newTestCodec(t testing.TB, key []byte, opts ...wire.Option) *wire.Codec {
	t.Helper()
	c, err := wire.NewCodec(key, opts...)
	if err != nil {
		t.Fatalf("NewCodec: %v", err)
	}
	return c
}

// testLogger logs through t; MemNetwork adds the node ids itself.
func testLogger(t testing.TB) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

// frame returns a frame of type typ from src, with a payload naming it.
func frame(typ string, src int64, n int) wire.Frame {
	return wire.Frame{Type: typ, Src: src, Payload: fmt.Appendf(nil, `{"n":%d}`, n)}
}

// match describes an expected event: Kind and Peer always, Via and Type
// if set.
type match struct {
	Kind EventKind
	Peer int64
	Via  Via
	Type string
}

func (m match) String() string {
	if m.Kind == EventFrame {
		return fmt.Sprintf("frame %s from %d via %s", m.Type, m.Peer, m.Via)
	}
	return fmt.Sprintf("%s %d", m.Kind, m.Peer)
}

func (m match) ok(ev Event) bool {
	return ev.Kind == m.Kind && ev.Peer == m.Peer &&
		(m.Via == 0 || ev.Via == m.Via) && (m.Type == "" || ev.Frame.Type == m.Type)
}

// link matches a link event.
func link(k EventKind, peer int64) match { return match{Kind: k, Peer: peer} }

// framed matches a frame event.
func framed(via Via, peer int64, typ string) match {
	return match{Kind: EventFrame, Peer: peer, Via: via, Type: typ}
}

// next returns the next event of tr, failing after waitTimeout.
func next(t testing.TB, name string, tr Transport) Event {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case ev, ok := <-tr.Events():
		if !ok {
			t.Fatalf("%s: events channel closed", name)
		}
		return ev
	case <-timer.C:
		t.Fatalf("%s: no event within %v", name, waitTimeout)
	}
	panic("unreachable")
}

// expect checks that the next events of tr are ms, in this order.
func expect(t testing.TB, name string, tr Transport, ms ...match) []Event {
	t.Helper()
	var evs []Event
	for _, m := range ms {
		ev := next(t, name, tr)
		if !m.ok(ev) {
			t.Fatalf("%s: got event %v, want %v", name, ev, m)
		}
		evs = append(evs, ev)
	}
	return evs
}

// expectAnyOrder checks that the next len(ms) events of tr are ms, in any
// order, and returns them in the order of ms.
func expectAnyOrder(t testing.TB, name string, tr Transport, ms ...match) []Event {
	t.Helper()
	evs := make([]Event, len(ms))
	seen := make([]bool, len(ms))
	for range ms {
		ev := next(t, name, tr)
		i := -1
		for j, m := range ms {
			if !seen[j] && m.ok(ev) {
				i = j
				break
			}
		}
		if i < 0 {
			t.Fatalf("%s: got event %v, want one of %v", name, ev, ms)
		}
		seen[i], evs[i] = true, ev
	}
	return evs
}

// mustSend fails the test if err is not nil.
func mustSend(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// ours returns the stacks of goroutines running code of this package
// (outside its tests), other than the caller's. A goroutine whose top frame
// is goFunc's wrapper has run its deferred wg.Done and is only returning.
func ours() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the caller
		}
		if body, _, ok := strings.Cut(g, "\ncreated by "); ok {
			g = body // where it was started from does not count
		}
		lines := strings.Split(g, "\n")
		if len(lines) > 1 && strings.Contains(lines[1], "(*Net).goFunc.func1(") {
			continue
		}
		for _, line := range lines {
			if strings.Contains(line, "/internal/transport/") && !strings.Contains(line, "_test.go") {
				found = append(found, g)
				break
			}
		}
	}
	return found
}

// cluster is a set of transports on one network, closed at the end of the
// test.
type cluster map[int64]Transport

// factory makes a cluster of nodes with the given ids.
type factory func(t *testing.T, ids ...int64) cluster

func netFactory(t *testing.T, ids ...int64) cluster {
	c := cluster{}
	for id, n := range netCluster(t, nil, ids...) {
		c[id] = n
	}
	return c
}

// netCluster starts a Net per id on 127.0.0.1, resolving each other through
// a shared table; mod, if not nil, adjusts each config.
func netCluster(t *testing.T, mod func(*Config), ids ...int64) map[int64]*Net {
	t.Helper()
	var mu sync.Mutex
	addrs := map[int64]string{}
	resolve := func(id int64) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := addrs[id]
		return a, ok
	}
	nodes := map[int64]*Net{}
	for _, id := range ids {
		cfg := DefaultConfig()
		cfg.ID, cfg.Addr, cfg.Resolve = id, "127.0.0.1:0", resolve
		cfg.Codec = newTestCodec(t, testKey)
		cfg.Log = testLogger(t).With().Int64("node", id).Logger()
		if mod != nil {
			mod(&cfg)
		}
		n, err := Listen(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Listen(node %d): %v", id, err)
		}
		t.Cleanup(func() { _ = n.Close() })
		mu.Lock()
		addrs[id] = n.Addr().String()
		mu.Unlock()
		nodes[id] = n
	}
	return nodes
}

func memFactory(withCodec bool) factory {
	return func(t *testing.T, ids ...int64) cluster {
		opts := []MemOption{WithMemLogger(testLogger(t))}
		if withCodec {
			opts = append(opts, WithCodecs(func(int64) *wire.Codec { return newTestCodec(t, testKey) }))
		}
		m := NewMemNetwork(opts...)
		c := cluster{}
		for _, id := range ids {
			tr := m.Transport(id)
			t.Cleanup(func() { _ = tr.Close() })
			c[id] = tr
		}
		return c
	}
}
