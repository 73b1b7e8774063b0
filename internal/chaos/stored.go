package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// storedRow is a message as the store has it.
type storedRow struct {
	seq    int64
	stored time.Time
}

// checkShownStored: no message was shown before it was stored. Every
// message a client was shown is in the store's messages table (committed,
// not rolled back) under the seq it was shown with, and was stamped
// stored (inside its transaction) before it was shown.
func (r *runner) checkShownStored(ctx context.Context, ev evidence) Check {
	name := "no delivery before STORED (every message shown is committed in the store, stamped before it was shown)"
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := r.sqlDB.QueryContext(ctx, `SELECT msg_id, msg_seq, stored_us FROM messages`)
	if err != nil {
		return Check{Name: name, OK: false, Detail: []string{"messages unreadable: " + err.Error()}}
	}
	defer rows.Close()
	byID := map[string]storedRow{}
	for rows.Next() {
		var id string
		var seq, us int64
		if err := rows.Scan(&id, &seq, &us); err != nil {
			return Check{Name: name, OK: false, Detail: []string{"messages unreadable: " + err.Error()}}
		}
		byID[id] = storedRow{seq: seq, stored: time.UnixMicro(us)}
	}
	if err := rows.Err(); err != nil {
		return Check{Name: name, OK: false, Detail: []string{"messages unreadable: " + err.Error()}}
	}
	bad, n := shownNotStored(ev.recs, byID)
	detail := append([]string{fmt.Sprintf("%d showings checked against %d stored messages, %d wrong", n, len(byID), len(bad))}, limit(bad, 10)...)
	return Check{Name: name, OK: len(bad) == 0, Detail: detail}
}

// shownNotStored lists the showings the store contradicts, and counts
// those checked.
func shownNotStored(recs map[string]*userRecords, byID map[string]storedRow) (bad []string, n int) {
	for _, u := range slices.Sorted(maps.Keys(recs)) {
		for _, s := range recs[u].shown {
			n++
			row, ok := byID[s.ID]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s was shown %s (seq %d, node %d), which the store does not have", u, s.ID, s.Seq, s.Node))
			case row.seq != s.Seq:
				bad = append(bad, fmt.Sprintf("%s was shown %s as seq %d; the store has seq %d", u, s.ID, s.Seq, row.seq))
			case s.At.Before(row.stored):
				bad = append(bad, fmt.Sprintf("%s was shown %s (seq %d) %s before it was stamped stored", u, s.ID, s.Seq, ms(row.stored.Sub(s.At))))
			}
		}
	}
	return bad, n
}

// checkAcrossMoves: nothing was shown twice across a client's move. A
// message that came again on the new connection must have been dropped
// by the client's id deduplication.
func checkAcrossMoves(ev evidence) Check {
	var twice []string
	again := 0
	for _, u := range ev.names {
		rec := ev.recs[u]
		conns := map[string][]int{}
		for _, s := range rec.shown {
			conns[s.ID] = append(conns[s.ID], s.Conn)
		}
		for _, id := range slices.Sorted(maps.Keys(conns)) {
			if cs := slices.Compact(slices.Sorted(slices.Values(conns[id]))); len(cs) > 1 {
				twice = append(twice, fmt.Sprintf("%s was shown %s on connections %v", u, id, cs))
			}
		}
		for _, raws := range rec.raw {
			seen := map[int]bool{}
			for _, x := range raws {
				seen[x.Conn] = true
			}
			again += max(0, len(seen)-1)
		}
	}
	detail := append([]string{fmt.Sprintf("%d messages came again on a later connection and were dropped by id; %d shown on two connections", again, len(twice))}, limit(twice, 10)...)
	return Check{Name: "nothing shown twice across a client's move", OK: len(twice) == 0, Detail: detail}
}
