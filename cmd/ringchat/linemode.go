package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ringchat/ringchat/internal/client"
)

// maxInputLine bounds one line of standard input.
const maxInputLine = client.MaxLineBytes

// input reads standard input in its own goroutine, so that the line loop
// can also notice a lost connection while the user is not typing.
type input struct {
	lines chan string
	stop  chan struct{}
	err   error // valid once lines is closed
}

func readInput(r io.Reader) *input {
	in := &input{lines: make(chan string), stop: make(chan struct{})}
	go func() {
		defer close(in.lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), maxInputLine)
		for sc.Scan() {
			select {
			case in.lines <- sc.Text():
			case <-in.stop:
				return
			}
		}
		in.err = sc.Err()
	}()
	return in
}

// quitGrace bounds how long /quit and end of input wait for the server to
// close after the client half-closed, printing what still arrives.
const quitGrace = time.Second

// hangUp half-closes conn, so that the server sees end of input after all
// that was sent, waits until the server closes (drained: the events were all
// handled), grace passes or ctx ends, and closes conn.
func hangUp(ctx context.Context, conn *client.Conn, drained <-chan struct{}, grace time.Duration) {
	if conn.CloseWrite() == nil {
		timer := time.NewTimer(grace)
		select {
		case <-drained:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	conn.Close()
	<-drained
}

// session is a logged-in line-mode conversation.
type session struct {
	cfg     config
	conn    *client.Conn
	out     *printer
	current *client.Recipient
}

// runLineMode is the root command: connect, log in, then follow commands
// from stdin until end of input, /quit, an interrupt or a lost connection.
func runLineMode(ctx context.Context, cfg config, stdin io.Reader, stdout, stderr io.Writer) error {
	in := readInput(stdin)
	defer close(in.stop)
	out := newPrinter(stdout, stderr, cfg.json)

	if cfg.user == "" {
		fmt.Fprint(stderr, "username: ")
		select {
		case line, ok := <-in.lines:
			if !ok {
				return usagef("no user name: use --user or set RINGCHAT_USER")
			}
			if cfg.user = strings.TrimSpace(line); cfg.user == "" {
				return usagef("no user name given")
			}
		case <-ctx.Done():
			return nil
		}
	}
	conn, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	out.setUser(conn.User())
	out.event(client.Login{Username: conn.User()})

	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for ev := range conn.Events() {
			out.event(ev)
		}
	}()
	s := &session{cfg: cfg, conn: conn, out: out}
	for {
		select {
		case line, ok := <-in.lines:
			if !ok {
				out.hangingUp()
				hangUp(ctx, conn, printed, quitGrace)
				if in.err != nil {
					return fmt.Errorf("reading input: %w", in.err)
				}
				return nil
			}
			if quit := s.handle(ctx, line); quit {
				out.hangingUp()
				hangUp(ctx, conn, printed, quitGrace)
				return nil
			}
		case <-printed: // the connection ended; Disconnected was printed
			return &reportedError{conn.Err()}
		case <-ctx.Done():
			conn.Close()
			<-printed
			return nil
		}
	}
}

// handle runs one input line and reports whether to quit.
func (s *session) handle(ctx context.Context, line string) (quit bool) {
	cmd, err := parseCommand(line)
	if err != nil {
		s.out.errorf("%v", err)
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	switch cmd.act {
	case actJoin:
		s.do(s.conn.Join(ctx, cmd.group), client.JoinGroup{Group: cmd.group})
	case actLeave:
		s.do(s.conn.Leave(ctx, cmd.group), client.LeaveGroup{Group: cmd.group})
	case actSend:
		to := cmd.to
		if cmd.toCur {
			if s.current == nil {
				s.out.errorf("no conversation: use /to USER or /to #GROUP first, or /msg USER TEXT")
				return false
			}
			to = *s.current
		}
		s.do(s.conn.Send(ctx, to, cmd.text), nil)
	case actTo:
		if cmd.to.Name != "" {
			s.current = &cmd.to
		}
		if s.current == nil {
			s.out.infof("no conversation: use /to USER or /to #GROUP")
		} else {
			s.out.infof("talking to %s", clean(s.current.String()))
		}
	case actHelp:
		s.out.infof("%s", strings.TrimSuffix(helpText, "\n"))
	case actQuit:
		return true
	}
	return false
}

// do prints a request's outcome: the echoed event on success, else the
// error, unless the connection ended (that is reported once, by the loop).
func (s *session) do(err error, ok client.Event) {
	switch {
	case err == nil && ok != nil:
		s.out.event(ok)
	case err == nil:
	case s.conn.Err() != nil:
	default:
		s.out.errorf("%v", describe(err, s.cfg.timeout))
	}
}
