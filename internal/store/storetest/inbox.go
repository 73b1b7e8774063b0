package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/store"
)

// inboxTests check direct messages on timelines: acknowledgements out of
// order, undoing marks after newer ones, marks that would skip a message,
// and pruning behind a cursor.
var inboxTests = []conformanceTest{
	{"InboxAcksOutOfOrder", testInboxAcksOutOfOrder},
	{"InboxUnmarkAfterNewerMark", testInboxUnmarkAfterNewerMark},
	{"InboxMarkSkipsNothing", testInboxMarkSkipsNothing},
	{"InboxFair", testInboxFair},
	{"InboxAckFarApart", testInboxAckFarApart},
	{"InboxMarkRacesReset", testInboxMarkRacesReset},
	{"InboxMarkWhatTheFetchRead", testInboxMarkWhatTheFetchRead},
	{"InboxAckNextInOrder", testInboxAckNextInOrder},
}

// sendDirect stores direct messages from a to the user, ids prefix1..n, and
// returns their sequences.
func sendDirect(t *testing.T, st store.Store, from, to store.User, prefix string, n int) []int64 {
	t.Helper()
	var seqs []int64
	update(t, st, func(tx store.Tx) error {
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("%s%d", prefix, i)
			seq, _, err := tx.InsertMessage(store.NewMessage{ID: id, SenderID: from.ID, ToUserID: to.ID, Content: id, SentAt: time.Now()},
				[]int64{to.ID})
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		return nil
	})
	return seqs
}

// fetchMark reads what waits at node and marks it delivered, as a visit
// does, and returns the ids marked and the mark's stamp.
func fetchMark(t *testing.T, st store.Store, node int64) ([]string, []store.RecipientSeq, int64) {
	t.Helper()
	var ids []string
	var rows []store.RecipientSeq
	var stamp int64
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingForNodeFair(node, 100, 1000)
		if err != nil {
			return err
		}
		for _, d := range ds {
			rows = append(rows, d.Row())
		}
		done, s, err := tx.MarkDeliveredRows(node, rows)
		if err != nil {
			return err
		}
		if !cmp.Equal(done, rows) {
			t.Errorf("marked %v of %v", done, rows)
		}
		rows, stamp = done, s
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return nil
	})
	return ids, rows, stamp
}

// waiting lists the ids waiting at node, in order, without marking them.
func waiting(t *testing.T, st store.Store, node int64) []string {
	t.Helper()
	var ids []string
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingForNode(node, 1000)
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return err
	})
	return ids
}

// An acknowledgement by id is exact: acknowledging a message out of order
// neither acknowledges those before it nor is forgotten; after a reset only
// what is unacknowledged comes again, and pruning keeps what is awaited.
func testInboxAcksOutOfOrder(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 2)
	sendDirect(t, st, p.a, p.b, "m", 4)
	sendDirect(t, st, p.a, p.c, "c", 1)
	if ids, _, _ := fetchMark(t, st, 1); !slices.Equal(ids, []string{"m1", "m2", "m3", "m4"}) {
		t.Fatalf("delivered %v", ids)
	}
	ack := func(user store.User, want int, ids ...string) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			if n, err := tx.Ack(user.ID, ids); err != nil || n != want {
				t.Errorf("Ack(%s, %v) = %d, %v; want %d", user.Name, ids, n, err, want)
			}
			return nil
		})
	}
	count := func(user store.User, want int) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			if n, err := tx.PendingCount(user.ID); err != nil || n != want {
				t.Errorf("PendingCount(%s) = %d, %v; want %d", user.Name, n, err, want)
			}
			return nil
		})
	}
	ack(p.b, 2, "m2", "m4")
	ack(p.b, 0, "m2", "c1") // acknowledged already; another user's message
	count(p.b, 2)
	count(p.c, 1)
	update(t, st, func(tx store.Tx) error {
		if n, err := tx.ResetDelivered(p.b.ID); err != nil || n != 2 {
			t.Errorf("ResetDelivered = %d, %v; want 2 (m1, m3)", n, err)
		}
		return nil
	})
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m1", "m3"}) {
		t.Errorf("after a reset, waiting %v; want [m1 m3]", got)
	}
	ack(p.b, 1, "m1")
	count(p.b, 1)
	prune := func(want int) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			res, err := tx.PruneMessages(time.Now().Add(time.Hour), 0, 100)
			if err != nil || res.Deleted != want {
				t.Errorf("pruned %+v, %v; want %d deleted", res, err, want)
			}
			return nil
		})
	}
	prune(2) // m1, m2: m3 waits, m4 after it; c1 waits
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m3"}) {
		t.Errorf("after pruning, waiting %v; want [m3]", got)
	}
	ack(p.b, 1, "m3")
	count(p.b, 0)
	if got := waiting(t, st, 1); len(got) != 0 {
		t.Errorf("after every acknowledgement, waiting %v", got)
	}
	prune(2) // m3, m4
	count(p.c, 1)
}

