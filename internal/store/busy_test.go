package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// storeAndHint stores ms as a visit does and reads where they wait (the
// token's hint), as the queue's visit does (internal/queue, storeAndHint).
func storeAndHint(tx Tx, ms []NewMessage, rcpts [][]int64, maxUsers int) ([]Waiting, error) {
	res, err := tx.InsertMessages(ms, rcpts)
	if err != nil {
		return nil, err
	}
	seqs := make([]int64, len(res))
	for i, r := range res {
		seqs[i] = r.Seq
	}
	return tx.WaitingFor(seqs, maxUsers)
}

// TestBusyVisitStatements: a busy visit's work as the queue runs it
// (store a batch of direct messages to several users here, say where they
// wait, fetch and mark them), then the acknowledgement of what was handed
// over, on both stores: the hint of new messages is one read of where
// their recipients are, and the fetch is one read of the users' cursors
// (inbox and groups) and one of their inboxes. Acknowledgements in order,
// out of order, again, and of another user's message move each cursor as
// far as what is acknowledged without a gap.
func TestBusyVisitStatements(t *testing.T) {
	scaleStores(t, func(t *testing.T, s *sqlStore) {
		seedUsers(t, s, 4)
		seed(t, s, "INSERT INTO presence (user_id, node_id, since_us) VALUES (2, 1, 0), (3, 1, 0), (4, 1, 0)")
		var stmts []string
		s.inspect = func(_ *sqlTx, q string, _ []any) { stmts = append(stmts, q) }
		defer func() { s.inspect = nil }()
		users := []int64{2, 3, 4}
		seq := int64(0)
		// round stores 3 messages to each of users 2-4 from user 1, with
		// WaitingFor, PendingFor and MarkDeliveredRows in the same
		// visit, and returns what was marked.
		round := func(r int) []RecipientSeq {
			t.Helper()
			var ms []NewMessage
			var rcpts [][]int64
			for i := range 3 {
				for _, u := range users {
					id := fmt.Sprintf("r%d-%d-%d", r, u, i)
					ms = append(ms, NewMessage{ID: id, SenderID: 1, ToUserID: u, Content: id, SentAt: time.Now(), NodeID: 1})
					rcpts = append(rcpts, []int64{u})
				}
			}
			var marked []RecipientSeq
			stmts = nil
			seq++
			if err := visit(t, s, seq, func(tx *sqlTx) error {
				w, err := storeAndHint(tx, ms, rcpts, 8)
				if err != nil {
					return err
				}
				if fmt.Sprint(w) != fmt.Sprint([]Waiting{{Node: 1, Users: users}}) {
					return fmt.Errorf("waiting %+v, want users 2-4 at node 1", w)
				}
				ds, err := tx.PendingFor(1, users, 64, 2000)
				if err != nil || len(ds) != 9 {
					return fmt.Errorf("pending %d, %v; want 9", len(ds), err)
				}
				rows := make([]RecipientSeq, len(ds))
				for i, d := range ds {
					rows[i] = d.Row()
					name := fmt.Sprint("u", d.RecipientID)
					if d.Recipient != name || d.ToUser != name || d.Sender != "u1" || d.ToGroup != "" || d.Content != d.ID {
						t.Errorf("delivery %+v: want from u1 to %s, its content its id", d, name)
					}
				}
				marked, _, err = tx.MarkDeliveredRows(1, rows)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(marked) != 9 {
				t.Fatalf("round %d: marked %v, want 9", r, marked)
			}
			return marked
		}
		ack := func(rows []RecipientSeq) int {
			t.Helper()
			var n int
			stmts = nil
			seq++
			if err := visit(t, s, seq, func(tx *sqlTx) error {
				var err error
				n, err = tx.AckRows(rows)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		cursor := func(u int64) (acked, sent int64) {
			t.Helper()
			if err := s.db.QueryRow(fmt.Sprintf("SELECT acked_seq, sent_seq FROM inbox_cursors WHERE user_id = %d", u)).Scan(&acked, &sent); err != nil {
				t.Fatal(err)
			}
			return acked, sent
		}
		last := func(rows []RecipientSeq, u int64) int64 {
			var hi int64
			for _, r := range rows {
				if r.RecipientID == u {
					hi = max(hi, r.Seq)
				}
			}
			return hi
		}

		r0 := round(0) // the users' inbox cursors are made
		first := round(1)
		if len(stmts) != 6 {
			t.Errorf("store, hint, fetch and mark took %d statements, want 6 (insert, where, cursors, inboxes, presence, mark):\n%s",
				len(stmts), strings.Join(stmts, "\n"))
		}
		// Round 0 is not acknowledged: round 1's runs are not right
		// after the cursors, so nothing moves the short way; the long
		// way remembers them.
		if n := ack(first); n != 9 {
			t.Errorf("acknowledging round 1 with round 0 open: n = %d, want 9 (remembered)", n)
		}
		for _, u := range users {
			if acked, _ := cursor(u); acked != 0 {
				t.Errorf("user %d: acked_seq %d after acknowledging out of order, want 0", u, acked)
			}
		}
		second := round(2)
		// Everyone's round 0: the cursors pass round 0 and round 1 (the
		// long way, past the remembered acknowledgements).
		if n := ack(r0); n != 9 {
			t.Errorf("acknowledging round 0: n = %d, want 9", n)
		}
		for _, u := range users {
			if acked, _ := cursor(u); acked != last(first, u) {
				t.Errorf("user %d: acked_seq %d, want %d (round 0, then round 1 acknowledged before)", u, acked, last(first, u))
			}
		}
		// Round 2 in order, every user.
		if n := ack(second); n != 9 {
			t.Errorf("acknowledging round 2 in order: n = %d, want 9", n)
		}
		for _, u := range users {
			if acked, sent := cursor(u); acked != last(second, u) || sent != last(second, u) {
				t.Errorf("user %d: cursor at %d/%d, want %d", u, acked, sent, last(second, u))
			}
		}
		// Round 3: user 3 acknowledges its second and third message only,
		// the others all of theirs.
		third := round(3)
		var some []RecipientSeq
		skipped := int64(0)
		for _, r := range third {
			if r.RecipientID == 3 && skipped == 0 {
				skipped = r.Seq
				continue
			}
			some = append(some, r)
		}
		if n := ack(some); n != 8 {
			t.Errorf("acknowledging round 3 but one: n = %d, want 8", n)
		}
		for _, u := range users {
			want := last(third, u)
			if u == 3 {
				want = last(second, u)
			}
			if acked, _ := cursor(u); acked != want {
				t.Errorf("user %d: acked_seq %d, want %d", u, acked, want)
			}
		}
		// Again, and the one skipped: only it is new.
		if n := ack(slices.Concat(some, []RecipientSeq{{RecipientID: 3, Seq: skipped}})); n != 1 {
			t.Errorf("acknowledging round 3 again with the one skipped: n = %d, want 1", n)
		}
		if acked, _ := cursor(3); acked != last(third, 3) {
			t.Errorf("user 3: acked_seq %d, want %d", acked, last(third, 3))
		}
		// User 2 acknowledges its first and third message with user 3's
		// first in their place of its second (as many messages as its
		// range holds): its cursor moves over the first alone and
		// remembers the third; user 3's is not theirs.
		fourth := round(4)
		of := func(u int64) []int64 {
			var out []int64
			for _, r := range fourth {
				if r.RecipientID == u {
					out = append(out, r.Seq)
				}
			}
			slices.Sort(out)
			return out
		}
		mixed := []RecipientSeq{{RecipientID: 2, Seq: of(2)[0]}, {RecipientID: 2, Seq: of(3)[0]}, {RecipientID: 2, Seq: of(2)[2]}}
		if n := ack(mixed); n != 2 {
			t.Errorf("user 2 acknowledging its first and third and user 3's: n = %d, want 2", n)
		}
		if acked, _ := cursor(2); acked != of(2)[0] {
			t.Errorf("user 2: acked_seq %d, want %d (its second is not acknowledged)", acked, of(2)[0])
		}
		if acked, _ := cursor(3); acked != last(third, 3) {
			t.Errorf("user 3: acked_seq %d moved by user 2's acknowledgement, want %d", acked, last(third, 3))
		}
	})
}
