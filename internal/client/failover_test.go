package client

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client/clienttest"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestSessionMovesOnNotice: a node that says it cannot reach the store
// is left at once for another node, and the message it held without a
// receipt is stored there, once.
func TestSessionMovesOnNotice(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	bob := startSession(t, "bob", second)
	alice := startSession(t, "alice", srv.Addr, second)

	srv.Mute("alice", true) // the node takes the message and stores nothing, as a node cut from the store
	o, err := alice.Post(ToUser("bob"), "sent while the store went away")
	if err != nil {
		t.Fatal(err)
	}
	srv.WaitLineContaining(t, o.ID)
	srv.Mute("alice", false) // node 2 answers
	srv.Notice(srv.Addr, protocol.NoticeStoreUnreachable)
	if lost := nextOf[ConnectionLost](t, alice); lost.Addr != srv.Addr || !strings.Contains(lost.Err.Error(), string(protocol.NoticeStoreUnreachable)) {
		t.Fatalf("lost: %+v", lost)
	}
	c := nextOf[Connected](t, alice)
	if c.Node != 2 || !c.Moved() || c.From != srv.Addr || c.FromNode != 1 || c.Resent != 1 || c.Why == nil {
		t.Fatalf("moved: %+v", c)
	}
	if !strings.Contains(c.Why.Error(), string(protocol.NoticeStoreUnreachable)) {
		t.Fatalf("why: %v", c.Why)
	}
	if st := nextOf[Stored](t, alice); st.ID != o.ID {
		t.Fatalf("stored %+v, want %s", st, o.ID)
	}
	if m := nextOf[ChatMessage](t, bob); m.ID != o.ID {
		t.Fatalf("bob got %+v", m)
	}
	if got := srv.Messages(); len(got) != 1 {
		t.Fatalf("stored %q, want the message once", got)
	}
}

// TestSessionStaysOnNoticeAlone: with no other node known, a notice is
// shown and the Session stays.
func TestSessionStaysOnNoticeAlone(t *testing.T) {
	srv := clienttest.NewServer(t)
	srv.NoFailover() // no node list: alice knows node 1 only
	alice := startSession(t, "alice", srv.Addr)
	srv.Notice(srv.Addr, protocol.NoticeOutOfRing)
	if n := nextOf[Notice](t, alice); n.Code != protocol.NoticeOutOfRing {
		t.Fatalf("notice: %+v", n)
	}
	if _, err := alice.Who(testCtx(t)); err != nil {
		t.Fatalf("the session left its only node: %v", err)
	}
	if addr, _, ok := alice.Where(); addr != srv.Addr || !ok {
		t.Fatalf("alice at %s, connected %v", addr, ok)
	}
}

// TestSessionLearnsNodes: a Session given one node learns the others
// from its login answer, hands them to OnNodes, and fails over to them
// when its node dies.
func TestSessionLearnsNodes(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	var mu sync.Mutex
	var told [][]protocol.NodeAddr
	alice, err := StartSession(testCtx(t), SessionConfig{Addrs: []string{srv.Addr}, User: "alice",
		Options: Options{Timeout: testutil.WaitLimit}, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		OnNodes: func(n []protocol.NodeAddr) { mu.Lock(); told = append(told, n); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	want := []protocol.NodeAddr{{Node: 1, Addr: srv.Addr}, {Node: 2, Addr: second}}
	if got := alice.Nodes(); !slices.Equal(got, want) {
		t.Fatalf("nodes %v, want %v", got, want)
	}
	mu.Lock()
	if len(told) != 1 || !slices.Equal(told[0], want) {
		t.Fatalf("OnNodes got %v", told)
	}
	mu.Unlock()
	srv.Crash(srv.Addr)
	if c := nextOf[Connected](t, alice); c.Node != 2 || c.Addr != second || !c.Moved() {
		t.Fatalf("reconnected: %+v", c)
	}
}

// TestSessionLeavesFrozenNode: a node that stops answering (a stopped
// process keeps its sockets open) is left within 3 s, for a node the
// Session learned at login, without a message on its way to notice it.
func TestSessionLeavesFrozenNode(t *testing.T) {
	srv := clienttest.NewServer(t)
	second := srv.AddNode(t)
	alice := startSession(t, "alice", srv.Addr)
	srv.Freeze(srv.Addr)
	frozen := time.Now()
	lost := nextOf[ConnectionLost](t, alice)
	if lost.Err == nil || !strings.Contains(lost.Err.Error(), "did not answer") {
		t.Fatalf("lost: %+v", lost)
	}
	c := nextOf[Connected](t, alice)
	took := time.Since(frozen)
	if c.Addr != second || !c.Moved() {
		t.Fatalf("reconnected: %+v", c)
	}
	t.Logf("left the frozen node and logged in at node %d after %v", c.Node, took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Fatalf("moved after %v, want within 3s", took)
	}
	o, err := alice.Post(ToUser("alice"), "after the move")
	if err != nil {
		t.Fatal(err)
	}
	if st := nextOf[Stored](t, alice); st.ID != o.ID {
		t.Fatalf("stored %+v", st)
	}
}