// Undoing a visit's marks makes their messages pending again, also after a
// newer mark and in either order; a mark made pending by a reset and handed
// out again since is not undone by the older mark.
func testInboxUnmarkAfterNewerMark(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 2)
	unmark := func(stamp int64, rows []store.RecipientSeq, want int) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			if n, err := tx.UnmarkDelivered(stamp, rows); err != nil || n != want {
				t.Errorf("UnmarkDelivered(%d, %v) = %d, %v; want %d", stamp, rows, n, err, want)
			}
			return nil
		})
	}
	sendDirect(t, st, p.a, p.b, "m", 2)
	_, first, stamp1 := fetchMark(t, st, 1)
	sendDirect(t, st, p.a, p.b, "n", 2)
	_, _, stamp2 := fetchMark(t, st, 1)
	if stamp2 <= stamp1 {
		t.Errorf("stamps %d then %d: not ordered", stamp1, stamp2)
	}
	// The first visit's marks were never handed over; the second's were.
	unmark(stamp1, first, 1)
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m1", "m2", "n1", "n2"}) {
		t.Errorf("after undoing the older mark, waiting %v; want all four (more, never less)", got)
	}
	// Both visits' marks undone, the newer first.
	var a []store.RecipientSeq
	var stampA int64
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingForNode(1, 2)
		if err != nil || len(ds) != 2 {
			return fmt.Errorf("pending %+v, %v", ds, err)
		}
		a, stampA, err = tx.MarkDeliveredRows(1, []store.RecipientSeq{ds[0].Row(), ds[1].Row()})
		return err
	})
	_, b, stampB := fetchMark(t, st, 1)
	unmark(stampB, b, 1)
	unmark(stampA, a, 1)
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m1", "m2", "n1", "n2"}) {
		t.Errorf("after undoing both marks, newer first, waiting %v; want all four", got)
	}
	// A mark made pending by a login's reset and handed out again since.
	_, old, oldStamp := fetchMark(t, st, 1)
	update(t, st, func(tx store.Tx) error { _, err := tx.ResetDelivered(p.b.ID); return err })
	fetchMark(t, st, 1)
	unmark(oldStamp, old, 0)
	if got := waiting(t, st, 1); len(got) != 0 {
		t.Errorf("an old mark undid the new connection's: waiting %v", got)
	}
}

// inboxRow is the direct row of u's inbox at seq.
func inboxRow(u store.User, seq int64) store.RecipientSeq {
	return store.RecipientSeq{RecipientID: u.ID, Seq: seq}
}

