// Package storetest is the conformance suite every store implementation
// passes. Each implementation's tests call Run with a function that makes a
// fresh, empty database and returns its DSN.
package storetest

import (
	"context"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// NewDSN returns the DSN of a new empty database that lives as long as t.
type NewDSN func(t *testing.T) string

// OpenControl is Open seen as the ring's control part.
func OpenControl(t *testing.T, dsn string) store.Control { t.Helper(); return Open(t, dsn) }

// OpenQueue is Open seen as the chat queue's part.
func OpenQueue(t *testing.T, dsn string) store.Queue { t.Helper(); return Open(t, dsn) }

// opens counts Open's calls: with a DSN naming several servers (a Galera
// cluster), each handle starts on the next server, so the suite's races
// between handles are races between servers.
var opens atomic.Int64

// Open opens and migrates a store at dsn, closing it when t ends.
func Open(t *testing.T, dsn string) store.Store {
	t.Helper()
	ctx := context.Background()
	dsn = store.RotateHosts(dsn, int(opens.Add(1)))
	st, err := store.Open(ctx, dsn, store.Options{Create: true})
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := store.Migrate(ctx, st); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

// Present makes the named user (created if new) logged in at node, as a
// node's login records it, and returns the user.
func Present(t *testing.T, st store.Store, name string, node int64) store.User {
	t.Helper()
	var u store.User
	err := st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		if u, _, err = tx.EnsureUser(name); err != nil {
			return err
		}
		return tx.SetPresence(u.ID, node)
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// PendingFor counts the recipient rows waiting for the named user.
func PendingFor(t *testing.T, st store.Store, user string) int {
	t.Helper()
	var n int
	err := st.Update(context.Background(), func(tx store.Tx) error {
		u, err := tx.UserByName(user)
		if err != nil {
			return err
		}
		n, err = tx.PendingCount(u.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Run runs every conformance test against stores made by newDSN: the
// schema's, the ring's control part's and the chat queue's.
func Run(t *testing.T, newDSN NewDSN) {
	t.Run("Schema", func(t *testing.T) { RunSchema(t, newDSN) })
	t.Run("Control", func(t *testing.T) { RunControl(t, newDSN) })
	t.Run("Queue", func(t *testing.T) { RunQueue(t, newDSN) })
}

// RunSchema runs the migrations' conformance tests.
func RunSchema(t *testing.T, newDSN NewDSN) { run(t, newDSN, schemaTests) }

// RunControl runs the conformance tests of store.Control: the node table,
// the coordinator and its lease, and the fence.
func RunControl(t *testing.T, newDSN NewDSN) { run(t, newDSN, controlTests) }

// RunQueue runs the conformance tests of store.Queue and its Tx: users,
// groups, presence and the message queue.
func RunQueue(t *testing.T, newDSN NewDSN) {
	run(t, newDSN, queueTests)
	run(t, newDSN, inboxTests)
	run(t, newDSN, loginTests)
}

type conformanceTest struct {
	name string
	fn   func(t *testing.T, newDSN NewDSN)
}

func run(t *testing.T, newDSN NewDSN, tests []conformanceTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newDSN) })
	}
}

// schemaTests check the migrations.
var schemaTests = []conformanceTest{
	{"MigrateConcurrently", testMigrateConcurrently},
	{"MigrateTwice", testMigrateTwice},
}

// controlTests check store.Control.
var controlTests = []conformanceTest{
	{"AddNodes", testAddNodes},
	{"DBServer", testDBServer},
	{"Health", testHealth},
	{"ClaimCoordinator", testClaimCoordinator},
	{"ClaimCoordinatorRace", testClaimCoordinatorRace},
	{"ClaimCoordinatorWithLease", testClaimCoordinatorWithLease},
	{"Lease", testLease},
	{"LeaseRace", testLeaseRace},
	{"SetSuccessors", testSetSuccessors},
	{"ResetRing", testResetRing},
	{"FenceGenerations", testFenceGenerations},
	{"FencedSerialises", testFencedSerialises},
	{"FencedRollback", testFencedRollback},
	{"FenceRefusesUnissued", testFenceRefusesUnissued},
}

// queueTests check store.Queue and its Tx.
var queueTests = []conformanceTest{
	{"Users", testUsers},
	{"Groups", testGroups},
	{"Presence", testPresence},
	{"Messages", testMessages},
	{"MessageValidation", testMessageValidation},
	{"DeliveryCycle", testDeliveryCycle},
	{"PendingFair", testPendingFair},
	{"WaitingFor", testWaitingFor},
	{"WaitingForInserted", testWaitingForInserted},
	{"PendingAmongMany", testPendingAmongMany},
	{"RowsOfManyRecipients", testRowsOfManyRecipients},
	{"MarkOnlyPresent", testMarkOnlyPresent},
	{"UnmarkDelivered", testUnmarkDelivered},
	{"MarkRacesLoginElsewhere", testMarkRacesLoginElsewhere},
	{"InsertMessages", testInsertMessages},
	{"History", testHistory},
	{"Prune", testPrune},
	{"ConcurrentHandles", testConcurrentHandles},
	{"ProbeCounter", testProbeCounter},
	{"Accounts", testAccounts},
	{"InviteOnlyGroups", testInviteOnlyGroups},
	{"HistorySinceJoin", testHistorySinceJoin},
	{"AwayAndStatus", testAwayAndStatus},
	{"MembersPage", testMembersPage},
	{"ReadMarks", testReadMarks},
}

var ctx = context.Background()

func fiveNodes() []nodelist.Entry {
	var out []nodelist.Entry
	for i := int64(1); i <= 5; i++ {
		out = append(out, nodelist.Entry{ID: i, Host: "127.0.0.1", CoordPort: 5000 + int(i), ClientPort: 8000 + int(i)})
	}
	return out
}

func mustNodes(t *testing.T, st store.Control) {
	t.Helper()
	if _, err := st.AddNodes(ctx, fiveNodes()); err != nil {
		t.Fatalf("add nodes: %v", err)
	}
}

func update(t *testing.T, st store.Queue, fn func(store.Tx) error) {
	t.Helper()
	if err := st.Update(ctx, fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func testMigrateConcurrently(t *testing.T, newDSN NewDSN) {
	dsn := newDSN(t)
	const nodes = 5
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	start := make(chan struct{})
	for i := range nodes {
		wg.Go(func() {
			<-start
			st, err := store.Open(ctx, dsn, store.Options{Create: true})
			if err != nil {
				errs[i] = err
				return
			}
			defer st.Close()
			_, errs[i] = store.Migrate(ctx, st)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d failed: %v", i, err)
		}
	}
	st := Open(t, dsn)
	applied, err := store.AppliedMigrations(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	want, err := store.SchemaVersions()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, applied); diff != "" {
		t.Errorf("each version must be applied exactly once (-want +got):\n%s", diff)
	}
}

func testMigrateTwice(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	again, err := store.Migrate(ctx, st)
	if err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if len(again) != 0 {
		t.Errorf("second migrate applied %v, want nothing", again)
	}
	c, err := st.Coordinator(ctx)
	if err != nil || c != (store.Coordinator{}) {
		t.Errorf("fresh coordinator = %+v, %v; want none at epoch 0", c, err)
	}
	f, err := st.Fence(ctx)
	if err != nil || stampOf(f) != (store.Fence{}) {
		t.Errorf("fresh fence = %+v, %v; want 0/0", f, err)
	}
	// The migration gives the fence row a secret: a store that never
	// issued a generation has one too.
	if b, err := hex.DecodeString(f.Secret); err != nil || len(b) != 32 {
		t.Errorf("fresh fence secret %q, want 64 hex digits", f.Secret)
	}
}

func testAddNodes(t *testing.T, newDSN NewDSN) {
	st := OpenControl(t, newDSN(t))
	n, err := st.AddNodes(ctx, fiveNodes())
	if err != nil || n != 5 {
		t.Fatalf("add = %d, %v; want 5", n, err)
	}
	// The store is the truth: a changed row for a known id is not applied.
	changed := fiveNodes()
	changed[0].Host = "10.9.9.9"
	changed = append(changed, nodelist.Entry{ID: 9, Host: "lab9", CoordPort: 5009, ClientPort: 8009})
	n, err = st.AddNodes(ctx, changed)
	if err != nil || n != 1 {
		t.Fatalf("second add = %d, %v; want 1 new", n, err)
	}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 6 || nodes[0].Host != "127.0.0.1" || nodes[5].ID != 9 || nodes[5].Host != "lab9" {
		t.Errorf("nodes = %+v", nodes)
	}
	for _, nd := range nodes {
		if nd.InRing() {
			t.Errorf("node %d in ring after add", nd.ID)
		}
	}
	_, err = st.AddNodes(ctx, []nodelist.Entry{{ID: 10, Host: "x", CoordPort: 1, ClientPort: 2}, {ID: 0, Host: "y", CoordPort: 1, ClientPort: 2}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad node: err = %v, want ErrInvalid", err)
	}
	if nodes, _ := st.Nodes(ctx); len(nodes) != 6 {
		t.Errorf("a rejected batch changed the table: %d nodes", len(nodes))
	}
}

func testClaimCoordinator(t *testing.T, newDSN NewDSN) {
	st := OpenControl(t, newDSN(t))
	mustNodes(t, st)
	e, err := st.ClaimCoordinator(ctx, 3, 0, 0)
	if err != nil || e != 1 {
		t.Fatalf("claim = %d, %v; want epoch 1", e, err)
	}
	if _, err := st.ClaimCoordinator(ctx, 5, 0, 0); !errors.Is(err, store.ErrEpochChanged) {
		t.Fatalf("stale claim err = %v, want ErrEpochChanged", err)
	}
	if e, err := st.ClaimCoordinator(ctx, 5, 1, 0); err != nil || e != 2 {
		t.Fatalf("claim = %d, %v; want epoch 2", e, err)
	}
	if _, err := st.ClaimCoordinator(ctx, 42, 2, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown node claim err = %v, want ErrInvalid", err)
	}
	c, err := st.Coordinator(ctx)
	if err != nil || c != (store.Coordinator{NodeID: 5, Epoch: 2}) {
		t.Fatalf("coordinator = %+v, %v", c, err)
	}
	h, err := st.CoordinatorHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := [][2]int64{}
	for _, term := range h {
		got = append(got, [2]int64{term.Epoch, term.NodeID})
	}
	if diff := cmp.Diff([][2]int64{{1, 3}, {2, 5}}, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

func testLease(t *testing.T, newDSN NewDSN) {
	st := OpenControl(t, newDSN(t))
	mustNodes(t, st)
	const long = time.Hour
	won, l, err := st.AcquireLease(ctx, 2, long)
	if err != nil || !won || l.Holder != 2 || l.Epoch != 1 || l.Remaining <= long-time.Minute {
		t.Fatalf("acquire on a free row = %v, %+v, %v", won, l, err)
	}
	// A valid lease keeps everyone else out and changes nothing.
	won, l, err = st.AcquireLease(ctx, 5, long)
	if err != nil || won || l.Holder != 2 || l.Epoch != 1 || l.Remaining <= 0 {
		t.Fatalf("acquire of a held lease = %v, %+v, %v", won, l, err)
	}
	if ok, l, err := st.RenewLease(ctx, 2, 1, long); err != nil || !ok || l.Epoch != 1 {
		t.Fatalf("renew by the holder = %v, %+v, %v", ok, l, err)
	}
	// The read sees the lease as the store's clock has it, and changes
	// nothing.
	if l, err := st.CoordinatorLease(ctx); err != nil || l.Holder != 2 || l.Epoch != 1 || l.Remaining <= long-time.Minute || l.Remaining > long {
		t.Fatalf("lease read = %+v, %v; want node 2 at epoch 1, about an hour", l, err)
	}
	if ok, _, err := st.RenewLease(ctx, 5, 1, long); err != nil || ok {
		t.Fatalf("renew by another node = %v, %v", ok, err)
	}
	// The holder restarted: it takes its own lease again with a new epoch.
	if won, l, err := st.AcquireLease(ctx, 2, long); err != nil || !won || l.Epoch != 2 {
		t.Fatalf("re-acquire by the holder = %v, %+v, %v", won, l, err)
	}
	if ok, _, err := st.RenewLease(ctx, 2, 1, long); err != nil || ok {
		t.Fatalf("renew for an old epoch = %v, %v", ok, err)
	}
	// An expired lease is taken over.
	if ok, _, err := st.RenewLease(ctx, 2, 2, time.Millisecond); err != nil || !ok {
		t.Fatalf("shorten = %v, %v", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		won, l, err = st.AcquireLease(ctx, 4, long)
		if err != nil {
			t.Fatal(err)
		}
		if won || time.Now().After(deadline) {
			break
		}
	}
	if !won || l.Holder != 4 || l.Epoch != 3 {
		t.Fatalf("take-over after expiry = %v, %+v", won, l)
	}
	if ok, _, err := st.RenewLease(ctx, 4, 3, time.Millisecond); err != nil || !ok {
		t.Fatalf("shorten = %v, %v", ok, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		l, err := st.CoordinatorLease(ctx)
		if err != nil || l.Holder != 4 || l.Epoch != 3 {
			t.Fatalf("lease read = %+v, %v; want node 4 at epoch 3", l, err)
		}
		if l.Remaining == 0 {
			break // run out: a claim-if-stale would win
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease read %+v: still running 5 s after it was shortened to 1 ms", l)
		}
	}
	if ok, _, err := st.RenewLease(ctx, 4, 3, long); err != nil || !ok {
		t.Fatalf("renew after the read = %v, %v", ok, err)
	}
	if ok, _, _ := st.RenewLease(ctx, 2, 2, long); ok {
		t.Fatal("the old holder renewed a lease taken over")
	}
	// A voting claim ends the lease: the claimant's epoch holds no lease.
	if _, err := st.ClaimCoordinator(ctx, 5, 3, 0); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := st.RenewLease(ctx, 4, 3, long); ok {
		t.Fatal("renewed a lease after a voting claim")
	}
	if won, l, err := st.AcquireLease(ctx, 1, long); err != nil || !won || l.Epoch != 5 {
		t.Fatalf("acquire over a coordinator without lease = %v, %+v, %v", won, l, err)
	}
	if _, _, err := st.AcquireLease(ctx, 42, long); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown node: %v, want ErrInvalid", err)
	}
	h, err := st.CoordinatorHistory(ctx)
	if err != nil || len(h) != 5 {
		t.Fatalf("history = %+v, %v; want 5 terms", h, err)
	}
}

func testLeaseRace(t *testing.T, newDSN NewDSN) {
	dsn := newDSN(t)
	st := OpenControl(t, dsn)
	mustNodes(t, st)
	var wg sync.WaitGroup
	won := make([]bool, 5)
	errs := make([]error, 5)
	start := make(chan struct{})
	for i := range 5 {
		h := OpenControl(t, dsn)
		wg.Go(func() {
			<-start
			won[i], _, errs[i] = h.AcquireLease(ctx, int64(i+1), time.Hour)
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range 5 {
		if errs[i] != nil {
			t.Errorf("node %d: %v", i+1, errs[i])
		}
		if won[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d nodes acquired one lease", winners)
	}
}

// A claim with a lease holds the role against claim-if-stale (a lease
// acquisition by another node) until the lease runs out; a claim without
// one does not.
func testClaimCoordinatorWithLease(t *testing.T, newDSN NewDSN) {
	st := OpenControl(t, newDSN(t))
	mustNodes(t, st)
	e, err := st.ClaimCoordinator(ctx, 5, 0, time.Minute)
	if err != nil || e != 1 {
		t.Fatalf("claim = %d, %v; want epoch 1", e, err)
	}
	won, l, err := st.AcquireLease(ctx, 4, time.Second)
	if err != nil || won || l.Holder != 5 || l.Epoch != 1 || l.Remaining < 50*time.Second {
		t.Fatalf("acquire over a claim with a lease = %v, %+v, %v; want refused, node 5 holding about a minute", won, l, err)
	}
	if e, err = st.ClaimCoordinator(ctx, 3, e, 0); err != nil || e != 2 {
		t.Fatalf("claim without a lease = %d, %v; want epoch 2", e, err)
	}
	won, l, err = st.AcquireLease(ctx, 4, time.Second)
	if err != nil || !won || l.Holder != 4 || l.Epoch != 3 {
		t.Fatalf("acquire over a claim without a lease = %v, %+v, %v; want node 4 at epoch 3", won, l, err)
	}
	if _, err := st.ClaimCoordinator(ctx, 5, 3, -time.Second); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("claim with a negative lease: err = %v, want ErrInvalid", err)
	}
}

func testClaimCoordinatorRace(t *testing.T, newDSN NewDSN) {
	dsn := newDSN(t)
	st := OpenControl(t, dsn)
	mustNodes(t, st)
	// Five nodes, each with its own connection pool, race for epoch 1.
	var wg sync.WaitGroup
	results := make([]error, 5)
	start := make(chan struct{})
	for i := range 5 {
		h := OpenControl(t, dsn)
		wg.Go(func() {
			<-start
			_, results[i] = h.ClaimCoordinator(ctx, int64(i+1), 0, 0)
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrEpochChanged):
			t.Errorf("claimant %d: %v", i+1, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d claimants won epoch 1, want exactly 1", wins)
	}
	h, _ := st.CoordinatorHistory(ctx)
	c, _ := st.Coordinator(ctx)
	if len(h) != 1 || h[0].Epoch != 1 || h[0].NodeID != c.NodeID {
		t.Errorf("history %+v does not match coordinator %+v", h, c)
	}
}

func ring(t *testing.T, st store.Store) map[int64]int64 {
	t.Helper()
	nodes, err := st.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return store.Successors(nodes)
}

func testSetSuccessors(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	mustNodes(t, st)
	coord := store.Coordinator{NodeID: 2}
	// No coordinator yet: nobody may change the topology.
	if err := st.SetSuccessors(ctx, coord, []store.SuccessorChange{{NodeID: 2, Successor: 2}}); !errors.Is(err, store.ErrNotCoordinator) {
		t.Fatalf("err = %v, want ErrNotCoordinator", err)
	}
	e, err := st.ClaimCoordinator(ctx, 2, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	coord.Epoch = e
	if err := st.SetSuccessors(ctx, coord, []store.SuccessorChange{{NodeID: 2, Successor: 4}, {NodeID: 4, Successor: 2}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]int64{2: 4, 4: 2}, ring(t, st)); diff != "" {
		t.Errorf("ring (-want +got):\n%s", diff)
	}
	// One unknown node rejects the whole change.
	err = st.SetSuccessors(ctx, coord, []store.SuccessorChange{{NodeID: 4, Successor: 1}, {NodeID: 1, Successor: 77}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	// A newer coordinator fences the old one off.
	if _, err := st.ClaimCoordinator(ctx, 5, e, 0); err != nil {
		t.Fatal(err)
	}
	err = st.SetSuccessors(ctx, coord, []store.SuccessorChange{{NodeID: 4, Successor: 0}})
	if !errors.Is(err, store.ErrNotCoordinator) {
		t.Fatalf("stale coordinator err = %v, want ErrNotCoordinator", err)
	}
	if diff := cmp.Diff(map[int64]int64{2: 4, 4: 2}, ring(t, st)); diff != "" {
		t.Errorf("refused changes altered the ring (-want +got):\n%s", diff)
	}
	if err := st.SetSuccessors(ctx, store.Coordinator{NodeID: 5, Epoch: e + 1}, []store.SuccessorChange{{NodeID: 4, Successor: 0}, {NodeID: 2, Successor: 2}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]int64{2: 2}, ring(t, st)); diff != "" {
		t.Errorf("ring (-want +got):\n%s", diff)
	}
}

func testResetRing(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	mustNodes(t, st)
	e, _ := st.ClaimCoordinator(ctx, 1, 0, 0)
	if err := st.SetSuccessors(ctx, store.Coordinator{NodeID: 1, Epoch: e}, []store.SuccessorChange{{NodeID: 1, Successor: 1}}); err != nil {
		t.Fatal(err)
	}
	var alice store.User
	update(t, st, func(tx store.Tx) error {
		var err error
		alice, _, err = tx.EnsureUser("alice")
		if err != nil {
			return err
		}
		if err := tx.SetPresence(alice.ID, 1); err != nil {
			return err
		}
		_, _, err = tx.InsertMessage(store.NewMessage{ID: "m1", SenderID: alice.ID, ToUserID: alice.ID, Content: "kept", SentAt: time.Now(), NodeID: 1}, []int64{alice.ID})
		return err
	})
	if err := st.ResetRing(ctx); err != nil {
		t.Fatal(err)
	}
	if r := ring(t, st); len(r) != 0 {
		t.Errorf("ring after reset = %v", r)
	}
	c, _ := st.Coordinator(ctx)
	if c.NodeID != 0 || c.Epoch != e {
		t.Errorf("coordinator after reset = %+v, want none at epoch %d", c, e)
	}
	if on, _ := st.Online(ctx); len(on) != 0 {
		t.Errorf("online after reset = %+v", on)
	}
	update(t, st, func(tx store.Tx) error {
		if n, err := tx.PendingCount(alice.ID); err != nil || n != 1 {
			t.Errorf("queued message after reset: %d, %v; want 1", n, err)
		}
		return nil
	})
	// Epochs go on from where they were: never reused.
	if e2, err := st.ClaimCoordinator(ctx, 2, e, 0); err != nil || e2 != e+1 {
		t.Errorf("claim after reset = %d, %v", e2, err)
	}
}

func testFenceGenerations(t *testing.T, newDSN NewDSN) {
	st := OpenControl(t, newDSN(t))
	mustNodes(t, st)
	if _, err := st.NewGeneration(ctx, store.Coordinator{NodeID: 1, Epoch: 1}); !errors.Is(err, store.ErrNotCoordinator) {
		t.Fatalf("generation without coordinator: err = %v", err)
	}
	e, _ := st.ClaimCoordinator(ctx, 1, 0, 0)
	coord := store.Coordinator{NodeID: 1, Epoch: e}
	g1, err := st.NewGeneration(ctx, coord)
	if err != nil || stampOf(g1) != (store.Fence{Generation: 1, Holder: 1}) {
		t.Fatalf("first generation = %v, %v", g1, err)
	}
	ran := 0
	body := func(store.Tx) error { ran++; return nil }
	for _, f := range []store.Fence{{Generation: 1, Seq: 0, Holder: 1}, {Generation: 1, Seq: 1, Holder: 2}, {Generation: 1, Seq: 1, Holder: 2}, {Generation: 1, Seq: 5, Holder: 3}} { // the same holder may repeat a stamp
		if err := st.Fenced(ctx, f, body); err != nil {
			t.Fatalf("fenced %v: %v", f, err)
		}
	}
	if err := st.Fenced(ctx, store.Fence{Generation: 1, Seq: 4, Holder: 4}, body); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("older sequence: err = %v, want ErrFenced", err)
	}
	// A copy of the same stamp at another node (a token resent after a
	// stall) is refused.
	if err := st.Fenced(ctx, store.Fence{Generation: 1, Seq: 5, Holder: 4}, body); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("same stamp, other holder: err = %v, want ErrFenced", err)
	}
	// A stalled holder of generation 1 wakes after the coordinator made
	// generation 2: its critical section is refused.
	g2, err := st.NewGeneration(ctx, coord)
	if err != nil || stampOf(g2) != (store.Fence{Generation: 2, Holder: 1}) {
		t.Fatalf("second generation = %v, %v", g2, err)
	}
	// Every generation has a secret of its own, 32 random bytes in hex,
	// which Fence returns as long as the generation is the current one.
	for _, g := range []store.Fence{g1, g2} {
		if b, err := hex.DecodeString(g.Secret); err != nil || len(b) != 32 {
			t.Errorf("generation %d: secret %q, want 64 hex digits", g.Generation, g.Secret)
		}
	}
	if g1.Secret == g2.Secret {
		t.Errorf("generations 1 and 2 share the secret %q", g1.Secret)
	}
	if err := st.Fenced(ctx, store.Fence{Generation: 1, Seq: 99, Holder: 2}, body); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old generation: err = %v, want ErrFenced", err)
	}
	if ran != 4 {
		t.Errorf("critical sections run = %d, want 4 (refused ones must not run)", ran)
	}
	if f, _ := st.Fence(ctx); f != g2 {
		t.Errorf("fence = %+v, want %+v (the secret of generation 2 with it)", f, g2)
	}
	// A coordinator of an old epoch cannot make tokens.
	if _, err := st.ClaimCoordinator(ctx, 2, e, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.NewGeneration(ctx, coord); !errors.Is(err, store.ErrNotCoordinator) {
		t.Errorf("stale coordinator generation: err = %v", err)
	}
}

// stampOf is f without its secret.
func stampOf(f store.Fence) store.Fence {
	f.Secret = ""
	return f
}

func testFencedSerialises(t *testing.T, newDSN NewDSN) {
	dsn := newDSN(t)
	a := OpenControl(t, dsn)
	b := OpenControl(t, dsn) // a second handle, as another process would have
	entered := make(chan struct{})
	release := make(chan struct{})
	errA := make(chan error, 1)
	go func() {
		once := sync.OnceFunc(func() { close(entered) })
		errA <- a.Fenced(ctx, store.Fence{Generation: 1, Seq: 1}, func(tx store.Tx) error {
			once()
			<-release
			_, _, err := tx.EnsureUser("first")
			return err
		})
	}()
	<-entered
	errB := make(chan error, 1)
	var mu sync.Mutex
	var sawFirst []bool // one per attempt of the second section: the last committed
	go func() {
		errB <- b.Fenced(ctx, store.Fence{Generation: 1, Seq: 2}, func(tx store.Tx) error {
			_, err := tx.UserByName("first")
			mu.Lock()
			sawFirst = append(sawFirst, err == nil)
			mu.Unlock()
			return nil
		})
	}()
	if d, _ := store.ParseDSN(dsn); len(d.Hosts) > 1 {
		// Several servers (Galera): row locks are each server's own, so
		// the second section is not held up; certification lets only one
		// of the two commit first, and the other either sees it (a retry)
		// or is fenced off (the first's older stamp after the second's).
		close(release)
		fencedOrSerial(t, <-errA, <-errB, sawFirst)
		return
	}
	mu.Lock()
	ran := len(sawFirst)
	mu.Unlock()
	close(release)
	ea, eb := <-errA, <-errB
	if eb != nil {
		t.Fatalf("second: %v", eb)
	}
	switch {
	case ea == nil && ran == 0 && len(sawFirst) == 1 && sawFirst[0]:
		// The second waited for the first, which committed, and saw it.
	case ea != nil && mysqlDSN(dsn) && len(sawFirst) > 0 && !sawFirst[len(sawFirst)-1]:
		// MariaDB: the first held the fence row's lock past fenceWaitKill,
		// so the newer holder ended it (a node's visit never does: it
		// passes the token only once its visit has ended, see
		// internal/store/fencewait.go); nothing of it committed, and
		// the second ran after.
	default:
		t.Errorf("first: %v; second ran %d times before the first was released, its attempts saw the first's write: %v; "+
			"want the first committed and then seen, or (MariaDB) the first ended and not seen", ea, ran, sawFirst)
	}
}

// mysqlDSN reports whether dsn names a MariaDB store.
func mysqlDSN(dsn string) bool {
	d, err := store.ParseDSN(dsn)
	return err == nil && d.Dialect == "mysql"
}

// fencedOrSerial checks two racing sections (stamps 1 then 2) on a
// cluster: either the first committed and the second's committed attempt
// saw it, or the second committed first and the first was fenced off.
func fencedOrSerial(t *testing.T, errA, errB error, sawFirst []bool) {
	t.Helper()
	if errB != nil || len(sawFirst) == 0 {
		t.Fatalf("second: %v after %d attempts", errB, len(sawFirst))
	}
	last := sawFirst[len(sawFirst)-1]
	switch {
	case errA == nil && last:
	case errors.Is(errA, store.ErrFenced) && !last:
	default:
		t.Errorf("first: %v; second's attempts saw the first's write: %v: want first committed and seen, or first fenced and not seen", errA, sawFirst)
	}
}

func testFencedRollback(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	boom := errors.New("boom")
	err := st.Fenced(ctx, store.Fence{Generation: 1, Seq: 3}, func(tx store.Tx) error {
		if _, _, err := tx.EnsureUser("ghost"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the body's error", err)
	}
	update(t, st, func(tx store.Tx) error {
		if _, err := tx.UserByName("ghost"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("rolled-back user exists: %v", err)
		}
		return nil
	})
	// The fence did not advance either.
	if f, _ := st.Fence(ctx); stampOf(f) != (store.Fence{}) {
		t.Errorf("fence after rollback = %v", f)
	}
}

func testUsers(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	names := []string{"alice", "Alice", "Robert'); DROP TABLE users;--", `"; DELETE FROM messages; --`, "zoë 🚀"}
	update(t, st, func(tx store.Tx) error {
		seen := map[int64]bool{}
		for _, n := range names {
			u, created, err := tx.EnsureUser(n)
			if err != nil || !created || u.Name != n || seen[u.ID] {
				t.Errorf("EnsureUser(%q) = %+v, %v, %v", n, u, created, err)
			}
			seen[u.ID] = true
			again, created, err := tx.EnsureUser(n)
			if err != nil || created || again.ID != u.ID {
				t.Errorf("second EnsureUser(%q) = %+v, %v, %v", n, again, created, err)
			}
			byName, err := tx.UserByName(n)
			if err != nil || byName.Name != n {
				t.Errorf("UserByName(%q) = %+v, %v (names are stored verbatim)", n, byName, err)
			}
		}
		if _, err := tx.UserByName("nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown user: %v", err)
		}
		for _, bad := range []string{"", string(make([]rune, store.MaxNameLen+1)), "\xff\xfe"} {
			if _, _, err := tx.EnsureUser(bad); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("EnsureUser(%q) err = %v, want ErrInvalid", bad, err)
			}
		}
		u, _ := tx.UserByName("alice")
		if ok, err := tx.ClaimPassword(u.ID, "hash-1"); err != nil || !ok {
			t.Errorf("first claim = %v, %v", ok, err)
		}
		if ok, err := tx.ClaimPassword(u.ID, "hash-2"); err != nil || ok {
			t.Errorf("second claim = %v, %v; the first password must stay", ok, err)
		}
		if u, _ := tx.UserByName("alice"); u.PasswordHash != "hash-1" {
			t.Errorf("hash = %q", u.PasswordHash)
		}
		return nil
	})
}

func testGroups(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	update(t, st, func(tx store.Tx) error {
		a, _, _ := tx.EnsureUser("a")
		b, _, _ := tx.EnsureUser("b")
		g, created, err := tx.EnsureGroup("g1")
		if err != nil || !created {
			t.Fatalf("EnsureGroup = %v, %v", created, err)
		}
		h, _, _ := tx.EnsureGroup("h'; DROP TABLE chat_groups; --")
		for _, step := range []struct {
			join       bool
			group      int64
			user       int64
			wantChange bool
		}{
			{true, g.ID, a.ID, true}, {true, g.ID, a.ID, false}, {true, g.ID, b.ID, true},
			{true, h.ID, a.ID, true}, {false, h.ID, b.ID, false}, {false, g.ID, b.ID, true},
		} {
			var changed bool
			var err error
			if step.join {
				changed, err = tx.JoinGroup(step.group, step.user)
			} else {
				changed, err = tx.LeaveGroup(step.group, step.user)
			}
			if err != nil || changed != step.wantChange {
				t.Errorf("step %+v: changed = %v, %v", step, changed, err)
			}
		}
		if m, err := tx.GroupMembers(g.ID); err != nil || !slices.Equal(m, []int64{a.ID}) {
			t.Errorf("members = %v, %v", m, err)
		}
		ug, err := tx.UserGroups(a.ID)
		if err != nil || len(ug) != 2 || ug[0].Name != "g1" || ug[1].Name != h.Name {
			t.Errorf("user groups = %+v, %v", ug, err)
		}
		all, err := tx.ListGroups("", 10)
		if err != nil || len(all) != 2 || all[0].Members != 1 || all[1].Members != 1 {
			t.Errorf("groups = %+v, %v", all, err)
		}
		// Pages: after a name, at most limit.
		if page, err := tx.ListGroups("", 1); err != nil || len(page) != 1 || page[0].Name != "g1" {
			t.Errorf("first page = %+v, %v", page, err)
		}
		if page, err := tx.ListGroups("g1", 5); err != nil || len(page) != 1 || page[0].Name != h.Name {
			t.Errorf("page after g1 = %+v, %v", page, err)
		}
		if _, err := tx.ListGroups("", store.MaxGroupsPage+1); err != nil {
			t.Errorf("a full page and one more: err = %v", err)
		}
		if _, err := tx.ListGroups("", store.MaxGroupsPage+2); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("oversized page: err = %v", err)
		}
		if _, err := tx.GroupByName("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown group: %v", err)
		}
		return nil
	})
}

func testPresence(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	update(t, st, func(tx store.Tx) error {
		a, _, _ := tx.EnsureUser("a")
		b, _, _ := tx.EnsureUser("b")
		c, _, _ := tx.EnsureUser("c")
		if err := tx.SetPresence(a.ID, 1); err != nil {
			t.Errorf("set: %v", err)
		}
		if err := tx.SetPresence(a.ID, 1); err != nil {
			t.Errorf("same node again: %v", err)
		}
		if err := tx.SetPresence(a.ID, 2); !errors.Is(err, store.ErrUserOnline) {
			t.Errorf("second node: err = %v, want ErrUserOnline", err)
		}
		if p, err := tx.PresenceOf(a.ID); err != nil || p.NodeID != 1 {
			t.Errorf("presence = %+v, %v", p, err)
		}
		_ = tx.SetPresence(b.ID, 2)
		_ = tx.SetPresence(c.ID, 2)
		if ok, _ := tx.ClearPresence(a.ID, 2); ok {
			t.Error("clear at the wrong node removed the presence")
		}
		if ok, _ := tx.ClearPresence(a.ID, 1); !ok {
			t.Error("clear at the right node did nothing")
		}
		if n, err := tx.ClearNodePresence(2); err != nil || n != 2 {
			t.Errorf("clear node = %d, %v", n, err)
		}
		_ = tx.SetPresence(c.ID, 3)
		_ = tx.SetPresence(a.ID, 3)
		return nil
	})
	on, err := st.Online(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range on {
		got = append(got, fmt.Sprintf("%s@%d", p.UserName, p.NodeID))
	}
	if diff := cmp.Diff([]string{"a@3", "c@3"}, got); diff != "" {
		t.Errorf("online (-want +got):\n%s", diff)
	}
}

type people struct{ a, b, c store.User }

func setupPeople(t *testing.T, st store.Store) (people, store.Group) {
	t.Helper()
	var p people
	var g store.Group
	update(t, st, func(tx store.Tx) error {
		p.a, _, _ = tx.EnsureUser("a")
		p.b, _, _ = tx.EnsureUser("b")
		p.c, _, _ = tx.EnsureUser("c")
		g, _, _ = tx.EnsureGroup("g")
		for _, u := range []store.User{p.a, p.b, p.c} {
			if _, err := tx.JoinGroup(g.ID, u.ID); err != nil {
				return err
			}
		}
		return nil
	})
	return p, g
}

func testMessages(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	sent := time.Date(2019, 4, 25, 16, 55, 53, 0, time.UTC)
	update(t, st, func(tx store.Tx) error {
		s1, dup, err := tx.InsertMessage(store.NewMessage{ID: "id-1", SenderID: p.a.ID, ToUserID: p.b.ID, Content: "hi", SentAt: sent, NodeID: 1}, []int64{p.b.ID})
		if err != nil || dup {
			t.Fatalf("insert = %d, %v, %v", s1, dup, err)
		}
		s2, _, err := tx.InsertMessage(store.NewMessage{ID: "id-2", SenderID: p.a.ID, ToGroupID: g.ID, Content: "all", SentAt: sent, NodeID: 1}, []int64{p.a.ID, p.b.ID, p.c.ID, p.b.ID})
		if err != nil || s2 <= s1 {
			t.Fatalf("second insert = %d (after %d), %v", s2, s1, err)
		}
		again, dup, err := tx.InsertMessage(store.NewMessage{ID: "id-2", SenderID: p.a.ID, ToGroupID: g.ID, Content: "all", SentAt: sent, NodeID: 2}, []int64{p.a.ID, p.b.ID, p.c.ID})
		if err != nil || !dup || again != s2 {
			t.Errorf("duplicate insert = %d, %v, %v; want %d, dup", again, dup, err, s2)
		}
		for _, want := range []struct {
			u store.User
			n int
		}{{p.a, 0}, {p.b, 2}, {p.c, 1}} { // a sent the group message: not for a
			if n, err := tx.PendingCount(want.u.ID); err != nil || n != want.n {
				t.Errorf("pending for %s = %d, %v; want %d", want.u.Name, n, err, want.n)
			}
		}
		return nil
	})
}

func testMessageValidation(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	bad := []store.NewMessage{
		{ID: "", SenderID: p.a.ID, ToUserID: p.b.ID},
		{ID: "x1", SenderID: p.a.ID},
		{ID: "x2", SenderID: p.a.ID, ToUserID: p.b.ID, ToGroupID: g.ID},
		{ID: "x3", ToUserID: p.b.ID},
		{ID: "x4", SenderID: p.a.ID, ToUserID: p.b.ID, Content: "\xff"},
	}
	update(t, st, func(tx store.Tx) error {
		for _, m := range bad {
			if _, _, err := tx.InsertMessage(m, []int64{p.b.ID}); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("InsertMessage(%+v) err = %v, want ErrInvalid", m, err)
			}
		}
		if n, _ := tx.PendingCount(p.b.ID); n != 0 {
			t.Errorf("rejected messages left %d rows behind", n)
		}
		return nil
	})
}

func testDeliveryCycle(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error {
		for i := range 5 {
			m := store.NewMessage{ID: fmt.Sprintf("m%d", i), SenderID: p.a.ID, ToUserID: p.b.ID, Content: fmt.Sprint(i), SentAt: time.Now(), NodeID: 1}
			rcpt := []int64{p.b.ID}
			if i%2 == 1 {
				m.ToUserID, m.ToGroupID, rcpt = 0, g.ID, []int64{p.a.ID, p.b.ID, p.c.ID}
			}
			if _, _, err := tx.InsertMessage(m, rcpt); err != nil {
				return err
			}
		}
		return nil
	})
	fence := store.Fence{Generation: 1}
	visit := func(fn func(tx store.Tx)) {
		t.Helper()
		fence.Seq++
		if err := st.Fenced(ctx, fence, func(tx store.Tx) error { fn(tx); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	visit(func(tx store.Tx) {
		if d, _ := tx.PendingForNode(1, 100); len(d) != 0 {
			t.Errorf("delivered %d messages to a node with nobody online", len(d))
		}
		_ = tx.SetPresence(p.b.ID, 1)
		_ = tx.SetPresence(p.c.ID, 2)
	})
	var got []string
	visit(func(tx store.Tx) {
		d, err := tx.PendingForNode(1, 3) // bounded batch
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range d {
			got = append(got, x.Recipient+":"+x.Content)
			if err := tx.MarkDelivered(x.RecipientID, []int64{x.Seq}); err != nil {
				t.Fatal(err)
			}
		}
		d, _ = tx.PendingForNode(1, 100)
		for _, x := range d {
			got = append(got, x.Recipient+":"+x.Content)
			_ = tx.MarkDelivered(x.RecipientID, []int64{x.Seq})
		}
		if d, _ := tx.PendingForNode(1, 100); len(d) != 0 {
			t.Errorf("delivered messages returned again: %+v", d)
		}
	})
	if diff := cmp.Diff([]string{"b:0", "b:1", "b:2", "b:3", "b:4"}, got); diff != "" {
		t.Errorf("deliveries in global order (-want +got):\n%s", diff)
	}
	visit(func(tx store.Tx) {
		if n, _ := tx.Ack(p.b.ID, []string{"m0", "m1", "unknown"}); n != 2 {
			t.Errorf("ack removed %d, want 2", n)
		}
		// Reconnect: unacknowledged messages come back.
		if n, _ := tx.ResetDelivered(p.b.ID); n != 3 {
			t.Errorf("reset = %d, want 3", n)
		}
		d, _ := tx.PendingForNode(1, 100)
		var again []string
		for _, x := range d {
			again = append(again, x.ID)
		}
		if diff := cmp.Diff([]string{"m2", "m3", "m4"}, again); diff != "" {
			t.Errorf("redelivery (-want +got):\n%s", diff)
		}
		if n, _ := tx.AckSeqs(p.b.ID, []int64{d[0].Seq, d[1].Seq, d[2].Seq}); n != 3 {
			t.Errorf("ack seqs = %d", n)
		}
		if n, _ := tx.PendingCount(p.b.ID); n != 0 {
			t.Errorf("pending after acks = %d", n)
		}
		if d, _ := tx.PendingForNode(2, 100); len(d) != 2 || d[0].Recipient != "c" || d[0].ToGroup != "g" {
			t.Errorf("node 2 pending = %+v", d)
		}
	})
}

func testPendingFair(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, _ := setupPeople(t, st)
	var seqs []int64
	update(t, st, func(tx store.Tx) error {
		// b has a backlog of five, then c gets two.
		for i, to := range []store.User{p.b, p.b, p.b, p.b, p.b, p.c, p.c} {
			seq, _, err := tx.InsertMessage(store.NewMessage{ID: fmt.Sprintf("f%d", i), SenderID: p.a.ID, ToUserID: to.ID,
				Content: fmt.Sprint(i), SentAt: time.Now(), NodeID: 1}, []int64{to.ID})
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		if err := tx.SetPresence(p.b.ID, 1); err != nil {
			return err
		}
		return tx.SetPresence(p.c.ID, 1)
	})
	contents := func(d []store.Delivery) []string {
		var out []string
		for _, x := range d {
			out = append(out, x.Recipient+":"+x.Content)
		}
		return out
	}
	update(t, st, func(tx store.Tx) error {
		d, err := tx.PendingForNodeFair(1, 2, 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"b:0", "b:1", "c:5", "c:6"}, contents(d)); diff != "" {
			t.Errorf("two per recipient, global order (-want +got):\n%s", diff)
		}
		if d, _ := tx.PendingForNodeFair(1, 2, 3); len(d) != 3 {
			t.Errorf("limit 3 returned %d rows", len(d))
		}
		if d, _ := tx.PendingForNodeFair(2, 2, 100); len(d) != 0 {
			t.Errorf("node 2 has nobody online, got %v", contents(d))
		}
		// Delivered rows are skipped: the window moves on.
		if err := tx.MarkDelivered(p.b.ID, seqs[:2]); err != nil {
			return err
		}
		d, _ = tx.PendingForNodeFair(1, 2, 100)
		if diff := cmp.Diff([]string{"b:2", "b:3", "c:5", "c:6"}, contents(d)); diff != "" {
			t.Errorf("after delivering two (-want +got):\n%s", diff)
		}
		if _, err := tx.PendingForNodeFair(1, 0, 10); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("per recipient 0: err = %v, want ErrInvalid", err)
		}
		return nil
	})
}

func testWaitingFor(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error {
		if err := tx.SetPresence(p.b.ID, 2); err != nil {
			return err
		}
		if err := tx.SetPresence(p.c.ID, 4); err != nil {
			return err
		}
		s1, _, err := tx.InsertMessage(store.NewMessage{ID: "n1", SenderID: p.a.ID, ToUserID: p.b.ID, SentAt: time.Now()}, []int64{p.b.ID})
		if err != nil {
			return err
		}
		s2, _, err := tx.InsertMessage(store.NewMessage{ID: "n2", SenderID: p.b.ID, ToGroupID: g.ID, SentAt: time.Now()}, []int64{p.a.ID, p.c.ID})
		if err != nil {
			return err
		}
		s3, _, err := tx.InsertMessage(store.NewMessage{ID: "n3", SenderID: p.a.ID, ToUserID: p.c.ID, SentAt: time.Now()}, []int64{p.c.ID})
		if err != nil {
			return err
		}
		want := func(what string, seqs []int64, maxUsers int, want []store.Waiting) {
			t.Helper()
			got, err := tx.WaitingFor(seqs, maxUsers)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: waiting = %+v, want %+v", what, got, want)
			}
		}
		want("both messages", []int64{s1, s2}, 8, []store.Waiting{{Node: 2, Users: []int64{p.b.ID}}, {Node: 4, All: true}})
		want("the group message", []int64{s2}, 8, []store.Waiting{{Node: 4, All: true}}) // a is offline, b sent it
		want("direct messages", []int64{s1, s3, s1}, 8, []store.Waiting{{Node: 2, Users: []int64{p.b.ID}}, {Node: 4, Users: []int64{p.c.ID}}})
		if err := tx.SetPresence(p.a.ID, 2); err != nil {
			return err
		}
		s4, _, err := tx.InsertMessage(store.NewMessage{ID: "n4", SenderID: p.c.ID, ToUserID: p.a.ID, SentAt: time.Now()}, []int64{p.a.ID})
		if err != nil {
			return err
		}
		want("more users than asked for", []int64{s1, s4}, 1, []store.Waiting{{Node: 2, All: true}})
		if err := tx.MarkDelivered(p.c.ID, []int64{s2}); err != nil {
			return err
		}
		want("after delivery to c", []int64{s2}, 8, []store.Waiting{{Node: 2, All: true}}) // a is here now
		if err := tx.MarkDelivered(p.b.ID, []int64{s1}); err != nil {
			return err
		}
		want("after delivery to b", []int64{s1}, 8, []store.Waiting{})
		if _, err := tx.WaitingFor([]int64{s1}, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("at most 0 users: err = %v, want ErrInvalid", err)
		}
		return nil
	})
}

// testWaitingForInserted asks where the messages a batch insert just
// stored wait, as a visit does: a new direct message waits for its
// recipient wherever they are, a resent one only if its recipient's
// cursor has not passed it, and once the transaction marked or
// acknowledged a recipient's messages, what it inserted before is read
// with the cursors again.
func testWaitingForInserted(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	now := time.Now()
	insert := func(tx store.Tx, ms ...store.NewMessage) []int64 {
		t.Helper()
		rcpts := make([][]int64, len(ms))
		for i, m := range ms {
			if m.ToUserID != 0 {
				rcpts[i] = []int64{m.ToUserID}
			}
		}
		res, err := tx.InsertMessages(ms, rcpts)
		if err != nil {
			t.Fatalf("insert: %v", err)
		}
		seqs := make([]int64, len(res))
		for i, r := range res {
			seqs[i] = r.Seq
		}
		return seqs
	}
	want := func(tx store.Tx, what string, seqs []int64, want []store.Waiting) {
		t.Helper()
		got, err := tx.WaitingFor(seqs, 8)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: waiting = %+v, want %+v", what, got, want)
		}
	}
	direct := func(id string, from, to store.User) store.NewMessage {
		return store.NewMessage{ID: id, SenderID: from.ID, ToUserID: to.ID, Content: id, SentAt: now, NodeID: 1}
	}
	var first []int64
	update(t, st, func(tx store.Tx) error {
		if err := tx.SetPresence(p.b.ID, 2); err != nil {
			return err
		}
		if err := tx.SetPresence(p.c.ID, 4); err != nil {
			return err
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		first = insert(tx, direct("d1", p.a, p.b), direct("d2", p.a, p.b), direct("d3", p.b, p.a),
			store.NewMessage{ID: "g1", SenderID: p.b.ID, ToGroupID: g.ID, Content: "g1", SentAt: now, NodeID: 1})
		// a is offline; c is a member at node 4, b sent the group message.
		want(tx, "new messages", first, []store.Waiting{{Node: 2, Users: []int64{p.b.ID}}, {Node: 4, All: true}})
		want(tx, "new direct messages", first[:3], []store.Waiting{{Node: 2, Users: []int64{p.b.ID}}})
		if _, _, err := tx.MarkDeliveredRows(2, []store.RecipientSeq{{RecipientID: p.b.ID, Seq: first[0]}, {RecipientID: p.b.ID, Seq: first[1]}}); err != nil {
			return err
		}
		want(tx, "after the mark, in the same transaction", first[:3], []store.Waiting{})
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		// d2 again (a resend: its cursor passed it) with a new one.
		seqs := insert(tx, direct("d2", p.a, p.b), direct("d4", p.a, p.c))
		if seqs[0] != first[1] {
			t.Errorf("resent d2 stored at %d, want %d", seqs[0], first[1])
		}
		want(tx, "a resent message handed out, a new one", seqs, []store.Waiting{{Node: 4, Users: []int64{p.c.ID}}})
		if _, err := tx.AckRows([]store.RecipientSeq{{RecipientID: p.b.ID, Seq: first[0]}}); err != nil {
			return err
		}
		want(tx, "after an acknowledgement, in the same transaction", seqs, []store.Waiting{{Node: 4, Users: []int64{p.c.ID}}})
		return nil
	})
}

// testPendingAmongMany fetches for a node's many users, of whom a few have
// direct messages waiting (one a backlog, sent before a group message):
// each gets a prefix of what waits, in order, and nobody is missed.
func testPendingAmongMany(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	var users []store.User
	update(t, st, func(tx store.Tx) error {
		g, _, err := tx.EnsureGroup("many")
		if err != nil {
			return err
		}
		for i := range 30 {
			u, _, err := tx.EnsureUser(fmt.Sprintf("m%02d", i))
			if err != nil {
				return err
			}
			if _, err := tx.JoinGroup(g.ID, u.ID); err != nil {
				return err
			}
			if err := tx.SetPresence(u.ID, 1); err != nil {
				return err
			}
			users = append(users, u)
		}
		from := users[0].ID
		direct := map[int]int{3: 1, 11: 5, 29: 2} // user index: messages
		n := 0
		for _, i := range []int{3, 11, 29} {
			for range direct[i] {
				n++
				if _, _, err := tx.InsertMessage(store.NewMessage{ID: fmt.Sprintf("d%d", n), SenderID: from, ToUserID: users[i].ID,
					Content: fmt.Sprintf("d%d", n), SentAt: time.Now()}, []int64{users[i].ID}); err != nil {
					return err
				}
			}
		}
		_, _, err = tx.InsertMessage(store.NewMessage{ID: "grp", SenderID: from, ToGroupID: g.ID, Content: "grp", SentAt: time.Now()}, nil)
		return err
	})
	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingFor(1, ids, 2, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, d := range ds {
			if !d.Own {
				got[d.Recipient] = append(got[d.Recipient], d.Content)
			}
		}
		for i, u := range users {
			want := []string{"grp"}
			switch i {
			case 0:
				want = nil // the sender's own group message is not shown
			case 3:
				want = []string{"d1", "grp"}
			case 11:
				want = []string{"d2", "d3"} // a backlog before the group message: the group message waits
			case 29:
				want = []string{"d7", "d8"}
			}
			if diff := cmp.Diff(want, got[u.Name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", u.Name, diff)
			}
		}
		return nil
	})
}

func testInsertMessages(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	msg := func(id string, to store.User) store.NewMessage {
		return store.NewMessage{ID: id, SenderID: p.a.ID, ToUserID: to.ID, Content: "c-" + id, SentAt: time.Now(), NodeID: 1}
	}
	update(t, st, func(tx store.Tx) error {
		old, _, err := tx.InsertMessage(msg("old", p.b), []int64{p.b.ID})
		if err != nil {
			return err
		}
		// More than one statement's chunk, a stored id, an id twice.
		var ms []store.NewMessage
		var rcpts [][]int64
		for i := range 130 {
			ms, rcpts = append(ms, msg(fmt.Sprint("b", i), p.b)), append(rcpts, []int64{p.b.ID})
		}
		grp := store.NewMessage{ID: "grp", SenderID: p.a.ID, ToGroupID: g.ID, Content: "all", SentAt: time.Now()}
		ms, rcpts = append(ms, msg("old", p.b), grp, msg("b3", p.c)), append(rcpts, []int64{p.b.ID}, []int64{p.b.ID, p.c.ID, p.c.ID}, []int64{p.c.ID})
		res, err := tx.InsertMessages(ms, rcpts)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < 130; i++ {
			if res[i].Dup || res[i].Seq <= res[i-1].Seq || res[i-1].Seq <= old {
				t.Fatalf("results %d, %d: %+v %+v (old %d): not new and in order", i-1, i, res[i-1], res[i], old)
			}
		}
		if r := res[130]; !r.Dup || r.Seq != old {
			t.Errorf("stored id: %+v, want dup of %d", r, old)
		}
		if r := res[131]; r.Dup || r.Seq <= res[129].Seq {
			t.Errorf("group message: %+v", r)
		}
		if r := res[132]; !r.Dup || r.Seq != res[3].Seq {
			t.Errorf("id twice in the batch: %+v, want dup of %+v", r, res[3])
		}
		for _, want := range []struct {
			u store.User
			n int
		}{{p.a, 0}, {p.b, 1 + 130 + 1}, {p.c, 1}} {
			if n, _ := tx.PendingCount(want.u.ID); n != want.n {
				t.Errorf("rows of %s = %d, want %d", want.u.Name, n, want.n)
			}
		}
		h, _ := tx.History(store.Conversation{UserA: p.a.ID, UserB: p.b.ID}, 1000)
		if len(h) != 131 || h[1].ID != "b0" || h[1].Content != "c-b0" {
			t.Errorf("history: %d messages, second %+v", len(h), h[1])
		}
		if _, err := tx.InsertMessages([]store.NewMessage{{ID: "bad", SenderID: p.a.ID}}, [][]int64{nil}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("invalid message: err = %v", err)
		}
		return nil
	})
}

func testRowsOfManyRecipients(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	var all []store.RecipientSeq
	update(t, st, func(tx store.Tx) error {
		for _, u := range []store.User{p.a, p.b, p.c} {
			if err := tx.SetPresence(u.ID, 1); err != nil {
				return err
			}
		}
		// More rows than one statement's chunk.
		for i := range 150 {
			seq, _, err := tx.InsertMessage(store.NewMessage{ID: fmt.Sprintf("r%d", i), SenderID: p.a.ID, ToGroupID: g.ID,
				Content: fmt.Sprint(i), SentAt: time.Now()}, []int64{p.a.ID, p.b.ID, p.c.ID})
			if err != nil {
				return err
			}
			for _, u := range []store.User{p.a, p.b, p.c} {
				all = append(all, store.RecipientSeq{RecipientID: u.ID, Seq: seq, GroupID: g.ID})
			}
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		// Deliver everything but c's last message.
		if done, _, err := tx.MarkDeliveredRows(1, all[:len(all)-1]); err != nil || len(done) != len(all)-1 {
			t.Fatalf("MarkDeliveredRows = %d rows, %v; want %d", len(done), err, len(all)-1)
		}
		d, err := tx.PendingForNode(1, 1000)
		if err != nil || len(d) != 1 || d[0].Recipient != "c" || d[0].ID != "r149" {
			t.Errorf("pending after MarkDeliveredRows = %+v, %v; want c's r149 only", d, err)
		}
		// Acknowledge b's rows and one unknown row.
		var bRows []store.RecipientSeq
		for _, r := range all {
			if r.RecipientID == p.b.ID {
				bRows = append(bRows, r)
			}
		}
		n, err := tx.AckRows(append(bRows, store.RecipientSeq{RecipientID: p.b.ID, Seq: 1 << 40}))
		if err != nil || n != 150 {
			t.Errorf("AckRows = %d, %v; want 150", n, err)
		}
		for _, want := range []struct {
			u store.User
			n int
		}{{p.a, 0}, {p.b, 0}, {p.c, 150}} { // a sent them
			if n, _ := tx.PendingCount(want.u.ID); n != want.n {
				t.Errorf("rows of %s = %d, want %d", want.u.Name, n, want.n)
			}
		}
		return nil
	})
}

func testHistory(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error {
		msgs := []store.NewMessage{
			{ID: "1", SenderID: p.a.ID, ToUserID: p.b.ID, Content: "a>b 1"},
			{ID: "2", SenderID: p.b.ID, ToUserID: p.a.ID, Content: "b>a 2"},
			{ID: "3", SenderID: p.a.ID, ToUserID: p.c.ID, Content: "a>c 3"},
			{ID: "4", SenderID: p.c.ID, ToGroupID: g.ID, Content: "g 4"},
			{ID: "5", SenderID: p.a.ID, ToUserID: p.b.ID, Content: "a>b 5"},
		}
		for _, m := range msgs {
			m.SentAt = time.Now()
			if _, _, err := tx.InsertMessage(m, nil); err != nil {
				return err
			}
		}
		contents := func(ms []store.Message) []string {
			var out []string
			for _, m := range ms {
				out = append(out, m.Content)
			}
			return out
		}
		h, err := tx.History(store.Conversation{UserA: p.b.ID, UserB: p.a.ID}, 10)
		if diff := cmp.Diff([]string{"a>b 1", "b>a 2", "a>b 5"}, contents(h)); err != nil || diff != "" {
			t.Errorf("dm history %v (-want +got):\n%s", err, diff)
		}
		h, _ = tx.History(store.Conversation{UserA: p.a.ID, UserB: p.b.ID}, 2)
		if diff := cmp.Diff([]string{"b>a 2", "a>b 5"}, contents(h)); diff != "" {
			t.Errorf("limited history keeps the newest (-want +got):\n%s", diff)
		}
		// The page before the oldest shown ("b>a 2"), in both kinds.
		h, _ = tx.History(store.Conversation{UserA: p.a.ID, UserB: p.b.ID, Before: h[0].Seq}, 2)
		if diff := cmp.Diff([]string{"a>b 1"}, contents(h)); diff != "" {
			t.Errorf("history before a sequence (-want +got):\n%s", diff)
		}
		if h, _ := tx.History(store.Conversation{GroupID: g.ID, Before: 1}, 10); len(h) != 0 {
			t.Errorf("group history before the first message = %+v", h)
		}
		h, _ = tx.History(store.Conversation{GroupID: g.ID}, 10)
		if len(h) != 1 || h[0].ToGroup != "g" || h[0].Sender != "c" {
			t.Errorf("group history = %+v", h)
		}
		if _, err := tx.History(store.Conversation{UserA: p.a.ID}, 10); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("half a conversation: err = %v", err)
		}
		return nil
	})
}

func testPrune(t *testing.T, newDSN NewDSN) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dsn := newDSN(t)
	OpenQueue(t, dsn) // migrate
	st, err := store.Open(ctx, dsn, store.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, _ := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error {
		_, _, _ = tx.InsertMessage(store.NewMessage{ID: "done", SenderID: p.a.ID, ToUserID: p.b.ID, SentAt: clock}, []int64{p.b.ID})
		_, _, _ = tx.InsertMessage(store.NewMessage{ID: "waiting", SenderID: p.a.ID, ToUserID: p.c.ID, SentAt: clock}, []int64{p.c.ID})
		_, _ = tx.Ack(p.b.ID, []string{"done"})
		return nil
	})
	clock = clock.Add(48 * time.Hour)
	update(t, st, func(tx store.Tx) error {
		_, _, _ = tx.InsertMessage(store.NewMessage{ID: "recent", SenderID: p.a.ID, ToUserID: p.b.ID, SentAt: clock}, nil)
		n, err := tx.PruneMessages(clock.Add(-24*time.Hour), 0, 100)
		if err != nil || n.Deleted != 1 || !n.Done {
			t.Errorf("pruned %+v, %v; want only the old acknowledged message, and done", n, err)
		}
		h, _ := tx.History(store.Conversation{UserA: p.a.ID, UserB: p.c.ID}, 10)
		if len(h) != 1 {
			t.Errorf("a message still awaited was pruned: %+v", h)
		}
		return nil
	})
}

func testConcurrentHandles(t *testing.T, newDSN NewDSN) {
	dsn := newDSN(t)
	OpenQueue(t, dsn)
	// Several handles (as several node processes) write at once: every
	// transaction commits and every user is created exactly once. On a
	// cluster (several servers in the DSN) a transaction that keeps losing
	// certification races on these hot rows may fail after its retries
	// with a deadlock error (or, on a starved machine, a lock wait
	// timeout): then it changed nothing, and what committed is there
	// exactly once. One whose connection broke (a server too starved to
	// answer within the read timeout) may have committed or not: what it
	// wrote is there once or not at all.
	d, _ := store.ParseDSN(dsn)
	cluster := len(d.Hosts) > 1
	const handles, perHandle = 4, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed, users := 0, map[int]bool{}
	maybe, maybeUsers := 0, map[int]bool{}
	for h := range handles {
		st := OpenQueue(t, dsn)
		wg.Go(func() {
			for i := range perHandle {
				err := st.Update(ctx, func(tx store.Tx) error { return busyWrite(tx, h, i) })
				mu.Lock()
				switch {
				case err == nil:
					committed++
					users[i] = true
				case cluster && (isDeadlock(err) || isLockWait(err)):
				case cluster && connBroke(err):
					maybe++
					maybeUsers[i] = true
				default:
					t.Errorf("concurrent transaction: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !cluster && committed != handles*perHandle {
		t.Errorf("%d transactions committed, want %d", committed, handles*perHandle)
	}
	st := OpenQueue(t, dsn)
	update(t, st, func(tx store.Tx) error {
		g, err := tx.GroupByName("busy")
		if err != nil {
			return err
		}
		all := maps.Clone(users)
		maps.Copy(all, maybeUsers)
		if m, _ := tx.GroupMembers(g.ID); len(m) < len(users) || len(m) > len(all) {
			t.Errorf("members = %d, want %d to %d", len(m), len(users), len(all))
		}
		h, _ := tx.History(store.Conversation{GroupID: g.ID}, 1000)
		if len(h) < committed || len(h) > committed+maybe {
			t.Errorf("messages = %d, want %d (the transactions that committed) to %d (and those whose connection broke)", len(h), committed, committed+maybe)
		}
		return nil
	})
}

// busyWrite is one transaction of testConcurrentHandles: a user of a
// shared name joins the shared group and posts to it.
func busyWrite(tx store.Tx, h, i int) error {
	u, _, err := tx.EnsureUser(fmt.Sprintf("u%d", i)) // shared names: contention
	if err != nil {
		return err
	}
	g, _, err := tx.EnsureGroup("busy")
	if err != nil {
		return err
	}
	if _, err = tx.JoinGroup(g.ID, u.ID); err != nil {
		return err
	}
	_, _, err = tx.InsertMessage(store.NewMessage{ID: fmt.Sprintf("h%d-%d", h, i), SenderID: u.ID, ToGroupID: g.ID, Content: "x", SentAt: time.Now()}, []int64{u.ID})
	return err
}

// isDeadlock reports MariaDB's deadlock error (on a Galera cluster, also a
// commit that lost certification).
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// isLockWait reports a lock wait timeout (the transaction is rolled back).
func isLockWait(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

// connBroke reports a connection that broke: a transaction whose COMMIT
// was under way may have committed.
func connBroke(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}

func testProbeCounter(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	for i := int64(1); i <= 3; i++ {
		err := st.Fenced(ctx, store.Fence{Generation: 1, Seq: i, Holder: 1}, func(tx store.Tx) error {
			v, err := tx.ProbeCounter()
			if err != nil {
				return err
			}
			return tx.SetProbeCounter(v + 1)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	update(t, st, func(tx store.Tx) error {
		if v, err := tx.ProbeCounter(); err != nil || v != 3 {
			t.Errorf("counter = %d, %v; want 3", v, err)
		}
		return nil
	})
}

// sendToAll stores one message from a to b and c and returns their rows.
func sendToAll(t *testing.T, st store.Store, p people, id string) []store.RecipientSeq {
	t.Helper()
	var rows []store.RecipientSeq
	update(t, st, func(tx store.Tx) error {
		for _, to := range []store.User{p.b, p.c} {
			seq, _, err := tx.InsertMessage(store.NewMessage{ID: id + to.Name, SenderID: p.a.ID, ToUserID: to.ID, Content: id, SentAt: time.Now()},
				[]int64{to.ID})
			if err != nil {
				return err
			}
			rows = append(rows, store.RecipientSeq{RecipientID: to.ID, Seq: seq})
		}
		return nil
	})
	return rows
}

// setupPresent is setupPeople on a new store, with b logged in at node
// bNode and c at cNode.
func setupPresent(t *testing.T, newDSN NewDSN, bNode, cNode int64) (store.Store, people) {
	t.Helper()
	st := Open(t, newDSN(t))
	p, _ := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error { return tx.SetPresence(p.b.ID, bNode) })
	update(t, st, func(tx store.Tx) error { return tx.SetPresence(p.c.ID, cNode) })
	return st, p
}

// A visit marks only rows of users present at its node, and only rows
// still pending; it returns exactly those.
func testMarkOnlyPresent(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 2)
	m1 := sendToAll(t, st, p, "m1")
	m2 := sendToAll(t, st, p, "m2")
	update(t, st, func(tx store.Tx) error {
		done, stamp, err := tx.MarkDeliveredRows(1, m1)
		if err != nil || stamp == 0 {
			t.Fatalf("MarkDeliveredRows = %v, stamp %d", err, stamp)
		}
		if diff := cmp.Diff(m1[:1], done); diff != "" {
			t.Errorf("marked at node 1 (-want +got):\n%s", diff)
		}
		// c is at node 2: its rows are still pending there.
		if d, _ := tx.PendingForNode(2, 10); len(d) != 2 || d[0].RecipientID != p.c.ID || d[1].RecipientID != p.c.ID {
			t.Errorf("pending at node 2 = %+v; want c's two rows", d)
		}
		// b's first row is delivered already, its second is pending, c is
		// not here: only b's second row is marked.
		all := append(slices.Clone(m1), m2...)
		if done, _, err := tx.MarkDeliveredRows(1, all); err != nil || !cmp.Equal(done, m2[:1]) {
			t.Errorf("MarkDeliveredRows(%v) = %+v, %v; want %v", all, done, err, m2[:1])
		}
		// At node 2, c's rows.
		want := []store.RecipientSeq{m1[1], m2[1]}
		if done, _, err := tx.MarkDeliveredRows(2, all); err != nil || !cmp.Equal(done, want) {
			t.Errorf("MarkDeliveredRows at node 2 = %+v, %v; want %v", done, err, want)
		}
		if done, _, err := tx.MarkDeliveredRows(3, all); err != nil || len(done) != 0 {
			t.Errorf("MarkDeliveredRows at node 3 (nobody) = %+v, %v", done, err)
		}
		return nil
	})
}

// Rows marked at one stamp become pending again, unless acknowledged or
// marked again since.
func testUnmarkDelivered(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 1)
	m1 := sendToAll(t, st, p, "m1")
	var stamp1 int64
	update(t, st, func(tx store.Tx) error {
		var err error
		_, stamp1, err = tx.MarkDeliveredRows(1, m1)
		return err
	})
	update(t, st, func(tx store.Tx) error {
		if n, err := tx.UnmarkDelivered(stamp1+1, m1); err != nil || n != 0 {
			t.Errorf("UnmarkDelivered with a stamp newer than any mark = %d, %v; want 0", n, err)
		}
		if _, err := tx.AckRows(m1[:1]); err != nil {
			t.Fatal(err)
		}
		if n, err := tx.UnmarkDelivered(stamp1, m1); err != nil || n != 1 {
			t.Errorf("UnmarkDelivered = %d, %v; want 1 (b's row was acknowledged)", n, err)
		}
		if d, _ := tx.PendingForNode(1, 10); len(d) != 1 || d[0].RecipientID != p.c.ID {
			t.Errorf("pending = %+v; want c's row again", d)
		}
		if n, err := tx.UnmarkDelivered(stamp1, m1); err != nil || n != 0 {
			t.Errorf("UnmarkDelivered again = %d, %v; want 0", n, err)
		}
		return nil
	})
}

// The race of a visit with a user moving: the visit reads the user's
// pending rows, then (before it marks them) the session at the visit's node
// ends and the user logs in at another node. The visit must not mark them:
// the login's reset is done already, and nothing would make them pending
// again. Only MariaDB runs transactions side by side (SQLite's hold the
// write lock).
func testMarkRacesLoginElsewhere(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	if st.Dialect() != "mysql" {
		t.Skip("transactions run one at a time on " + st.Dialect())
	}
	p, _ := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error { return tx.SetPresence(p.b.ID, 1) })
	m1 := sendToAll(t, st, p, "m1")
	read, moved := make(chan struct{}), make(chan error, 1)
	go func() {
		<-read
		err := st.Update(ctx, func(tx store.Tx) error {
			_, err := tx.ClearPresence(p.b.ID, 1)
			return err
		})
		if err == nil {
			err = st.Update(ctx, func(tx store.Tx) error {
				if err := tx.SetPresence(p.b.ID, 2); err != nil {
					return err
				}
				_, err := tx.ResetDelivered(p.b.ID)
				return err
			})
		}
		moved <- err
	}()
	var done []store.RecipientSeq
	update(t, st, func(tx store.Tx) error {
		d, err := tx.PendingForNodeFair(1, 10, 10)
		if err != nil || len(d) != 1 {
			t.Errorf("pending for b at node 1 = %+v, %v", d, err)
		}
		close(read)
		select {
		case err := <-moved: // nothing of this transaction holds them up
			if err != nil {
				t.Errorf("logout and login elsewhere: %v", err)
			}
		case <-time.After(10 * time.Second):
			return errors.New("logout and login elsewhere waited for the visit's read")
		}
		done, _, err = tx.MarkDeliveredRows(1, m1[:1])
		return err
	})
	if len(done) != 0 {
		t.Errorf("marked %+v for a user who left", done)
	}
	update(t, st, func(tx store.Tx) error {
		if d, _ := tx.PendingForNode(2, 10); len(d) != 1 || d[0].RecipientID != p.b.ID {
			t.Errorf("pending at node 2 = %+v; want b's row", d)
		}
		return nil
	})
}

// testFenceRefusesUnissued: the fence refuses a stamp of a generation the
// store never issued (a forged token at the largest generation), runs
// nothing for it, and stays where it was: the real token's next stamp and
// the next generation go through.
func testFenceRefusesUnissued(t *testing.T, newDSN NewDSN) {
	const maxInt64 = 1<<63 - 1
	st := OpenControl(t, newDSN(t))
	mustNodes(t, st)
	e, err := st.ClaimCoordinator(ctx, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	coord := store.Coordinator{NodeID: 1, Epoch: e}
	g1, err := st.NewGeneration(ctx, coord)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	body := func(store.Tx) error { ran++; return nil }
	if err := st.Fenced(ctx, store.Fence{Generation: g1.Generation, Seq: 3, Holder: 2}, body); err != nil {
		t.Fatalf("the real token: %v", err)
	}
	for _, f := range []store.Fence{
		{Generation: maxInt64, Seq: 0, Holder: 3},
		{Generation: maxInt64, Seq: maxInt64, Holder: 3},
		{Generation: g1.Generation + 1, Seq: 1, Holder: 3},
	} {
		if err := st.Fenced(ctx, f, body); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("generation %d, never issued: err = %v, want ErrFenced", f.Generation, err)
		}
	}
	if ran != 1 {
		t.Errorf("critical sections run = %d, want 1 (refused ones must not run)", ran)
	}
	if f, _ := st.Fence(ctx); stampOf(f) != (store.Fence{Generation: g1.Generation, Seq: 3, Holder: 2}) {
		t.Errorf("fence = %v after refused stamps, want %d/3 of node 2", f, g1.Generation)
	}
	if err := st.Fenced(ctx, store.Fence{Generation: g1.Generation, Seq: 4, Holder: 3}, body); err != nil {
		t.Errorf("the real token's next stamp: %v", err)
	}
	g2, err := st.NewGeneration(ctx, coord)
	if err != nil || g2.Generation != g1.Generation+1 {
		t.Fatalf("next generation = %v, %v; want %d", g2, err, g1.Generation+1)
	}
	if err := st.Fenced(ctx, store.Fence{Generation: g2.Generation, Seq: 1, Holder: 2}, body); err != nil {
		t.Errorf("the new generation's token: %v", err)
	}
}

func testAccounts(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	update(t, st, func(tx store.Tx) error {
		u, created, err := tx.CreateUser("alice", "hash-1")
		if err != nil || !created || u.PasswordHash != "hash-1" {
			t.Errorf("CreateUser = %+v, %v, %v", u, created, err)
		}
		again, created, err := tx.CreateUser("alice", "hash-2")
		if err != nil || created || again.ID != u.ID || again.PasswordHash != "hash-1" {
			t.Errorf("CreateUser of a taken name = %+v, %v, %v; want the old user unchanged", again, created, err)
		}
		b, created, err := tx.CreateUser("bob", "")
		if err != nil || !created || b.PasswordHash != "" {
			t.Errorf("CreateUser without a password = %+v, %v, %v", b, created, err)
		}
		if _, _, err := tx.CreateUser("", "h"); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateUser(\"\") err = %v", err)
		}
		for _, h := range []string{"hash-3", "hash-3"} { // the same again is fine
			if err := tx.SetPassword(b.ID, h); err != nil {
				t.Errorf("SetPassword: %v", err)
			}
		}
		if err := tx.SetPassword(u.ID, "hash-4"); err != nil {
			t.Errorf("SetPassword replacing a hash: %v", err)
		}
		if err := tx.SetPassword(b.ID, ""); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("empty hash: %v", err)
		}
		if err := tx.SetPassword(99999, "h"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown user: %v", err)
		}
		for name, want := range map[string]string{"alice": "hash-4", "bob": "hash-3"} {
			if got, _ := tx.UserByName(name); got.PasswordHash != want {
				t.Errorf("%s hash = %q, want %q", name, got.PasswordHash, want)
			}
		}
		return nil
	})
}

func testInviteOnlyGroups(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	update(t, st, func(tx store.Tx) error {
		a, _, _ := tx.EnsureUser("a")
		b, _, _ := tx.EnsureUser("b")
		c, _, _ := tx.EnsureUser("c")
		g, created, err := tx.CreateGroup("secret", true, a.ID)
		if err != nil || !created || !g.InviteOnly || g.CreatedBy != a.ID {
			t.Fatalf("CreateGroup = %+v, %v, %v", g, created, err)
		}
		if again, created, _ := tx.CreateGroup("secret", false, b.ID); created || !again.InviteOnly || again.CreatedBy != a.ID {
			t.Errorf("CreateGroup of an existing group = %+v, %v; want it unchanged", again, created)
		}
		open, _, _ := tx.EnsureGroup("open")
		if open.InviteOnly || open.CreatedBy != 0 {
			t.Errorf("EnsureGroup = %+v", open)
		}
		if ok, err := tx.Invite(g.ID, b.ID, a.ID); err != nil || !ok {
			t.Errorf("Invite = %v, %v", ok, err)
		}
		if ok, _ := tx.Invite(g.ID, b.ID, a.ID); ok {
			t.Error("a second invitation is new")
		}
		if ok, _ := tx.Invited(g.ID, b.ID); !ok {
			t.Error("b not invited")
		}
		if ok, _ := tx.Invited(g.ID, c.ID); ok {
			t.Error("c invited")
		}
		inv, err := tx.UserInvites(b.ID)
		if err != nil || len(inv) != 1 || inv[0].Name != "secret" || !inv[0].InviteOnly {
			t.Errorf("UserInvites = %+v, %v", inv, err)
		}
		if ok, _ := tx.IsMember(g.ID, b.ID); ok {
			t.Error("invited is not a member yet")
		}
		if _, err := tx.JoinGroup(g.ID, b.ID); err != nil {
			t.Fatal(err)
		}
		if ok, _ := tx.IsMember(g.ID, b.ID); !ok {
			t.Error("b not a member after joining")
		}
		if ok, _ := tx.Invited(g.ID, b.ID); ok {
			t.Error("the invitation is not used up by joining")
		}
		all, _ := tx.ListGroups("", 10)
		if len(all) != 2 || all[1].Name != "secret" || !all[1].InviteOnly || all[0].InviteOnly {
			t.Errorf("ListGroups = %+v", all)
		}
		mine, _ := tx.UserGroups(b.ID)
		if len(mine) != 1 || !mine[0].InviteOnly {
			t.Errorf("UserGroups = %+v", mine)
		}
		return nil
	})
}

func testHistorySinceJoin(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, g := setupPeople(t, st) // a, b and c members
	send := func(tx store.Tx, id string) {
		if _, _, err := tx.InsertMessage(store.NewMessage{ID: id, SenderID: p.a.ID, ToGroupID: g.ID, Content: id, SentAt: time.Now()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var d store.User
	update(t, st, func(tx store.Tx) error {
		send(tx, "before")
		d, _, _ = tx.EnsureUser("d")
		if _, err := tx.JoinGroup(g.ID, d.ID); err != nil {
			return err
		}
		send(tx, "after")
		return nil
	})
	contents := func(c store.Conversation) []string {
		var out []string
		update(t, st, func(tx store.Tx) error {
			h, err := tx.History(c, 10)
			for _, m := range h {
				out = append(out, m.Content)
			}
			return err
		})
		return out
	}
	if diff := cmp.Diff([]string{"after"}, contents(store.Conversation{GroupID: g.ID, Member: d.ID})); diff != "" {
		t.Errorf("history of the late member (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"before", "after"}, contents(store.Conversation{GroupID: g.ID, Member: p.b.ID})); diff != "" {
		t.Errorf("history of an early member (-want +got):\n%s", diff)
	}
	var e store.User
	update(t, st, func(tx store.Tx) error { e, _, _ = tx.EnsureUser("e"); return nil })
	if got := contents(store.Conversation{GroupID: g.ID, Member: e.ID}); len(got) != 0 {
		t.Errorf("history of a non-member = %v", got)
	}
	// Leaving and joining again starts the history anew.
	update(t, st, func(tx store.Tx) error {
		if _, err := tx.LeaveGroup(g.ID, d.ID); err != nil {
			return err
		}
		_, err := tx.JoinGroup(g.ID, d.ID)
		return err
	})
	if got := contents(store.Conversation{GroupID: g.ID, Member: d.ID}); len(got) != 0 {
		t.Errorf("history after rejoining = %v", got)
	}
}

func testDBServer(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	mustNodes(t, st)
	if st.Server() == "" && st.Dialect() == "mysql" {
		t.Error("Server() is empty")
	}
	if err := st.SetDBServer(ctx, 2, "db-2:3306"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetDBServer(ctx, 99, "nowhere:1"); err != nil {
		t.Errorf("unknown node: %v, want nothing changed and no error", err)
	}
	if err := st.SetDBServer(ctx, 3, strings.Repeat("x", 256)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("256-byte server name: %v, want ErrInvalid", err)
	}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		want := ""
		if n.ID == 2 {
			want = "db-2:3306"
		}
		if n.DBServer != want {
			t.Errorf("node %d db server %q, want %q", n.ID, n.DBServer, want)
		}
	}
	if len(nodes) != 5 {
		t.Errorf("%d nodes, want 5", len(nodes))
	}
}

// SeedRing fills a fresh store's node table with nodes 1..n, all in one
// ring, node 1 the coordinator.
func SeedRing(t *testing.T, st store.Control, n int) {
	t.Helper()
	var nodes []nodelist.Entry
	for i := 1; i <= n; i++ {
		nodes = append(nodes, nodelist.Entry{ID: int64(i), Host: "127.0.0.1", CoordPort: 5000 + i, ClientPort: 8000 + i})
	}
	if _, err := st.AddNodes(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	epoch, err := st.ClaimCoordinator(ctx, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var changes []store.SuccessorChange
	for i := 1; i <= n; i++ {
		changes = append(changes, store.SuccessorChange{NodeID: int64(i), Successor: int64(i%n + 1)})
	}
	if err := st.SetSuccessors(ctx, store.Coordinator{NodeID: 1, Epoch: epoch}, changes); err != nil {
		t.Fatal(err)
	}
}
