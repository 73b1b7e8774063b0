package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/token"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(10, 3, t0)
	for i := range 3 {
		if !b.allow(t0) {
			t.Fatalf("burst line %d refused", i)
		}
	}
	if b.allow(t0) {
		t.Fatal("line over the burst allowed")
	}
	if !b.allow(t0.Add(100 * time.Millisecond)) {
		t.Fatal("a token should have come back after 100 ms at 10/s")
	}
	if b.allow(t0.Add(150 * time.Millisecond)) {
		t.Fatal("half a token is not a token")
	}
	for i := range 4 { // each call takes a token: three are there, no fourth
		if got := b.allow(t0.Add(time.Hour)); got != (i < 3) {
			t.Fatalf("call %d after a long pause: %v; a long pause refills to the burst, no more", i+1, got)
		}
	}
	u := newBucket(0, 0, t0)
	for range 2 {
		if !u.allow(t0) {
			t.Fatal("rate 0 is unlimited")
		}
	}
}

// TestVisitWithBadHintFetches: App data the service cannot read is
// replaced, and the node fetches to be safe.
func TestVisitWithBadHintFetches(t *testing.T) {
	r := newRing(t, 1, nil)
	s := r.servers[0]
	c := dialRaw(t, r.addr(1))
	c.login("x")
	r.rotations(2)
	before := s.Stats().StoreVisits
	r.mu.Lock()
	r.app = json.RawMessage(`"not ours"`)
	r.mu.Unlock()
	r.rotations(2)
	if s.Stats().StoreVisits == before {
		t.Error("no fetch after unreadable App data")
	}
	r.mu.Lock()
	app := r.app
	r.mu.Unlock()
	if app != nil {
		t.Errorf("App data not replaced: %s", app)
	}
	_ = token.Token{}
}

func TestPassword(t *testing.T) {
	h, err := hashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %s", h)
	}
	if ok, err := checkPassword(h, "correct horse"); !ok || err != nil {
		t.Fatalf("right password: %v %v", ok, err)
	}
	if ok, err := checkPassword(h, "correct horsE"); ok || err != nil {
		t.Fatalf("wrong password: %v %v", ok, err)
	}
	h2, _ := hashPassword("correct horse")
	if h2 == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, bad := range []string{"", "plain", "$argon2id$v=19$m=1,t=1,p=1$AA$AA", "$2a$10$abc", "$argon2id$v=19$m=99999999,t=2,p=1$c2FsdHNhbHQ$" + strings.Repeat("A", 43)} {
		if _, err := checkPassword(bad, "x"); err == nil {
			t.Errorf("hash %q accepted", bad)
		}
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"alice": true, "Ålice Ünïcode": true, "x'); DROP TABLE users;--": true, strings.Repeat("界", 32): true,
		"": false, strings.Repeat("a", 33): false, "tab\there": false, "nl\n": false, " lead": false, "trail ": false,
		"\u200bzero-width": false, string([]byte{0xff}): false,
	} {
		if got := CheckName("name", name) == nil; got != ok {
			t.Errorf("CheckName(%q) ok = %v, want %v", name, got, ok)
		}
	}
}

