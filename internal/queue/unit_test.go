package queue

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/token"
)

// A crowd logging in at one node is fetched a few users a visit, after
// the users known to have deliveries waiting (named by a hint, or with
// room again in their queue), each kind in the order asked; a user asked
// both ways is served as known.
func TestLoginsFetchedAFewAVisitAfterTheKnownOnes(t *testing.T) {
	fs := &fakeSessions{sessions: map[int64]*fakeSession{}, ready: map[int64]bool{}}
	for id := int64(1); id <= 12; id++ {
		fs.sessions[id], fs.ready[id] = &fakeSession{user: id, room: 100}, true
	}
	q, err := New(testConfig(t, 1), fs)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	q.v.lastFetch = now // no fetch of everyone is due
	for id := int64(8); id >= 1; id-- {
		q.LoggedIn(id)
	}
	q.FetchFor(11)
	q.LoggedIn(12)
	q.FetchFor(12) // room again after its login: known
	q.LoggedIn(11) // stays known
	q.committed(now, &visitWork{waiting: []store.Waiting{{Node: 1, Users: []int64{9}}}})

	w := q.collect(now, token.Token{}, false, []int64{10})
	want := []int64{11, 12, 9, 10, 8, 7, 6, 5}
	if w.fetchAll || !slices.Equal(w.users, want) {
		t.Fatalf("first visit after the logins: fetch of everyone %v, users %v; want %v", w.fetchAll, w.users, want)
	}
	w.fetch = true
	q.committed(now, w)
	w = q.collect(now, token.Token{}, false, nil)
	if want := []int64{4, 3, 2, 1}; !slices.Equal(w.users, want) {
		t.Fatalf("second visit: users %v; want %v", w.users, want)
	}
	w.fetch = true
	q.committed(now, w)
	if len(q.fetchFor) != 0 {
		t.Errorf("after both visits still asked: %v", q.fetchFor)
	}
}

// A visit without a fetch that made messages wait for users here (rows
// made pending again for a user whose queue was full) has the next fetch
// read those users alone; only a hint that could not name them has it
// read everyone.
func TestWaitingWithoutFetchAsksForItsUsers(t *testing.T) {
	fs := &fakeSessions{sessions: map[int64]*fakeSession{7: {user: 7}, 8: {user: 8}}, ready: map[int64]bool{}}
	q, err := New(testConfig(t, 1), fs)
	if err != nil {
		t.Fatal(err)
	}
	q.committed(time.Now(), &visitWork{waiting: []store.Waiting{{Node: 1, Users: []int64{7, 9}}, {Node: 2, All: true}}})
	_, asked7 := q.fetchFor[7]
	_, asked8 := q.fetchFor[8]
	_, asked9 := q.fetchFor[9]
	if q.more || !asked7 || q.fetchFor[7].login || asked8 || asked9 {
		t.Errorf("after rows made to wait for user 7 here: fetch of everyone %v, asked %v; want user 7 alone (9 is not logged in here)", q.more, q.fetchFor)
	}
	q.committed(time.Now(), &visitWork{waiting: []store.Waiting{{Node: 1, All: true}}})
	if !q.more {
		t.Error("rows waiting for users the hint could not name: no fetch of everyone")
	}
}

