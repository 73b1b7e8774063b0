package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
)

// history builds users' records: alice sends to bob and to group g
// (alice, bob, carol); each shown list is what the user saw, in order.
type history struct {
	recs    map[string]*userRecords
	members map[string][]string
}

func newHistory() *history {
	h := &history{recs: map[string]*userRecords{}, members: map[string][]string{"g": {"alice", "bob", "carol"}}}
	for _, n := range []string{"alice", "bob", "carol"} {
		h.recs[n] = &userRecords{name: n, raw: map[string][]rawMsg{}}
	}
	return h
}

// send records a message from 'from' stored at seq (0: no receipt).
func (h *history) send(from string, n int, to client.Recipient, seq int64) string {
	id := from + "-" + string(rune('a'+n))
	h.recs[from].sent = append(h.recs[from].sent, sentMsg{N: n, ID: id, To: to, Seq: seq})
	return id
}

func (h *history) show(user, id string, from string, n int, seq int64, to client.Recipient) {
	h.recs[user].shown = append(h.recs[user].shown, shownMsg{ID: id, From: from, N: n, Seq: seq, To: to})
	h.recs[user].raw[id] = append(h.recs[user].raw[id], rawMsg{Conn: 1})
}

func (h *history) judge() msgVerdict { return judgeMessages(h.recs, h.members) }

// clean: alice sends 1 and 2 to bob, 3 to the group; everyone sees all.
func clean() (*history, []string) {
	h := newHistory()
	bob, g := client.ToUser("bob"), client.ToGroup("g")
	a := h.send("alice", 1, bob, 10)
	b := h.send("alice", 2, bob, 11)
	c := h.send("alice", 3, g, 12)
	h.show("bob", a, "alice", 1, 10, bob)
	h.show("bob", b, "alice", 2, 11, bob)
	h.show("bob", c, "alice", 3, 12, g)
	h.show("carol", c, "alice", 3, 12, g)
	return h, []string{a, b, c}
}

func TestJudgeMessagesClean(t *testing.T) {
	h, _ := clean()
	v := h.judge()
	if v.owed != 4 || len(v.missing) != 0 || len(v.dup) != 0 || len(v.fifo) != 0 || len(v.wrong) != 0 || len(v.phantom) != 0 {
		t.Fatalf("clean history judged %+v", v)
	}
	if v.sent != 3 || v.stored != 3 || v.pairs != 2 {
		t.Errorf("sent %d stored %d pairs %d, want 3 3 2", v.sent, v.stored, v.pairs)
	}
}

func TestJudgeMessagesFindsLoss(t *testing.T) {
	h, ids := clean()
	h.recs["carol"].shown = nil // the group message never reached carol
	v := h.judge()
	if len(v.missing) != 1 || v.missing[0].to != "carol" || v.missing[0].m.ID != ids[2] {
		t.Fatalf("missing %+v, want the group message to carol", v.missing)
	}
	// A message without a receipt is not owed.
	h.send("alice", 4, client.ToUser("bob"), 0)
	if v := h.judge(); len(v.missing) != 1 || v.unconfirmed != 1 {
		t.Errorf("an unconfirmed message counted as owed: %+v", v)
	}
}

func TestJudgeMessagesFindsDuplicates(t *testing.T) {
	h, ids := clean()
	h.show("bob", ids[0], "alice", 1, 10, client.ToUser("bob"))
	if v := h.judge(); len(v.dup) != 1 || !strings.Contains(v.dup[0], "2 times") {
		t.Fatalf("dup %v, want one id shown twice", v.dup)
	}
	// One content stored under two ids is a duplicate too.
	h, _ = clean()
	h.recs["alice"].sent = append(h.recs["alice"].sent, sentMsg{N: 1, ID: "other-id", To: client.ToUser("bob"), Seq: 20})
	h.show("bob", "other-id", "alice", 1, 20, client.ToUser("bob"))
	v := h.judge()
	if len(v.dup) != 1 || !strings.Contains(v.dup[0], "under 2 ids") {
		t.Fatalf("dup %v, want alice#1 under two ids", v.dup)
	}
}

