package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
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

// The queue's visits are tested here alone: queues of several nodes over
// one store (SQLite and MariaDB), the token passed by hand, and fake
// sessions that record what the queue hands them. No sockets.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forStores runs fn against a fresh SQLite store and a fresh MariaDB
// database, each with nodes 1..n in one ring.
func forStores(t *testing.T, n int, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st := storetest.Open(t, "sqlite:"+filepath.Join(t.TempDir(), "queue.db"))
		storetest.SeedRing(t, st, n)
		fn(t, st)
	})
	t.Run("mariadb", func(t *testing.T) {
		st := storetest.Open(t, testutil.MySQLDSN(t))
		storetest.SeedRing(t, st, n)
		fn(t, st)
	})
}

// lookup resolves a recipient by name, as the chat service does
// (Config.Lookup).
func lookup(tx store.Tx, to Recipient) (int64, bool, error) {
	id, err := store.RecipientID(tx, to.Name, to.Group)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// testConfig is node id's queue configuration for the tests.
func testConfig(t *testing.T, id int64) Config {
	return Config{
		NodeID: id, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Lookup: lookup,
		OutboxLimit: 20000, BatchStart: 64, BatchMax: 1000, FetchLimit: 2000, FetchPerClient: 512,
		SafetyFetch: 30 * time.Second, PoisonStreak: 5 * time.Second,
	}
}

// fakeSession records what the queue hands a session.
type fakeSession struct {
	user    int64
	node    int64
	version int

	mu       sync.Mutex
	room     int
	gone     bool // its connection closed: deliveries are refused
	starved  int
	got      []store.Delivery
	receipts []Receipt
	notices  []Notice
}

func (f *fakeSession) Version() int { return f.version }

func (f *fakeSession) Room() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.room
}

func (f *fakeSession) Starve() {
	f.mu.Lock()
	f.starved++
	f.mu.Unlock()
}

func (f *fakeSession) Receipt(r Receipt) {
	f.mu.Lock()
	f.receipts = append(f.receipts, r)
	f.mu.Unlock()
}

func (f *fakeSession) Notice(n Notice) {
	f.mu.Lock()
	f.notices = append(f.notices, n)
	f.mu.Unlock()
}

// contents returns what the session got, in order.
func (f *fakeSession) contents() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, d := range f.got {
		out = append(out, d.Content)
	}
	return out
}

// takeReceipts returns the receipts since the last take.
func (f *fakeSession) takeReceipts() []Receipt {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.receipts
	f.receipts = nil
	return out
}

// fakeSessions is one node's session table.
type fakeSessions struct {
	mu       sync.Mutex
	sessions map[int64]*fakeSession
	ready    map[int64]bool
}

func (fs *fakeSessions) Ready() map[int64]Sink {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := map[int64]Sink{}
	for id, s := range fs.sessions {
		if fs.ready[id] {
			out[id] = s
		}
	}
	return out
}

func (fs *fakeSessions) Session(user int64) (Sink, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := fs.sessions[user]
	if s == nil {
		return nil, false
	}
	return s, fs.ready[user]
}

func (fs *fakeSessions) Deliver(ds []Delivery) []store.RecipientSeq {
	var lost []store.RecipientSeq
	for _, d := range ds {
		s := d.To.(*fakeSession)
		s.mu.Lock()
		if s.gone {
			lost = append(lost, d.D.Row())
		} else {
			s.got = append(s.got, d.D)
		}
		s.mu.Unlock()
	}
	return lost
}

// node is one node of a test ring: its queue and its sessions.
type node struct {
	id       int64
	q        *Queue
	sessions *fakeSessions
}

// ring is queues of nodes 1..n over one store and the token passed among
// them by hand: visit runs one node's Visit in a fenced transaction with
// the token's stamp and App data.
type ring struct {
	t     *testing.T
	st    store.Store
	nodes []*node
	seq   int64
	app   json.RawMessage
	// fenced, if set, replaces the store's fenced transaction of the next
	// visits (a store that fails, or loses a commit).
	fenced func(id int64, f store.Fence, fn func(store.Tx) error) error
	// budget, if set, is the next visits' time budget (their context's
	// deadline), as the node gives a visit little of it when a wait for
	// the fence's lock took the rest; 0: 5 s.
	budget time.Duration
}

