package transport

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestDropLogQuiet: a frame read from a link just replaced is counted, and
// logged never (relinks make them in normal operation).
func TestDropLogQuiet(t *testing.T) {
	var buf bytes.Buffer
	d := newDropLog(zerolog.New(&buf))
	d.quiet(ReasonReplacedLink)
	d.quiet(ReasonReplacedLink)
	if c := d.counts(); c[ReasonReplacedLink] != 2 {
		t.Errorf("counts %v, want 2 replaced_link", c)
	}
	if buf.Len() != 0 {
		t.Errorf("logged %q, want nothing", buf.String())
	}
}

func TestDropLogRateLimit(t *testing.T) {
	var buf bytes.Buffer
	d := newDropLog(zerolog.New(&buf))
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	for range 5 {
		d.drop(ReasonBadMAC, "udp", "10.0.0.1:7001", errors.New("wire: bad MAC"))
	}
	d.drop(ReasonTooLarge, "inbound", "10.0.0.2:5000", errors.New("wire: frame too large"))
	if l := lines(); len(l) != 2 {
		t.Fatalf("logged %d lines, want one per reason:\n%s", len(l), buf.String())
	}
	now = now.Add(999 * time.Millisecond)
	d.drop(ReasonBadMAC, "udp", "10.0.0.1:7001", errors.New("wire: bad MAC"))
	if l := lines(); len(l) != 2 {
		t.Fatalf("logged again within the second:\n%s", buf.String())
	}
	now = now.Add(time.Millisecond)
	d.drop(ReasonBadMAC, "udp", "10.0.0.1:7001", errors.New("wire: bad MAC"))
	l := lines()
	if len(l) != 3 || !strings.Contains(l[2], `"suppressed":5`) || !strings.Contains(l[2], `"level":"warn"`) ||
		!strings.Contains(l[2], `"reason":"bad_mac"`) {
		t.Fatalf("after a second, want a line with the 5 suppressed drops:\n%s", buf.String())
	}
	if c := d.counts(); c[ReasonBadMAC] != 7 || c[ReasonTooLarge] != 1 {
		t.Errorf("counts %v, want 7 bad MAC and 1 too large", c)
	}
}

func TestEventQueueOrderAndRoom(t *testing.T) {
	q := newEventQueue(1)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() { q.run(done); close(stopped) }()
	const n = 10 * frameQueueLimit
	go func() {
		for i := range n {
			if !q.waitRoom(done) {
				return
			}
			q.push(Event{Kind: EventFrame, Peer: int64(i)})
		}
	}()
	for i := range n {
		if ev := <-q.out; ev.Peer != int64(i) {
			t.Fatalf("event %d has peer %d: out of order", i, ev.Peer)
		}
	}
	// A full queue makes waitRoom wait, until done.
	for range frameQueueLimit + 2 {
		q.push(Event{})
	}
	waited := make(chan bool)
	go func() { waited <- q.waitRoom(done) }()
	close(done)
	if <-waited {
		t.Error("waitRoom on a full queue returned true")
	}
	<-stopped
}
