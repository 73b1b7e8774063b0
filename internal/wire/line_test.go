package wire_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/wire"
)

func TestLineReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		wantErr error
	}{
		{"empty stream", "", 10, nil, io.EOF},
		{"lines", "a\nbb\n\nccc\n", 10, []string{"a", "bb", "", "ccc"}, io.EOF},
		{"exactly max", "0123456789\nx\n", 10, []string{"0123456789", "x"}, io.EOF},
		{"one over max", "ok\n0123456789A\nnever\n", 10, []string{"ok"}, wire.ErrTooLarge},
		{"long line, no newline", "ok\n" + strings.Repeat("z", 1000), 10, []string{"ok"}, wire.ErrTooLarge},
		{"cut short", "ok\npartial frame", 100, []string{"ok"}, io.ErrUnexpectedEOF},
		{"CR kept", "a\r\n", 10, []string{"a\r"}, io.EOF},
		{"default max", strings.Repeat("y", wire.DefaultMaxSize) + "\n", 0, []string{strings.Repeat("y", wire.DefaultMaxSize)}, io.EOF},
		{"default max + 1", strings.Repeat("y", wire.DefaultMaxSize+1) + "\n", 0, nil, wire.ErrTooLarge},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for _, tc := range tests {
		for rname, wrap := range readers {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				lr := wire.NewLineReader(wrap(strings.NewReader(tc.in)), tc.max)
				var got []string
				var err error
				for {
					var line []byte
					if line, err = lr.Next(); err != nil {
						break
					}
					got = append(got, string(line))
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("lines mismatch (-want +got):\n%s", diff)
				}
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v, want %v", err, tc.wantErr)
				}
				if _, again := lr.Next(); again != err {
					t.Errorf("Next after %v returned %v", err, again)
				}
			})
		}
	}
}

// A huge line is refused after reading little more than the limit.
func TestLineReaderDoesNotBufferLongLines(t *testing.T) {
	r := &countingReader{r: iotest.OneByteReader(strings.NewReader(strings.Repeat("x", 10<<20)))}
	lr := wire.NewLineReader(r, 1000)
	if _, err := lr.Next(); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("Next: %v, want ErrTooLarge", err)
	}
	if r.n > 1001 {
		t.Errorf("read %d bytes to refuse a line over 1000", r.n)
	}
}

// A reader's error is passed on.
func TestLineReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	lr := wire.NewLineReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), 10)
	if line, err := lr.Next(); string(line) != "a" || err != nil {
		t.Fatalf("Next = %q, %v", line, err)
	}
	if _, err := lr.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next: %v, want %v", err, boom)
	}
}

// The returned line stays valid after further reads.
func TestLineReaderLinesAreCopies(t *testing.T) {
	lr := wire.NewLineReader(strings.NewReader("first\nsecond\n"), 100)
	a, _ := lr.Next()
	b, _ := lr.Next()
	if string(a) != "first" || string(b) != "second" {
		t.Errorf("lines %q, %q", a, b)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

type countingWriter struct {
	bytes.Buffer
	calls int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.calls++
	return w.Buffer.Write(p)
}

func TestWriteLine(t *testing.T) {
	var w countingWriter
	if err := wire.WriteLine(&w, []byte(`{"h":{}}`)); err != nil {
		t.Fatal(err)
	}
	if w.String() != "{\"h\":{}}\n" || w.calls != 1 {
		t.Errorf("wrote %q in %d calls, want one call", w.String(), w.calls)
	}
	if err := wire.WriteLine(&w, []byte("two\nlines")); err == nil {
		t.Error("WriteLine of a line with a newline: no error")
	}
	boom := errors.New("broken pipe")
	if err := wire.WriteLine(iotestErrWriter{boom}, []byte("x")); !errors.Is(err, boom) {
		t.Errorf("WriteLine to a failing writer: %v", err)
	}
}

type iotestErrWriter struct{ err error }

func (w iotestErrWriter) Write([]byte) (int, error) { return 0, w.err }

func TestReadTextLine(t *testing.T) {
	tooLong := errors.New("too long")
	const max = 8
	// A reader buffer smaller than a line: lines come in fragments.
	br := bufio.NewReaderSize(strings.NewReader("abc\r\n12345678\n\n123456789\nx"), 16)
	for _, want := range []string{"abc", "12345678", ""} {
		got, err := wire.ReadTextLine(br, max, tooLong)
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if _, err := wire.ReadTextLine(br, max, tooLong); err != tooLong {
		t.Fatalf("9-byte line: err %v, want tooLong", err)
	}
	// A last line without its newline.
	br = bufio.NewReaderSize(strings.NewReader("last"), 16)
	if got, err := wire.ReadTextLine(br, max, tooLong); err != nil || string(got) != "last" {
		t.Fatalf("last line: %q, %v", got, err)
	}
	if _, err := wire.ReadTextLine(br, max, tooLong); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v, want EOF", err)
	}
	// A long line is refused once max+2 bytes are read, not at its end.
	r := &countingReader{r: strings.NewReader(strings.Repeat("z", 1<<20))}
	if _, err := wire.ReadTextLine(bufio.NewReaderSize(r, 16), max, tooLong); err != tooLong {
		t.Fatalf("endless line: %v", err)
	}
	if r.n > 64 {
		t.Fatalf("read %d bytes of an endless line", r.n)
	}
}
