package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/ringchat/ringchat/internal/client"
)

// printer writes events, one per line, as text or as v1 JSON objects. It is
// safe for concurrent use. Informational lines (help, prompts, the current
// conversation) go to out in text mode and to info in JSON mode, so that a
// script reading JSON sees only events.
type printer struct {
	mu   sync.Mutex
	out  io.Writer
	info io.Writer
	json bool
	me   string // the logged-in user, shown as "you"
	bye  bool   // hanging up: the server closing is expected
	now  func() time.Time
}

func newPrinter(out, info io.Writer, json bool) *printer {
	return &printer{out: out, info: info, json: json, now: time.Now}
}

func (p *printer) setUser(me string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.me = me
}

// hangingUp tells the printer that the client is closing, so that the
// server closing the connection is no longer an error.
func (p *printer) hangingUp() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bye = true
}

// event prints one event. Local events print as errors.
func (p *printer) event(ev client.Event) {
	switch ev := ev.(type) {
	case client.ProtocolError:
		p.errorf("bad message from server: %v", ev.Err)
		return
	case client.Disconnected:
		p.mu.Lock()
		expected := p.bye && errors.Is(ev.Err, client.ErrServerClosed)
		p.mu.Unlock()
		if !expected {
			p.errorf("connection lost: %v", ev.Err)
		}
		return
	case client.Alive:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, err := client.Encode(ev)
		if err != nil {
			b = []byte(fmt.Sprintf(`{"messageType":"ERROR","errorMessage":%q}`, err.Error()))
		}
		fmt.Fprintf(p.out, "%s\n", b)
		return
	}
	fmt.Fprintln(p.out, p.textLocked(ev))
}

func (p *printer) textLocked(ev client.Event) string {
	switch ev := ev.(type) {
	case client.ChatMessage:
		at, err := ev.Time()
		if err != nil {
			at = p.now()
		}
		to := ev.To.String()
		if !ev.To.Group && ev.To.Name == p.me {
			to = "you"
		}
		return fmt.Sprintf("[%s] %s -> %s: %s", at.Format("15:04:05"), clean(ev.From), clean(to), clean(ev.Content))
	case client.Login:
		return "logged in as " + clean(ev.Username)
	case client.JoinGroup:
		return "joined #" + clean(ev.Group)
	case client.LeaveGroup:
		return "left #" + clean(ev.Group)
	case client.ErrorMessage:
		return "error: " + clean(ev.Message)
	default:
		return fmt.Sprintf("%T", ev)
	}
}

// errorf prints a local or server error: "error: ..." or an ERROR object.
func (p *printer) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, _ := client.Encode(client.ErrorMessage{Message: msg})
		fmt.Fprintf(p.out, "%s\n", b)
		return
	}
	fmt.Fprintln(p.out, "error: "+clean(msg))
}

// infof prints an informational line (not an event).
func (p *printer) infof(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.out
	if p.json {
		w = p.info
	}
	fmt.Fprintf(w, format+"\n", args...)
}

// clean makes text from the network safe to print on one terminal line:
// control characters (escape sequences, newlines) are shown escaped.
func clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case isControl(r) && r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isControl reports control characters, bidirectional overrides and line
// separators: anything that could move the cursor or disguise text.
func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}