// A mark never skips a message: rows that are not everything waiting up to
// the last of them mark nothing of that user.
func testInboxMarkSkipsNothing(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 1)
	b := sendDirect(t, st, p.a, p.b, "m", 3)
	c := sendDirect(t, st, p.a, p.c, "c", 1)
	mark := func(rows []store.RecipientSeq, want []store.RecipientSeq) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			done, _, err := tx.MarkDeliveredRows(1, rows)
			if err != nil || !cmp.Equal(done, want) {
				t.Errorf("MarkDeliveredRows(%v) = %v, %v; want %v", rows, done, err, want)
			}
			return nil
		})
	}
	mark([]store.RecipientSeq{inboxRow(p.b, b[1]), inboxRow(p.c, c[0])}, []store.RecipientSeq{inboxRow(p.c, c[0])}) // m1 waits before m2
	mark([]store.RecipientSeq{inboxRow(p.b, b[0]), inboxRow(p.b, b[2])}, nil)                                       // m2 between
	mark([]store.RecipientSeq{inboxRow(p.b, b[0]), inboxRow(p.b, b[1])}, []store.RecipientSeq{inboxRow(p.b, b[0]), inboxRow(p.b, b[1])})
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m3"}) {
		t.Errorf("waiting %v; want [m3]", got)
	}
	update(t, st, func(tx store.Tx) error {
		if w, err := tx.WaitingFor(b, 8); err != nil || len(w) != 1 || !slices.Equal(w[0].Users, []int64{p.b.ID}) {
			t.Errorf("WaitingFor = %+v, %v; want b at node 1 (m3)", w, err)
		}
		if w, err := tx.WaitingFor(b[:2], 8); err != nil || len(w) != 0 {
			t.Errorf("WaitingFor(m1, m2) = %+v, %v; want nobody (handed out)", w, err)
		}
		return nil
	})
}

// A fetch takes at most perUser of each user's inbox, from the cursor on,
// skipping what was acknowledged out of order: one backlog never fills a
// batch, and nothing acknowledged comes again.
func testInboxFair(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 1)
	// Many users here: a fetch first asks which of them have direct
	// messages waiting.
	update(t, st, func(tx store.Tx) error {
		for i := range 8 {
			u, _, err := tx.EnsureUser(fmt.Sprint("idle", i))
			if err == nil {
				err = tx.SetPresence(u.ID, 1)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	b := sendDirect(t, st, p.a, p.b, "m", 6)
	sendDirect(t, st, p.a, p.c, "c", 2)
	fair := func(per, limit int, want ...string) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			ds, err := tx.PendingForNodeFair(1, per, limit)
			var got []string
			for _, d := range ds {
				got = append(got, d.ID)
			}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("PendingForNodeFair(1, %d, %d) = %v, %v; want %v", per, limit, got, err, want)
			}
			return nil
		})
	}
	fair(2, 100, "m1", "m2", "c1", "c2")
	update(t, st, func(tx store.Tx) error {
		if n, err := tx.AckSeqs(p.b.ID, []int64{b[1], b[2]}); err != nil || n != 2 {
			t.Errorf("AckSeqs(m2, m3) = %d, %v; want 2", n, err)
		}
		return tx.MarkDelivered(p.b.ID, []int64{b[0]})
	})
	fair(2, 100, "m4", "m5", "c1", "c2")
	fair(3, 3, "m4", "m5", "m6")
	fair(1, 100, "m4", "c1")
}

// Acknowledgements of messages far apart in the global order (more than
// the run an acknowledgement reads at once between them) work as near ones.
func testInboxAckFarApart(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 1)
	first := sendDirect(t, st, p.a, p.b, "m", 1)
	update(t, st, func(tx store.Tx) error {
		var ms []store.NewMessage
		var rcpts [][]int64
		for i := range 4 * store.MaxAckIDs {
			ms = append(ms, store.NewMessage{ID: fmt.Sprint("c", i), SenderID: p.a.ID, ToUserID: p.c.ID, Content: "x", SentAt: time.Now()})
			rcpts = append(rcpts, []int64{p.c.ID})
		}
		_, err := tx.InsertMessages(ms, rcpts)
		return err
	})
	last := sendDirect(t, st, p.a, p.b, "n", 2)
	update(t, st, func(tx store.Tx) error {
		if n, err := tx.AckSeqs(p.b.ID, last[1:]); err != nil || n != 1 {
			t.Errorf("AckSeqs(n2) = %d, %v; want 1", n, err)
		}
		if n, err := tx.AckSeqs(p.b.ID, first); err != nil || n != 1 {
			t.Errorf("AckSeqs(m1) = %d, %v; want 1", n, err)
		}
		if n, err := tx.PendingCount(p.b.ID); err != nil || n != 1 {
			t.Errorf("PendingCount(b) = %d, %v; want 1 (n1)", n, err)
		}
		ds, err := tx.PendingFor(1, []int64{p.b.ID}, 10, 10)
		if err != nil || len(ds) != 1 || ds[0].ID != "n1" {
			t.Errorf("waiting for b: %+v, %v; want n1 alone", ds, err)
		}
		if n, err := tx.AckSeqs(p.b.ID, last[:1]); err != nil || n != 1 {
			t.Errorf("AckSeqs(n1) = %d, %v; want 1", n, err)
		}
		if n, err := tx.PendingCount(p.b.ID); err != nil || n != 0 {
			t.Errorf("PendingCount(b) = %d, %v; want 0", n, err)
		}
		return nil
	})
}

