package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// LineReader splits a TCP stream into frames, one per line, without ever
// buffering more than one maximum-size line.
type LineReader struct {
	br  *bufio.Reader
	max int
	err error // sticky
}

// NewLineReader returns a LineReader that refuses lines longer than max
// bytes (not counting the newline); max <= 0 means DefaultMaxSize. Use the
// Codec's MaxSize.
func NewLineReader(r io.Reader, max int) *LineReader {
	if max <= 0 {
		max = DefaultMaxSize
	}
	return &LineReader{br: bufio.NewReaderSize(r, max+1), max: max}
}

// Next returns the next line without its '\n', in a new slice. It returns an
// error wrapping ErrTooLarge as soon as the line being read exceeds the
// limit, io.EOF at the end of the stream, io.ErrUnexpectedEOF if the stream
// ends within a line (a frame cut short), or the reader's error. After an
// error every call returns the same error: close the connection.
func (l *LineReader) Next() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	line, err := l.br.ReadSlice('\n')
	n := len(line)
	if err == nil {
		n-- // the '\n'
	}
	switch {
	case n > l.max || errors.Is(err, bufio.ErrBufferFull):
		l.err = fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, l.max)
	case err == io.EOF && n == 0:
		l.err = io.EOF
	case err == io.EOF:
		l.err = io.ErrUnexpectedEOF
	case err != nil:
		l.err = err
	default:
		return bytes.Clone(line[:n]), nil
	}
	return nil, l.err
}

// WriteLine writes b and a '\n' in one Write call, so that writers that
// serialise their calls to w never interleave frames. It refuses b if it
// contains a newline.
func WriteLine(w io.Writer, b []byte) error {
	if bytes.IndexByte(b, '\n') >= 0 {
		return errors.New("wire: line contains a newline")
	}
	buf := make([]byte, len(b)+1)
	copy(buf, b)
	buf[len(b)] = '\n'
	_, err := w.Write(buf)
	return err
}

// ReadTextLine reads one line of client text of at most max bytes (not
// counting its "\n" or "\r\n") from br, holding at most max+2 bytes of it
// whatever br's size. A last line without a newline before EOF is returned
// with a nil error. A longer line returns tooLong; the stream is then out
// of step, and the caller closes it.
func ReadTextLine(br *bufio.Reader, max int, tooLong error) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > max+2 {
			return nil, tooLong
		}
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
		default:
			return nil, err
		}
		if len(line) > max {
			return nil, tooLong
		}
		return line, nil
	}
}