// FuzzDecode: the line decoder never panics, and what it accepts is within
// the protocol's bounds.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"messageType":"LOGIN","username":"alice"}`,
		`{"messageType":"LOGIN","username":"alice","version":2,"password":"pw","id":"r1"}`,
		`{"messageType":"JOIN_GROUP","group":"g1"}`,
		`{"sentAt":{"seconds":1556146749,"nanos":290000000},"fromName":"a","toName":"b","messageContent":"hi","forGroup":false,"messageType":"CHAT_MESSAGE"}`,
		`{"messageType":"CHAT_MESSAGE","id":"0190f5a2-7b1c-7cde-8f00-0123456789ab","toGroup":"g","messageContent":"x"}`,
		`{"messageType":"ACK","ids":["a","b"]}`,
		`{"messageType":"ACK_UPTO","seq":4711}`, `{"messageType":"ACK_UPTO","seq":-1,"id":"x"}`,
		`{"messageType":"HISTORY","toUsername":"bob","limit":5}`,
		`{"messageType":"ALIVE"}`, `{"messageType":"WHO"}`, `not json`, `{}`, `[]`, `{"messageType":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Decode(line)
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("error without code or message: %+v", err)
			}
			var out map[string]any
			if json.Unmarshal(bytes.TrimSpace(encodeError(protocol.V2, err)), &out) != nil {
				t.Fatalf("error line is not JSON: %s", encodeError(protocol.V2, err))
			}
			return
		}
		switch r.Type {
		case protocol.TypeLogin:
			if CheckName("u", r.Username) != nil || (r.Version != protocol.V1 && r.Version != protocol.V2) || len(r.Password) > protocol.MaxPassword {
				t.Fatalf("accepted login %+v", r)
			}
		case protocol.TypeJoinGroup, protocol.TypeLeaveGroup:
			if CheckName("g", r.Group) != nil {
				t.Fatalf("accepted group %+v", r)
			}
		case protocol.TypeChatMessage:
			if CheckName("to", r.To.Name) != nil || r.Content == "" || len(r.Content) > protocol.MaxContentBytes || !utf8.ValidString(r.Content) {
				t.Fatalf("accepted chat %+v", r)
			}
		case protocol.TypeAck:
			if len(r.IDs) == 0 || len(r.IDs) > protocol.MaxAckIDs {
				t.Fatalf("accepted ack %+v", r)
			}
		case protocol.TypeHistory:
			if CheckName("to", r.To.Name) != nil || r.Limit < 0 {
				t.Fatalf("accepted history %+v", r)
			}
		case protocol.TypeAckUpTo: // its seq is checked by the session (ackUpTo), after the feature
		case protocol.TypeAlive, protocol.TypeWho, protocol.TypeGroups:
		default:
			t.Fatalf("accepted unknown type %q", r.Type)
		}
		if len(r.ID) > protocol.MaxRequestID {
			t.Fatalf("id of %d bytes", len(r.ID))
		}
	})
}

// TestShutdown: stopping the server stores what clients sent (the token
// still visits), tells every client, clears presence and joins every
// goroutine (goleak checks the rest).
func TestShutdown(t *testing.T) {
	st := newStore(t, 1)
	r := &testRing{t: t, st: st, wake: make(chan struct{}, 1), fail: map[int64]int{}, budget: 5 * time.Second}
	cfg := testConfig(t, 1, st)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.servers = []*Server{s}
	if err := s.Listen(context.Background()); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }()
	c := dialRaw(t, s.Addr().String())
	c.login("a")
	other := dialRaw(t, s.Addr().String())
	other.login("b")
	// No token yet: the message waits in the outbox.
	c.send(chatTo("b", "stored at shutdown"))
	eventually(t, "message queued", func() bool { return s.Stats().Queued == 1 })
	tokCtx, stopToken := context.WithCancel(context.Background())
	tokenDone := make(chan struct{})
	stop()
	go func() {
		defer close(tokenDone)
		r.pass(tokCtx)
	}()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return")
	}
	stopToken()
	<-tokenDone
	lines := c.closed()
	if len(lines) != 1 || !strings.Contains(lines[0], "server shutting down") {
		t.Errorf("client got %q", lines)
	}
	if on, _ := st.Online(context.Background()); len(on) != 0 {
		t.Errorf("presence left: %+v", on)
	}
	if s.Stats().Stored != 1 {
		t.Errorf("stats %+v: the message was not stored during the drain", s.Stats())
	}
	got := other.closed()
	if len(got) != 2 || !strings.Contains(got[0], "stored at shutdown") || !strings.Contains(got[1], "server shutting down") {
		t.Errorf("b got %q", got)
	}
}

// TestPresenceCheckJudgesOnlySessionsReadyBeforeItsRead: the presence
// check restores the row of a ready session it did not read (and fetches
// for everyone after), but a session made ready after the check read the
// rows may have set its row after that read: it is not judged lost.
func TestPresenceCheckJudgesOnlySessionsReadyBeforeItsRead(t *testing.T) {
	s := &Server{sessions: map[int64]*session{
		1: {userID: 1, ready: true, readyAt: 1},
		2: {userID: 2, ready: true, readyAt: 2},
		3: {userID: 3, ready: true, readyAt: 3},
		4: {userID: 4, readyAt: 0}, // logging in
	}}
	lost, stale := s.comparePresence(map[int64]bool{2: true, 5: true}, 1)
	if len(lost) != 1 || lost[0].userID != 1 {
		t.Errorf("lost %v; want only user 1 (ready before the read, no row)", lost)
	}
	if !slices.Equal(stale, []int64{5}) || s.sessions[5] == nil || !s.sessions[5].closing {
		t.Errorf("stale %v; want user 5 (a row, no session), its name held", stale)
	}
	lost, _ = s.comparePresence(map[int64]bool{2: true, 5: true}, 3)
	var ids []int64
	for _, l := range lost {
		ids = append(ids, l.userID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int64{1, 3}) {
		t.Errorf("lost %v after a later read; want users 1 and 3", ids)
	}
}