func TestJudgeMessagesFindsDisorder(t *testing.T) {
	h := newHistory()
	bob := client.ToUser("bob")
	a := h.send("alice", 1, bob, 10)
	b := h.send("alice", 2, bob, 11)
	h.show("bob", b, "alice", 2, 11, bob)
	h.show("bob", a, "alice", 1, 10, bob)
	if v := h.judge(); len(v.fifo) != 1 {
		t.Fatalf("fifo %v, want one violation", v.fifo)
	}
	// Two senders to one group: every member sees one order.
	h = newHistory()
	g := client.ToGroup("g")
	x := h.send("alice", 1, g, 10)
	y := h.send("bob", 1, g, 11)
	h.show("carol", y, "bob", 1, 11, g)
	h.show("carol", x, "alice", 1, 10, g)
	if v := h.judge(); len(v.fifo) != 1 || !strings.Contains(v.fifo[0], "group g") {
		t.Fatalf("fifo %v, want a group order violation", v.fifo)
	}
}

func TestJudgeMessagesFindsStrangers(t *testing.T) {
	h, ids := clean()
	h.show("carol", ids[0], "alice", 1, 10, client.ToUser("bob")) // bob's message at carol
	h.show("bob", "nobody-sent-this", "mallory", 1, 99, client.ToUser("bob"))
	h.recs["alice"].sent = append(h.recs["alice"].sent, sentMsg{N: 9, ID: "refused", To: client.ToUser("bob"), Refused: "BAD_REQUEST"})
	h.show("bob", "refused", "alice", 9, 50, client.ToUser("bob"))
	v := h.judge()
	if len(v.wrong) != 1 || len(v.phantom) != 1 || len(v.refusedShown) != 1 {
		t.Fatalf("wrong %v phantom %v refusedShown %v, want one each", v.wrong, v.phantom, v.refusedShown)
	}
}

func TestRecipientsOfExcludesSender(t *testing.T) {
	got := recipientsOf(map[string][]string{"g": {"a", "b", "c"}}, "b", client.ToGroup("g"))
	if strings.Join(got, ",") != "a,c" {
		t.Errorf("got %v, want [a c]", got)
	}
	if got := recipientsOf(nil, "a", client.ToUser("a")); len(got) != 1 || got[0] != "a" {
		t.Errorf("a message to oneself: %v", got)
	}
}

func TestContentRoundTrip(t *testing.T) {
	for _, c := range []struct {
		user string
		n    int
	}{{"u01", 1}, {"u#x", 42}} {
		u, n := parseContent(content(c.user, c.n))
		if u != c.user || n != c.n {
			t.Errorf("parseContent(content(%q, %d)) = %q, %d", c.user, c.n, u, n)
		}
	}
	if u, n := parseContent("no counter"); u != "" || n != 0 {
		t.Errorf("foreign content parsed as %q %d", u, n)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5}
	if pct(ds, 0.5) != 3 || pct(ds, 1) != 5 || pct(nil, 0.5) != 0 {
		t.Errorf("pct: %v %v %v", pct(ds, 0.5), pct(ds, 1), pct(nil, 0.5))
	}
}

// A forged TOKEN in the predecessor's name refused as not_predecessor (the
// ring moved under the barrage), dropped unjudged (the next TOKEN
// replaced it while it waited), or never read (its HELLO refused as
// unproven while the real link was up), is still refused and counted; a token
// nobody counted is not; other reasons are not TOKENs.
func TestRefusedTokensJudgedTogether(t *testing.T) {
	want := map[string]int{"forged_token": 1, "malformed": 3}
	for _, tc := range []struct {
		counters map[string]float64
		ok       bool
	}{
		{map[string]float64{"forged_token": 1}, true},
		{map[string]float64{"not_predecessor": 1}, true},
		{map[string]float64{"unjudged_token": 1}, true},
		{map[string]float64{"replaced_link": 1}, true},
		{map[string]float64{"unproven_hello": 1}, true},
		{map[string]float64{}, false},
		{map[string]float64{"malformed": 3}, false},
	} {
		sent, got := refusedTokens(want, tc.counters)
		if ok := got >= float64(sent); ok != tc.ok {
			t.Errorf("counters %v: sent %d, counted %.0f; want ok %t", tc.counters, sent, got, tc.ok)
		}
	}
	if !isTokenReason("forged_token") || !isTokenReason("not_predecessor") || isTokenReason("malformed") {
		t.Error("isTokenReason: only forged_token and not_predecessor count refused TOKENs")
	}
}