func newTestRing(t *testing.T, st store.Store, n int, tweak func(*Config)) *ring {
	t.Helper()
	r := &ring{t: t, st: st}
	for i := 1; i <= n; i++ {
		cfg := testConfig(t, int64(i))
		if tweak != nil {
			tweak(&cfg)
		}
		fs := &fakeSessions{sessions: map[int64]*fakeSession{}, ready: map[int64]bool{}}
		q, err := New(cfg, fs)
		if err != nil {
			t.Fatal(err)
		}
		r.nodes = append(r.nodes, &node{id: int64(i), q: q, sessions: fs})
	}
	return r
}

// visit runs node id's visit with the token, and keeps the token's new
// App data if it succeeded.
func (r *ring) visit(id int64) (bool, error) {
	r.t.Helper()
	r.seq++
	f := store.Fence{Generation: 1, Seq: r.seq, Holder: id}
	budget := 5 * time.Second
	if r.budget > 0 {
		budget = r.budget
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	fenced := func(fn func(store.Tx) error) error {
		if r.fenced != nil {
			return r.fenced(id, f, fn)
		}
		return r.st.Fenced(ctx, f, fn)
	}
	app, worked, err := r.nodes[id-1].q.Visit(ctx, token.Token{Stamp: token.Stamp{Gen: 1, Seq: r.seq}, App: r.app}, fenced)
	if err == nil {
		r.app = app
	}
	return worked, err
}

// rotate passes the token round k times, failing the test on a visit's
// error unless failing is set.
func (r *ring) rotate(k int, failing bool) {
	r.t.Helper()
	for range k {
		for _, n := range r.nodes {
			if _, err := r.visit(n.id); err != nil && !failing {
				r.t.Fatalf("visit of node %d: %v", n.id, err)
			}
		}
	}
}

// login creates user name, records its presence at node id and makes a
// ready session of protocol version for it there, which asks for a fetch.
func (r *ring) login(id int64, name string, version int) *fakeSession {
	r.t.Helper()
	var u store.User
	err := r.st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		if u, _, err = tx.EnsureUser(name); err != nil {
			return err
		}
		if err := tx.SetPresence(u.ID, id); err != nil {
			return err
		}
		_, err = tx.ResetDelivered(u.ID)
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	s := &fakeSession{user: u.ID, node: id, version: version, room: 1000}
	n := r.nodes[id-1]
	n.sessions.mu.Lock()
	n.sessions.sessions[u.ID], n.sessions.ready[u.ID] = s, true
	n.sessions.mu.Unlock()
	n.q.FetchFor(u.ID)
	return s
}

// join makes user a member of group, creating it.
func (r *ring) join(group string, users ...*fakeSession) {
	r.t.Helper()
	err := r.st.Update(context.Background(), func(tx store.Tx) error {
		g, _, err := tx.EnsureGroup(group)
		if err != nil {
			return err
		}
		for _, u := range users {
			if _, err := tx.JoinGroup(g.ID, u.user); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// send submits a message from a session at node id.
func (r *ring) send(id int64, from *fakeSession, to Recipient, text string) *Message {
	r.t.Helper()
	m := &Message{ID: fmt.Sprintf("m-%d-%s", from.user, text), SenderID: from.user, To: to, Content: text, SentAt: time.Now(), Version: from.version, From: from}
	if err := r.nodes[id-1].q.Submit(m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// pending counts the recipient rows waiting for user.
func (r *ring) pending(user int64) int {
	r.t.Helper()
	var n int
	if err := r.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		n, err = tx.PendingCount(user)
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// acked acknowledges everything s got (protocol 2: by row; protocol 1:
// as written to the socket) at its node.
func (r *ring) acked(s *fakeSession) {
	id := s.node
	s.mu.Lock()
	var rows []store.RecipientSeq
	for _, d := range s.got {
		rows = append(rows, d.Row())
	}
	s.mu.Unlock()
	if s.version >= protocol.V2 {
		if !r.nodes[id-1].q.Ack(s.user, rows, nil) {
			r.t.Fatal("ACKs refused")
		}
		return
	}
	r.nodes[id-1].q.Written(rows)
}

// wantContents fails unless s got exactly want, in order.
func wantContents(t *testing.T, who string, s *fakeSession, want []string) {
	t.Helper()
	if got := s.contents(); !slices.Equal(got, want) {
		t.Fatalf("%s got %q, want %q", who, got, want)
	}
}