func TestHint(t *testing.T) {
	h, err := decodeHint(nil)
	if err != nil || len(h.W) != 0 || h.encode() != nil {
		t.Fatalf("empty hint: %v %v", h, err)
	}
	all := func(ids ...int64) []store.Waiting {
		var out []store.Waiting
		for _, id := range ids {
			out = append(out, store.Waiting{Node: id, All: true})
		}
		return out
	}
	h = h.update(2, all(5, 3, 2, 5, 0))
	if string(h.encode()) != `{"w":[3,5]}` {
		t.Fatalf("hint %s", h.encode())
	}
	back, err := decodeHint(h.encode())
	if err != nil || !back.has(3) || !back.has(5) || back.has(2) {
		t.Fatalf("round trip %v %v", back, err)
	}
	if _, named := back.users(3); named {
		t.Fatal("a node named for every user names users")
	}
	if back.update(3, nil).update(5, nil).encode() != nil {
		t.Fatal("a hint with no nodes is no App data")
	}
	if _, err := decodeHint(json.RawMessage(`[1`)); err == nil {
		t.Fatal("garbage decoded")
	}

	// Users: named per node, merged, and every user once any message
	// there is for everyone or the list grows past its bound.
	h = hint{}.update(1, []store.Waiting{{Node: 4, Users: []int64{9, 7}}, {Node: 3, Users: []int64{1}}, {Node: 4, Users: []int64{8, 7}}})
	if string(h.encode()) != `{"w":[3,4],"u":{"3":[1],"4":[7,8,9]}}` {
		t.Fatalf("hint with users %s", h.encode())
	}
	back, err = decodeHint(h.encode())
	if us, named := back.users(4); err != nil || !named || !slices.Equal(us, []int64{7, 8, 9}) {
		t.Fatalf("users at 4 = %v %v (%v)", us, named, err)
	}
	h = back.update(1, all(3))
	if us, named := h.users(3); named || !h.has(3) {
		t.Fatalf("a message for everyone at 3 left users %v named", us)
	}
	if h = h.update(1, []store.Waiting{{Node: 3, Users: []int64{2}}}); !h.has(3) {
		t.Fatal("node 3 lost")
	}
	if _, named := h.users(3); named {
		t.Fatal("users named at a node already fetching for everyone")
	}
	var many []int64
	for id := range int64(hintUsersPerNode + 1) {
		many = append(many, id+1)
	}
	if h := (hint{}).update(1, []store.Waiting{{Node: 2, Users: many}}); !h.has(2) {
		t.Fatal("node 2 lost")
	} else if _, named := h.users(2); named {
		t.Fatal("more users than the bound stayed named")
	}
	// A token naming more users than the bound, or users at a node not
	// in the list, asks for nothing less than everyone / nothing.
	forged, _ := decodeHint(json.RawMessage(`{"w":[2],"u":{"2":[` + strings.Repeat("1,", hintUsersPerNode) + `1],"6":[1]}}`))
	if _, named := forged.users(2); named {
		t.Fatal("an over-long list names users")
	}
	if _, named := forged.users(6); named || forged.has(6) {
		t.Fatal("a node outside the list is hinted")
	}
}

// Notices in a forged token: only well-formed ones are handed to the
// session of their user here; the token carries at most maxHintNotices
// on, and a notice whose origin never sees it again is gone after
// noticeHops visits.
func TestForgedNoticesInTheToken(t *testing.T) {
	alice := &fakeSession{user: 5, version: 2, room: 1000}
	fs := &fakeSessions{sessions: map[int64]*fakeSession{5: alice}, ready: map[int64]bool{5: true}}
	q, err := New(testConfig(t, 2), fs)
	if err != nil {
		t.Fatal(err)
	}
	forged := []Notice{
		{Origin: 9, User: 5, Kind: "zz", From: "mallory", Hops: 5},           // no such kind
		{Origin: 9, User: 5, Kind: NoticeRead, From: "", Seq: 1, Hops: 5},    // no sender
		{Origin: 9, User: 5, Kind: NoticeRead, From: "m", Seq: -1, Hops: 5},  // no such sequence
		{Origin: 0, User: 5, Kind: NoticeRead, From: "m", Seq: 1, Hops: 5},   // from no node
		{Origin: 9, User: 5, Kind: NoticeRead, From: " m", Seq: 1, Hops: 5},  // not a name
		{Origin: 9, User: 5, Kind: NoticeTyping, From: "m", Hops: 5},         // handed over (the session picks the kinds it asked for)
		{Origin: 9, User: 5, Kind: NoticeRead, From: "bob", Seq: 7, Hops: 5}, // handed over
	}
	for range 500 { // for nobody logged in, never coming home
		forged = append(forged, Notice{Origin: 9, User: 999_999, Kind: NoticeTyping, From: "x", Hops: 1 << 30})
	}
	app := hint{N: forged}.encode()
	// The store is not the point: every fenced transaction "commits"
	// without running.
	fenced := func(func(store.Tx) error) error { return nil }
	visit := func(seq int64) {
		out, _, err := q.Visit(t.Context(), token.Token{Stamp: token.Stamp{Gen: 1, Seq: seq}, App: app}, fenced)
		if err != nil {
			t.Fatal(err)
		}
		app = out
	}
	visit(1)
	if got := alice.notices; len(got) != 2 || got[0].Kind != NoticeTyping || got[1].From != "bob" || got[1].Seq != 7 {
		t.Fatalf("alice got %+v, want the well-formed typing and READ notices", got)
	}
	h, err := decodeHint(app)
	if err != nil || len(h.N) > maxHintNotices {
		t.Fatalf("the token carries %d notices on (%v), over %d", len(h.N), err, maxHintNotices)
	}
	for seq := int64(2); seq <= noticeHops+1; seq++ {
		visit(seq)
	}
	if h, _ := decodeHint(app); len(h.N) != 0 {
		t.Fatalf("%d notices still carried after %d visits", len(h.N), noticeHops+1)
	}
	if len(alice.notices) != 2 {
		t.Fatalf("alice got %d notices, want the 2 only once", len(alice.notices))
	}
}
