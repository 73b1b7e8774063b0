package node

// runs on: the peer worker's goroutine (peerWorker): it alone writes the
// health line and owns its healthRecord; the status it writes comes from
// the run loop (Status asks it through statusCh).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/store"
)

// The node's word on itself in the store (store.Control.SetHealth), for
// `ringnode status`: empty while it serves, otherwise what is wrong; the
// store stamps each report with its own clock, so a node that stops
// reporting (stopped, or cut from the store) shows by its age.
//
// Runs on: the peer worker (peerWorker), which reads the node's status
// from the run loop (Status) and owns the healthRecord.

// healthEvery is how often a node reports its health when it has not
// changed: status takes a node silent for several of these as gone.
const healthEvery = 2 * time.Second

// healthRecord is what the peer worker last reported, and when.
type healthRecord struct {
	line string
	at   time.Time
}

// healthLine is what a node in status st says of itself: empty while it
// serves. Whether it is in the ring is the store's ring's to say (its
// successor pointers), not the node's.
func healthLine(st Status) string {
	var parts []string
	if st.VisitsFailing {
		parts = append(parts, "most of its critical sections fail (the store answers, but not its visits)")
	}
	if st.IsCoord && len(st.AvoidedLinks) > 0 {
		links := make([]string, 0, len(st.AvoidedLinks))
		for _, l := range st.AvoidedLinks {
			links = append(links, fmt.Sprintf("%d-%d", l[0], l[1]))
		}
		parts = append(parts, "avoids links that keep failing: "+strings.Join(links, ", "))
	}
	return strings.Join(parts, "; ")
}

// reportHealth writes the node's health line when it changed, and every
// healthEvery otherwise; a failed write is tried again at the next check.
func (n *Node) reportHealth(ctx context.Context, rec *healthRecord) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	st, ok := n.Status(sctx)
	cancel()
	if !ok {
		return
	}
	line := healthLine(st)
	if len(line) > store.MaxHealthLen {
		line = line[:store.MaxHealthLen-3] + "..."
	}
	if line == rec.line && time.Since(rec.at) < healthEvery {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, n.cfg.StoreTimeout)
	defer cancel()
	if err := n.st.SetHealth(wctx, n.cfg.Ring.ID, line); err != nil {
		return // the store is out of reach: its silence shows in status
	}
	rec.line, rec.at = line, time.Now()
}