// A TOKEN probe is excused from the counters when one of the process's
// own store operations failed from a second before it to 5 s after (its
// check could not be made), and only for that process.
func TestTroubledProbesNearAStoreFailure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &runner{host: &hostile{probes: []tokenProbe{
		{Pid: 7, Kind: hTCPNotPred, At: t0},
		{Pid: 7, Kind: hTCPNotPred, At: t0.Add(10 * time.Second)},
		{Pid: 7, Kind: hTCPForgedToken, At: t0},
		{Pid: 8, Kind: hTCPNotPred, At: t0},
	}}}
	failed := []time.Time{t0.Add(2 * time.Second)}
	if n := r.excusedProbes(7, hTCPNotPred, failed); n != 1 {
		t.Errorf("%d probes excused; want the one 2 s before the failure", n)
	}
	if n := r.excusedProbes(7, hTCPNotPred, []time.Time{t0.Add(-2 * time.Second), t0.Add(6 * time.Second)}); n != 0 {
		t.Errorf("%d probes excused by failures outside their window", n)
	}
	if n := r.excusedProbes(7, hTCPForgedToken, failed); n != 1 {
		t.Errorf("%d forged-token probes excused; want 1", n)
	}
	if n := r.excusedProbes(8, hTCPNotPred, nil); n != 0 {
		t.Errorf("%d probes of a process without store failures excused", n)
	}
	// A stranger's token answered with a stale TOKEN_ACK of its own stamp
	// was judged and refused: excused without a store failure.
	r.host.probes = append(r.host.probes, tokenProbe{Pid: 8, Kind: hTCPNotPred, At: t0, Stale: true})
	if n := r.excusedProbes(8, hTCPNotPred, nil); n != 1 {
		t.Errorf("%d probes excused; want the one refused as stale", n)
	}
}

// A TOKEN whose link the node closed as replaced, with no acknowledgement
// of its stamp, may have gone unread: no counter can name it. One
// acknowledged (stale or not), or refused with UNLINK, was read.
func TestUnreadToken(t *testing.T) {
	const stamp = "TOKEN_ACK 5/100"
	for _, tc := range []struct {
		answers []string
		want    bool
	}{
		{[]string{"UNLINK replaced"}, true},
		{[]string{"TOKEN_ACK 5/99 stale", "UNLINK replaced"}, true}, // another token's ack
		{[]string{"TOKEN_ACK 5/1000", "UNLINK replaced"}, true},
		{[]string{"TOKEN_ACK 5/100 stale", "UNLINK replaced"}, false},
		{[]string{"TOKEN_ACK 5/100", "UNLINK replaced"}, false},
		{[]string{"UNLINK refused"}, false},
		{nil, false},
	} {
		if got := unread(tc.answers, stamp); got != tc.want {
			t.Errorf("unread(%q) = %v, want %v", tc.answers, got, tc.want)
		}
	}
}

// An increment logged with its COMMIT unanswered may be in the store or
// not: counted by the counter, it is not missing; not counted, it is
// written again by the next holder and logged as committed, never as a
// duplicate. Anything else the counter holds without a line is missing.
func TestCountProbe(t *testing.T) {
	for _, c := range []struct {
		name                  string
		counter               int64
		values, unknown       []int64
		missing               int64
		dups, over, unknownIn int
	}{
		{"every increment logged", 5, []int64{1, 2, 3, 4, 5}, nil, 0, 0, 0, 0},
		{"one unlogged (a kill -9)", 5, []int64{1, 2, 4, 5}, nil, 1, 0, 0, 0},
		{"the unanswered COMMIT committed", 5, []int64{1, 2, 4, 5}, []int64{3}, 0, 0, 0, 1},
		{"the unanswered COMMIT did not commit: its value written again", 5, []int64{1, 2, 3, 4, 5}, []int64{3}, 0, 0, 0, 0},
		{"unanswered beyond the counter: did not commit", 4, []int64{1, 2, 3, 4}, []int64{5}, 0, 0, 0, 0},
		{"overlapping sections", 4, []int64{1, 2, 2, 3}, []int64{4}, 0, 1, 0, 1},
		{"a value beyond the counter logged as committed", 3, []int64{1, 2, 3, 4}, nil, 0, 0, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pc := countProbe(c.counter, c.values, c.unknown)
			if pc.missing != c.missing || pc.dups != c.dups || pc.over != c.over || pc.unknownIn != c.unknownIn {
				t.Errorf("%+v, want missing %d, dups %d, over %d, unknown in the store %d", pc, c.missing, c.dups, c.over, c.unknownIn)
			}
		})
	}
}
