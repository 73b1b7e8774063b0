package client

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
)

// TestLoginRefused: DialV2 goes on after a full node (until every node in
// a row was full) and after refusals that waiting may cure, and stops at
// the others; USER_ONLINE stops it only with FailFast, after the grace.
func TestLoginRefused(t *testing.T) {
	refusal := func(code protocol.Code) error {
		return fmt.Errorf("login: %w", &ServerError{Message: "no", Code: code})
	}
	now, old := time.Now(), time.Now().Add(-2*loginGrace)
	for _, tc := range []struct {
		name           string
		err            error
		refused, nodes int
		failFast       bool
		start          time.Time
		wantRefused    int
		wantEnd        bool
	}{
		{"full, others left", refusal(protocol.CodeServerFull), 0, 3, false, now, 1, false},
		{"full, the last", refusal(protocol.CodeTooManyConns), 2, 3, false, now, 3, true},
		{"busy", refusal(protocol.CodeBusy), 2, 3, false, now, 0, false},
		{"shutting down", refusal(protocol.CodeShutdown), 1, 3, true, old, 0, false},
		{"unavailable", refusal(protocol.CodeUnavailable), 1, 3, false, now, 0, false},
		{"bad password", refusal("BAD_PASSWORD"), 1, 3, false, now, 1, true},
		{"online, in the grace", refusal(protocol.CodeUserOnline), 1, 3, true, now, 0, false},
		{"online, no fail fast", refusal(protocol.CodeUserOnline), 1, 3, false, old, 0, false},
		{"online, after the grace", refusal(protocol.CodeUserOnline), 1, 3, true, old, 1, true},
		{"not a refusal", errors.New("read: broken pipe"), 2, 3, true, old, 0, false},
	} {
		refused, end := loginRefused(tc.err, tc.refused, tc.nodes, tc.failFast, tc.start)
		if refused != tc.wantRefused || end != tc.wantEnd {
			t.Errorf("%s: got refused %d, end %v; want %d, %v", tc.name, refused, end, tc.wantRefused, tc.wantEnd)
		}
	}
}

// TestReadError: the error a connection ends with after reading failed.
func TestReadError(t *testing.T) {
	broken := errors.New("reset by peer")
	for _, tc := range []struct {
		err     error
		closing bool
		is      error
		text    string
	}{
		{io.EOF, true, ErrClosed, ErrClosed.Error()},
		{io.EOF, false, ErrServerClosed, ErrServerClosed.Error()},
		{ErrLineTooLong, false, ErrLineTooLong, ErrLineTooLong.Error()},
		{net.ErrClosed, false, net.ErrClosed, "connection lost: " + net.ErrClosed.Error()},
		{broken, false, broken, "read: reset by peer"},
	} {
		got := readError(tc.err, tc.closing)
		if !errors.Is(got, tc.is) || got.Error() != tc.text {
			t.Errorf("readError(%v, %v) = %v; want %q (is %v)", tc.err, tc.closing, got, tc.text, tc.is)
		}
	}
}
