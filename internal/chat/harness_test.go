package chat

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/token"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit is how long the chat tests wait: longer than
// testutil.WaitLimit, for whole rings of servers on one store under -race.
const waitLimit = 15 * time.Second

// testConfig is a small-timeouts configuration for node id.
func testConfig(t *testing.T, id int64, st store.Store) Config {
	cfg := DefaultConfig(id)
	cfg.Store = st
	cfg.Addr = "127.0.0.1:0"
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	cfg.ShutdownDrain = 2 * time.Second
	cfg.ReconcileInterval = 200 * time.Millisecond
	return cfg
}

// newStore is a fresh migrated SQLite store whose node table holds nodes
// 1..n, all in one ring.
func newStore(t *testing.T, n int) store.Store {
	t.Helper()
	st := storetest.Open(t, "sqlite:"+filepath.Join(t.TempDir(), "chat.db"))
	storetest.SeedRing(t, st, n)
	return st
}

// testRing runs chat servers over one store and passes a token among
// them, as the node runtime does: each visit runs the server's Section in
// a fenced transaction with the token's stamp and App data.
type testRing struct {
	t       *testing.T
	st      store.Store
	servers []*Server
	wake    chan struct{}
	budget  time.Duration

	mu   sync.Mutex
	fail map[int64]int    // node -> visits to fail before running the section
	lost map[int64]int    // node -> visits whose commit is reported failed
	hook map[int64]func() // node -> run once before its next transaction
	app  json.RawMessage
	// forged, when set, is the App data of the next visit's token instead
	// (a token from elsewhere), once.
	forged json.RawMessage

	visits atomic.Int64
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newRing starts n servers (configured by tweak, if given) on a fresh store
// and the token among them. Everything stops when the test ends.
func newRing(t *testing.T, n int, tweak func(*Config)) *testRing {
	t.Helper()
	return newRingOn(t, newStore(t, n), n, tweak)
}

func newRingOn(t *testing.T, st store.Store, n int, tweak func(*Config)) *testRing {
	t.Helper()
	r := &testRing{t: t, st: st, wake: make(chan struct{}, 1), fail: map[int64]int{}, lost: map[int64]int{}, hook: map[int64]func(){}, budget: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for i := 1; i <= n; i++ {
		cfg := testConfig(t, int64(i), st)
		if tweak != nil {
			tweak(&cfg)
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Listen(ctx); err != nil {
			t.Fatal(err)
		}
		r.servers = append(r.servers, s)
	}
	runCtx, stopServers := context.WithCancel(context.Background())
	for _, s := range r.servers {
		r.done.Add(1)
		go func() {
			defer r.done.Done()
			if err := s.Run(runCtx); err != nil {
				t.Errorf("server run: %v", err)
			}
		}()
	}
	tokenDone := make(chan struct{})
	go func() {
		defer close(tokenDone)
		r.pass(ctx)
	}()
	var forwards sync.WaitGroup
	for _, s := range r.servers { // each queue's Wants brings the token, as the node does
		forwards.Add(1)
		go func() {
			defer forwards.Done()
			for {
				select {
				case <-s.Queue().Wants():
					r.poke()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	t.Cleanup(func() {
		stopServers() // the token keeps moving while servers drain
		r.done.Wait()
		cancel()
		<-tokenDone
		forwards.Wait()
	})
	return r
}

func (r *testRing) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// failVisits makes the next k visits of node id fail with ErrFenced before
// the section's transaction runs.
func (r *testRing) failVisits(id int64, k int) {
	r.mu.Lock()
	r.fail[id] = k
	r.mu.Unlock()
}

// loseCommits makes the next k visits of node id commit their transaction
// and then fail, as when the connection to the store breaks during COMMIT.
func (r *testRing) loseCommits(id int64, k int) {
	r.mu.Lock()
	r.lost[id] = k
	r.mu.Unlock()
}

// beforeNextTx runs f once, in the token's goroutine, when node id's next
// visit has taken its work and is about to open its transaction.
func (r *testRing) beforeNextTx(id int64, f func()) {
	r.mu.Lock()
	r.hook[id] = f
	r.mu.Unlock()
}

// pass moves the token around until ctx ends, idling 20 ms per rotation
// unless a server wants it.
func (r *testRing) pass(ctx context.Context) {
	var seq int64
	idle := time.NewTimer(0)
	defer idle.Stop()
	for ctx.Err() == nil {
		worked := false
		for _, s := range r.servers {
			seq++
			id := s.cfg.NodeID
			fence := store.Fence{Generation: 1, Seq: seq, Holder: id}
			vctx, cancel := context.WithTimeout(ctx, r.budget)
			fenced := func(fn func(store.Tx) error) error {
				r.mu.Lock()
				k, lost, hook := r.fail[id], r.lost[id], r.hook[id]
				if k > 0 {
					r.fail[id] = k - 1
				}
				delete(r.hook, id)
				r.mu.Unlock()
				if hook != nil {
					hook()
				}
				if k > 0 {
					return fmt.Errorf("injected: %w", store.ErrFenced)
				}
				if lost > 0 {
					worked := false
					err := r.st.Fenced(vctx, fence, func(tx store.Tx) error {
						err := fn(tx)
						worked = err == nil
						return err
					})
					if err == nil && worked {
						r.mu.Lock()
						r.lost[id]--
						r.mu.Unlock()
						return errors.New("injected: invalid connection (the commit reached the store)")
					}
					return err
				}
				return r.st.Fenced(vctx, fence, fn)
			}
			r.mu.Lock()
			tok := token.Token{Stamp: token.Stamp{Gen: 1, Seq: seq}, App: r.app}
			if r.forged != nil {
				tok.App, r.forged = r.forged, nil
			}
			r.mu.Unlock()
			app, w, err := s.Queue().Visit(vctx, tok, fenced)
			cancel()
			r.visits.Add(1)
			if err == nil {
				r.mu.Lock()
				r.app = app
				r.mu.Unlock()
			} else if ctx.Err() == nil && !errors.Is(err, store.ErrFenced) {
				r.t.Logf("visit of node %d: %v", id, err)
			}
			worked = worked || w
		}
		if worked {
			continue
		}
		idle.Reset(20 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-idle.C:
		}
	}
}

// rotations waits until the token has gone round k more times.
func (r *testRing) rotations(k int) {
	r.t.Helper()
	target := r.visits.Load() + int64(k*len(r.servers))
	eventually(r.t, fmt.Sprintf("%d rotations", k), func() bool { return r.visits.Load() >= target })
}

func (r *testRing) addr(id int64) string { return r.servers[id-1].Addr().String() }

// eventually waits up to waitLimit for cond.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, waitLimit, what, cond)
}

// raw is a client that speaks lines, for exact protocol checks.
type raw struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<20)}
}

func (c *raw) send(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		if _, err := c.nc.Write([]byte(l + "\n")); err != nil {
			c.t.Fatalf("write %q: %v", l, err)
		}
	}
}

// line reads the next line.
func (c *raw) line() string {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(waitLimit))
	l, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (partial %q)", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

// expect reads the next line and checks it exactly.
func (c *raw) expect(want string) {
	c.t.Helper()
	if got := c.line(); got != want {
		c.t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// obj reads the next line as a JSON object.
func (c *raw) obj() map[string]any {
	c.t.Helper()
	l := c.line()
	var m map[string]any
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		c.t.Fatalf("line %q: %v", l, err)
	}
	return m
}

// expectError reads the next line: an ERROR whose text contains part (and,
// for a protocol-2 error, whose code is code).
func (c *raw) expectError(code protocol.Code, part string) map[string]any {
	c.t.Helper()
	m := c.obj()
	msg, _ := m["errorMessage"].(string)
	if m["messageType"] != "ERROR" || !strings.Contains(msg, part) {
		c.t.Fatalf("got %v, want an ERROR containing %q", m, part)
	}
	if got, ok := m["code"]; ok && code != "" && got != string(code) {
		c.t.Fatalf("got code %v, want %s (%v)", got, code, m)
	}
	return m
}

// closed waits for the server to close the connection, returning what came
// before.
func (c *raw) closed() []string {
	c.t.Helper()
	var lines []string
	_ = c.nc.SetReadDeadline(time.Now().Add(waitLimit))
	for {
		l, err := c.br.ReadString('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatalf("connection not closed; got %q", lines)
			}
			return lines
		}
		lines = append(lines, strings.TrimSuffix(l, "\n"))
	}
}

func (c *raw) login(user string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"messageType":"LOGIN","username":%q}`, user))
	c.expect(fmt.Sprintf(`{"messageType":"LOGIN","username":%q}`, user))
}

func (c *raw) loginV2(user, password string) map[string]any {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"messageType":"LOGIN","username":%q,"version":2,"password":%q,"id":"l1"}`, user, password))
	m := c.obj()
	if m["messageType"] != "LOGIN" || m["username"] != user || m["version"] != float64(2) || m["id"] != "l1" {
		c.t.Fatalf("v2 login answer %v", m)
	}
	return m
}

func (c *raw) join(group string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"messageType":"JOIN_GROUP","group":%q}`, group))
	c.expect(fmt.Sprintf(`{"messageType":"JOIN_GROUP","group":%q}`, group))
}

func chatTo(user, text string) string {
	return fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","fromName":"x","toUsername":%q,"messageContent":%q}`, user, text)
}

func chatGroup(group, text string) string {
	return fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","fromName":"x","toGroup":%q,"messageContent":%q}`, group, text)
}
