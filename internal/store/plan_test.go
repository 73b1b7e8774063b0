package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// maxPlanRows bounds the rows one statement of a visit may read at the
// sizes the scale tests build (hundreds of thousands of messages, a
// backlog of 150,000, a group timeline of 50,000): a plan that walks the
// history, a backlog or a timeline reads far more.
const maxPlanRows = 5000

// planCheck looks at the plan of every statement a visit runs (see
// sqlStore.inspect). On MariaDB it runs the statement under ANALYZE in the
// visit's transaction (inside a savepoint rolled back for writes) and
// counts the rows each table access read (r_loops × r_rows); on SQLite it
// reads EXPLAIN QUERY PLAN and refuses a full scan of a table.
type planCheck struct {
	t  *testing.T
	mu sync.Mutex
	// seen: statements looked at; worst: the largest count and its statement.
	seen  int
	worst float64
	which string
	bad   []string
}

// checkPlans looks at the plans of every statement s runs until the test
// (or the returned stop) ends, and fails the test on a plan that reads
// more than maxPlanRows rows or scans a whole table.
func checkPlans(t *testing.T, s *sqlStore) (stop func()) {
	t.Helper()
	c := &planCheck{t: t}
	s.inspect = c.inspect
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		s.inspect = nil
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.seen == 0 {
			t.Error("plan check: no statement looked at")
		}
		for _, b := range c.bad {
			t.Error(b)
		}
		t.Logf("plan check: %d statements, the largest read %.0f rows: %.120s", c.seen, c.worst, c.which)
	}
	t.Cleanup(stop)
	return stop
}

func (c *planCheck) inspect(tx *sqlTx, q string, args []any) {
	verb := strings.ToUpper(strings.Fields(strings.TrimLeft(q, " (\n\t"))[0])
	if verb != "SELECT" && verb != "WITH" && verb != "UPDATE" && verb != "DELETE" {
		return // INSERT ... VALUES: the rows it is given
	}
	var rows float64
	var problem string
	var err error
	if tx.s.d.name == "mysql" {
		rows, err = c.analyze(tx, verb, q, args)
		if err == nil && rows > maxPlanRows {
			problem = fmt.Sprintf("reads %.0f rows (at most %d)", rows, maxPlanRows)
		}
	} else {
		problem, err = c.explainSQLite(tx, q, args)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen++
	if rows > c.worst {
		c.worst, c.which = rows, q
	}
	switch {
	case err != nil:
		c.bad = append(c.bad, fmt.Sprintf("plan check of %.200s: %v", q, err))
	case problem != "":
		c.bad = append(c.bad, fmt.Sprintf("plan of %.300s: %s", q, problem))
	}
}

// analyze runs q under MariaDB's ANALYZE and returns the rows its table
// accesses read.
func (c *planCheck) analyze(tx *sqlTx, verb, q string, args []any) (float64, error) {
	write := verb == "UPDATE" || verb == "DELETE"
	if write {
		if _, err := tx.tx.ExecContext(tx.ctx, "SAVEPOINT plan_check"); err != nil {
			return 0, err
		}
	}
	var doc string
	err := tx.tx.QueryRowContext(tx.ctx, "ANALYZE FORMAT=JSON "+q, args...).Scan(&doc)
	if write {
		if _, rerr := tx.tx.ExecContext(tx.ctx, "ROLLBACK TO SAVEPOINT plan_check"); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return 0, err
	}
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return 0, err
	}
	return tableRows(v), nil
}

// tableRows sums r_loops × r_rows over the table accesses of an ANALYZE
// FORMAT=JSON document (an UPDATE's or DELETE's table has no r_loops).
func tableRows(v any) float64 {
	var sum float64
	switch v := v.(type) {
	case map[string]any:
		if tb, ok := v["table"].(map[string]any); ok {
			loops, ok := tb["r_loops"].(float64)
			if !ok {
				loops = 1 // UPDATE and DELETE: one pass
			}
			rows, _ := tb["r_rows"].(float64)
			sum += loops * rows
		}
		for _, x := range v {
			sum += tableRows(x)
		}
	case []any:
		for _, x := range v {
			sum += tableRows(x)
		}
	}
	return sum
}

// explainSQLite reads SQLite's plan of q and names a full scan of a table
// (SCAN of a table, with or without a covering index, as opposed to a
// SEARCH by key or a scan of a subquery's few rows).
func (c *planCheck) explainSQLite(tx *sqlTx, q string, args []any) (string, error) {
	rows, err := tx.tx.QueryContext(tx.ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var scans []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		if table, ok := strings.CutPrefix(detail, "SCAN "); ok && !scanOfFewRows(table) {
			scans = append(scans, detail)
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(scans) > 0 {
		return "full scan: " + strings.Join(scans, "; "), nil
	}
	return "", nil
}

// scanOfFewRows: a SCAN of a subquery's result (q0, w3, gc: the group
// cursors a fetch reads, at most maxCursorRows; a CTE) or of a table
// bounded by what is online (presence, nodes), not by the history.
func scanOfFewRows(detail string) bool {
	name := strings.Fields(detail)[0]
	for _, p := range []string{"q", "w"} {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	switch name {
	case "presence", "p", "nodes", "CONSTANT", "gc":
		return true
	}
	return false
}
