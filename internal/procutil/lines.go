package procutil

import (
	"bytes"
	"io"
	"sync"
)

// maxLine is the longest line a prefixWriter holds back waiting for its
// end; a longer one is written out in pieces of this size.
const maxLine = 1 << 20

// prefixWriter writes what it is given to w line by line, each line with
// prefix before it (and without a carriage return before its newline).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	part   []byte // the line begun and not yet ended
}

func (l *prefixWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.part = append(l.part, b...)
			if len(l.part) >= maxLine {
				l.line()
			}
			break
		}
		l.part = append(l.part, b[:i]...)
		l.line()
		b = b[i+1:]
	}
	return n, nil
}

// line writes the line held, prefixed, and forgets it. A failed write is
// not the process's concern: its output goes on.
func (l *prefixWriter) line() {
	text := bytes.TrimSuffix(l.part, []byte("\r"))
	out := make([]byte, 0, len(l.prefix)+len(text)+1)
	out = append(append(append(out, l.prefix...), text...), '\n')
	_, _ = l.w.Write(out)
	l.part = l.part[:0]
}

// flush writes out a last line that has no newline.
func (l *prefixWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.part) > 0 {
		l.line()
	}
}