// The race of a visit with its user's reconnect at the same node: the
// visit reads what waits after the cursor, then the login's reset (which
// makes what the old connection was handed pending again) commits, then the
// visit marks. The mark must not move the cursor past the messages the
// reset made pending: every message waits. Only MariaDB runs transactions
// side by side.
func testInboxMarkRacesReset(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	if st.Dialect() != "mysql" {
		t.Skip("transactions run one at a time on " + st.Dialect())
	}
	p, _ := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error { return tx.SetPresence(p.b.ID, 1) })
	sendDirect(t, st, p.a, p.b, "m", 1)
	fetchMark(t, st, 1) // m1, handed to the old connection
	sendDirect(t, st, p.a, p.b, "n", 2)
	read, reset := make(chan struct{}), make(chan error, 1)
	go func() {
		<-read
		reset <- st.Update(ctx, func(tx store.Tx) error {
			if err := tx.SetPresence(p.b.ID, 1); err != nil {
				return err
			}
			_, err := tx.ResetDelivered(p.b.ID)
			return err
		})
	}()
	var done []store.RecipientSeq
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingForNode(1, 10)
		if err != nil || len(ds) != 2 {
			return fmt.Errorf("pending for b = %+v, %v; want n1, n2", ds, err)
		}
		close(read)
		select {
		case err := <-reset:
			if err != nil {
				t.Errorf("reset: %v", err)
			}
		case <-time.After(10 * time.Second):
			return errors.New("the reset waited for the visit's read")
		}
		done, _, err = tx.MarkDeliveredRows(1, []store.RecipientSeq{ds[0].Row(), ds[1].Row()})
		return err
	})
	if len(done) != 0 {
		t.Errorf("marked %+v past a reset", done)
	}
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m1", "n1", "n2"}) {
		t.Errorf("waiting %v after the reset; want [m1 n1 n2]", got)
	}
}

