package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// testAwayAndStatus: an away message is set, read back by every path that
// shows it (UserByName, StatusOf, Online, GroupMembersPage), and cleared;
// StatusOf says where a user is logged in.
func testAwayAndStatus(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	var a store.User
	update(t, st, func(tx store.Tx) error {
		a, _, _ = tx.EnsureUser("a")
		_, _, _ = tx.EnsureUser("b")
		away, err := tx.SetAway(a.ID, "at lunch")
		if err != nil || away.Message != "at lunch" || away.Since.IsZero() {
			t.Errorf("SetAway = %+v, %v", away, err)
		}
		if _, err := tx.SetAway(a.ID, strings.Repeat("x", store.MaxAwayLen+1)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("an over-long away message: err = %v, want ErrInvalid", err)
		}
		if _, err := tx.SetAway(999999, "x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("away of no user: err = %v, want ErrNotFound", err)
		}
		if u, err := tx.UserByName("a"); err != nil || u.Away.Message != "at lunch" {
			t.Errorf("UserByName = %+v, %v", u, err)
		}
		if err := tx.SetPresence(a.ID, 3); err != nil {
			return err
		}
		s, err := tx.StatusOf("a")
		if err != nil || s.ID != a.ID || s.NodeID != 3 || s.Since.IsZero() || s.Away.Message != "at lunch" {
			t.Errorf("StatusOf(a) = %+v, %v", s, err)
		}
		s, err = tx.StatusOf("b")
		if err != nil || s.NodeID != 0 || !s.Since.IsZero() || s.Away.Message != "" {
			t.Errorf("StatusOf(b), offline = %+v, %v", s, err)
		}
		if _, err := tx.StatusOf("nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("StatusOf(nobody): err = %v", err)
		}
		return nil
	})
	on, err := st.Online(ctx)
	if err != nil || len(on) != 1 || on[0].Away.Message != "at lunch" {
		t.Errorf("Online = %+v, %v", on, err)
	}
	update(t, st, func(tx store.Tx) error {
		if away, err := tx.SetAway(a.ID, ""); err != nil || away.Message != "" || !away.Since.IsZero() {
			t.Errorf("clearing: %+v, %v", away, err)
		}
		if u, _ := tx.UserByName("a"); u.Away.Message != "" {
			t.Errorf("cleared away still %+v", u.Away)
		}
		return nil
	})
}

// testMembersPage: a group's members come in pages by user id, each with
// its presence and away status, whatever the group's size.
func testMembersPage(t *testing.T, newDSN NewDSN) {
	st := OpenQueue(t, newDSN(t))
	update(t, st, func(tx store.Tx) error {
		g, _, _ := tx.EnsureGroup("big")
		var ids []int64
		for i := range 25 {
			u, _, err := tx.EnsureUser(fmt.Sprintf("m%02d", i))
			if err != nil {
				return err
			}
			ids = append(ids, u.ID)
			if _, err := tx.JoinGroup(g.ID, u.ID); err != nil {
				return err
			}
		}
		if err := tx.SetPresence(ids[3], 2); err != nil {
			return err
		}
		if _, err := tx.SetAway(ids[4], "gone fishing"); err != nil {
			return err
		}
		var all []store.Member
		after := int64(0)
		for pages := 0; ; pages++ {
			page, err := tx.GroupMembersPage(g.ID, after, 10)
			if err != nil {
				return err
			}
			all = append(all, page...)
			if len(page) < 10 {
				if pages != 2 {
					t.Errorf("%d full pages, want 2", pages)
				}
				break
			}
			after = page[len(page)-1].UserID
		}
		if len(all) != 25 {
			t.Fatalf("%d members paged, want 25", len(all))
		}
		for i, m := range all {
			if m.UserID != ids[i] || m.Name != fmt.Sprintf("m%02d", i) {
				t.Errorf("member %d = %+v", i, m)
			}
		}
		if all[3].NodeID != 2 || all[2].NodeID != 0 || all[4].Away.Message != "gone fishing" || all[5].Away.Message != "" {
			t.Errorf("presence and away: %+v %+v %+v %+v", all[2], all[3], all[4], all[5])
		}
		if _, err := tx.GroupMembersPage(g.ID, 0, store.MaxMembersPage+2); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("oversized page: err = %v", err)
		}
		return nil
	})
}

// testReadMarks: a read mark moves only forward, never past the newest
// message stored, and is per reader and peer.
func testReadMarks(t *testing.T, newDSN NewDSN) {
	st := Open(t, newDSN(t))
	p, _ := setupPeople(t, st)
	update(t, st, func(tx store.Tx) error {
		if n, err := tx.ReadMark(p.b.ID, p.a.ID); err != nil || n != 0 {
			t.Errorf("no mark yet: %d, %v", n, err)
		}
		if _, _, err := tx.MarkRead(p.b.ID, p.a.ID, 1); err != nil {
			t.Errorf("a mark before any message: %v", err)
		}
		var seqs []int64
		for i := range 3 {
			seq, _, err := tx.InsertMessage(store.NewMessage{ID: fmt.Sprint("r", i), SenderID: p.a.ID, ToUserID: p.b.ID,
				Content: "hi", SentAt: time.Now(), NodeID: 1}, []int64{p.b.ID})
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		for _, step := range []struct {
			seq   int64
			want  int64
			moved bool
		}{
			{seqs[1], seqs[1], true},
			{seqs[0], seqs[1], false},       // backwards: stays
			{seqs[1], seqs[1], false},       // the same
			{seqs[2] + 1000, seqs[2], true}, // past the newest: the newest
		} {
			got, moved, err := tx.MarkRead(p.b.ID, p.a.ID, step.seq)
			if err != nil || got != step.want || moved != step.moved {
				t.Errorf("MarkRead(%d) = %d, %v, %v; want %d, %v", step.seq, got, moved, err, step.want, step.moved)
			}
		}
		if n, _ := tx.ReadMark(p.b.ID, p.a.ID); n != seqs[2] {
			t.Errorf("ReadMark = %d, want %d", n, seqs[2])
		}
		if n, _ := tx.ReadMark(p.a.ID, p.b.ID); n != 0 {
			t.Errorf("the other direction has a mark of its own: %d", n)
		}
		if _, _, err := tx.MarkRead(p.b.ID, p.a.ID, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("MarkRead(0): err = %v, want ErrInvalid", err)
		}
		return nil
	})
}