// A mark in the transaction of the fetch that read its rows: rows that are
// the first of what the fetch read, from the cursor on, are marked; rows
// with a gap, or that do not start at the cursor, mark nothing of that user;
// nor do rows read before a reset moved the cursor back (in the same
// transaction here, so that both stores run it).
func testInboxMarkWhatTheFetchRead(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 1)
	m := sendDirect(t, st, p.a, p.b, "m", 3)
	c := sendDirect(t, st, p.a, p.c, "c", 1)
	mark := func(tx store.Tx, want []store.RecipientSeq, rows ...store.RecipientSeq) {
		t.Helper()
		if done, _, err := tx.MarkDeliveredRows(1, rows); err != nil || !cmp.Equal(done, want) {
			t.Errorf("MarkDeliveredRows(%v) = %v, %v; want %v", rows, done, err, want)
		}
	}
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingFor(1, []int64{p.b.ID, p.c.ID}, 10, 10)
		if err != nil || len(ds) != 4 {
			return fmt.Errorf("pending = %+v, %v; want m1-m3, c1", ds, err)
		}
		mark(tx, []store.RecipientSeq{inboxRow(p.c, c[0])}, inboxRow(p.b, m[0]), inboxRow(p.b, m[2]), inboxRow(p.c, c[0])) // m2 between
		mark(tx, nil, inboxRow(p.b, m[1]), inboxRow(p.b, m[2]))                                                            // m1 before
		mark(tx, []store.RecipientSeq{inboxRow(p.b, m[0]), inboxRow(p.b, m[1])}, inboxRow(p.b, m[0]), inboxRow(p.b, m[1]))
		return nil
	})
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m3"}) {
		t.Errorf("waiting %v; want [m3]", got)
	}
	n := sendDirect(t, st, p.a, p.b, "n", 1)
	update(t, st, func(tx store.Tx) error {
		ds, err := tx.PendingFor(1, []int64{p.b.ID}, 10, 10)
		if err != nil || len(ds) != 2 {
			return fmt.Errorf("pending = %+v, %v; want m3, n1", ds, err)
		}
		if _, err := tx.ResetDelivered(p.b.ID); err != nil {
			return err
		}
		mark(tx, nil, inboxRow(p.b, m[2]), inboxRow(p.b, n[0])) // m1 and m2 wait again
		return nil
	})
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"m1", "m2", "m3", "n1"}) {
		t.Errorf("waiting %v after a reset between the fetch and the mark; want [m1 m2 m3 n1]", got)
	}
}

// Acknowledging one message at a time: the next in order moves the cursor;
// one with a message before it unacknowledged is remembered out of order;
// another user's message, or one acknowledged already, changes nothing; and
// the one before a remembered one takes the cursor past both.
func testInboxAckNextInOrder(t *testing.T, newDSN NewDSN) {
	st, p := setupPresent(t, newDSN, 1, 1)
	m1 := sendDirect(t, st, p.a, p.b, "m", 1)
	c1 := sendDirect(t, st, p.a, p.c, "c", 1)
	m := append(m1, sendDirect(t, st, p.a, p.b, "n", 3)...) // m1, n1-n3: m[0..3]
	fetchMark(t, st, 1)
	ack := func(seq int64, want int, what string) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			if n, err := tx.AckSeqs(p.b.ID, []int64{seq}); err != nil || n != want {
				t.Errorf("AckSeqs(b, %s) = %d, %v; want %d", what, n, err, want)
			}
			return nil
		})
	}
	count := func(want int) {
		t.Helper()
		update(t, st, func(tx store.Tx) error {
			if n, err := tx.PendingCount(p.b.ID); err != nil || n != want {
				t.Errorf("PendingCount(b) = %d, %v; want %d", n, err, want)
			}
			return nil
		})
	}
	ack(m[0], 1, "m1")
	ack(c1[0], 0, "c1, another user's message")
	count(3)
	ack(m[2], 1, "n2, n1 unacknowledged before it")
	count(2)
	update(t, st, func(tx store.Tx) error { _, err := tx.ResetDelivered(p.b.ID); return err })
	if got := waiting(t, st, 1); !slices.Equal(got, []string{"n1", "n3"}) {
		t.Errorf("after a reset, waiting %v; want [n1 n3] (n2 acknowledged, n1 not)", got)
	}
	ack(m[1], 1, "n1, before the remembered n2")
	ack(m[0], 0, "m1 again")
	ack(m[1], 0, "n1 again")
	count(1)
	// The cursor passed n2: m1, n1 and n2 go (c1, handed to c, and n3
	// wait).
	update(t, st, func(tx store.Tx) error {
		res, err := tx.PruneMessages(time.Now().Add(time.Hour), 0, 100)
		if err != nil || res.Deleted != 3 {
			t.Errorf("pruned %+v, %v; want 3 deleted (m1, n1, n2)", res, err)
		}
		return nil
	})
	ack(m[3], 1, "n3")
	count(0)
	update(t, st, func(tx store.Tx) error { _, err := tx.ResetDelivered(p.b.ID); return err })
	if got := waiting(t, st, 1); len(got) != 0 {
		t.Errorf("after every acknowledgement and a reset, waiting %v", got)
	}
}
