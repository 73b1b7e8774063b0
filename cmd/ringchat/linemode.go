package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/tui"
)

// maxInputLine bounds one line of standard input.
const maxInputLine = client.MaxLineBytes

// input reads standard input in its own goroutine, so that the line loop
// can also notice the end of the session while the user is not typing.
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

// askUser reads the user name from the first input line.
func askUser(ctx context.Context, in *input, stderr io.Writer) (string, error) {
	fmt.Fprint(stderr, "username: ")
	select {
	case line, ok := <-in.lines:
		if !ok {
			return "", usagef("no user name: use --user or set RINGCHAT_USER")
		}
		if user := strings.TrimSpace(line); user != "" {
			return user, nil
		}
		return "", usagef("no user name given")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// lineSession is a logged-in line-mode conversation.
type lineSession struct {
	cfg     config
	s       *client.Session
	out     *printer
	current client.Recipient
	failed  atomic.Int64 // commands (and sent messages) that failed: the exit status is 1
}

// runLineMode is the root command off a terminal: log in, then follow
// commands from stdin until end of input, /quit, an interrupt, or a login
// refused for good. What was typed is sent before it returns (within the
// timeout); what could not be is an error.
func runLineMode(ctx context.Context, cfg config, stdin io.Reader, stdout, stderr io.Writer) error {
	in := readInput(stdin)
	defer close(in.stop)
	out := newPrinter(stdout, stderr, cfg.json)
	if cfg.user == "" {
		user, err := askUser(ctx, in, stderr)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		cfg.user = user
	}
	s, err := startSession(ctx, cfg, protocol.FeatureAway)
	if err != nil {
		if interrupted(ctx) {
			return nil
		}
		return err
	}
	defer s.Close()
	out.setUser(s.User())
	addr, node, _ := s.Where()
	out.event(client.Connected{Addr: addr, Node: node})

	ended := make(chan error, 1) // the session gave up, and why
	printed := make(chan struct{})
	ls := &lineSession{cfg: cfg, s: s, out: out}
	go ls.printEvents(ended, printed)
	return ls.follow(ctx, in, ended, printed)
}

// printEvents prints the session's events until they end, then closes
// printed. It counts the ERRORs as failed commands, and sends the reason
// the session gave up on ended.
func (ls *lineSession) printEvents(ended chan<- error, printed chan<- struct{}) {
	defer close(printed)
	for ev := range ls.s.Events() {
		ls.out.event(ev)
		switch ev := ev.(type) {
		case client.Disconnected:
			ended <- ev.Err
		case client.ErrorMessage:
			ls.failed.Add(1) // a message refused, or a request
		}
	}
}

// follow runs the input lines until end of input, /quit, the end of the
// session or an interrupt, and returns the outcome.
func (ls *lineSession) follow(ctx context.Context, in *input, ended <-chan error, printed <-chan struct{}) error {
	for {
		select {
		case line, ok := <-in.lines:
			if !ok {
				if err := ls.finish(ctx, printed); err != nil {
					return err
				}
				if in.err != nil {
					return fmt.Errorf("reading input: %w", in.err)
				}
				return ls.status()
			}
			if quit := ls.handle(ctx, line); quit {
				if err := ls.finish(ctx, printed); err != nil {
					return err
				}
				return ls.status()
			}
		case err := <-ended:
			ls.s.Close()
			<-printed
			return &reportedError{err}
		case <-ctx.Done():
			ls.s.Close()
			<-printed
			return nil
		}
	}
}

// finish waits (within the timeout) for the receipts of what was sent,
// then logs out.
func (ls *lineSession) finish(ctx context.Context, printed <-chan struct{}) error {
	fctx, cancel := context.WithTimeout(ctx, ls.cfg.timeout)
	err := ls.s.Flush(fctx)
	cancel()
	ls.s.Close()
	<-printed
	if err != nil {
		ls.out.errorf("%s", strings.ReplaceAll(err.Error(), "client: ", ""))
		return &reportedError{err}
	}
	return nil
}

// status is the session's outcome once everything sent is stored: an
// error (exit status 1, already shown line by line) if a command failed.
func (ls *lineSession) status() error {
	if n := ls.failed.Load(); n > 0 {
		return &reportedError{fmt.Errorf("%d command(s) failed", n)}
	}
	return nil
}

// errorf shows a command's failure and counts it.
func (ls *lineSession) errorf(format string, args ...any) {
	ls.failed.Add(1)
	ls.out.errorf(format, args...)
}

// handle runs one input line and reports whether to quit.
func (ls *lineSession) handle(ctx context.Context, line string) (quit bool) {
	cmd, err := tui.Parse(line)
	if err != nil {
		ls.errorf("%v", err)
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, ls.cfg.timeout)
	defer cancel()
	s := ls.s
	switch cmd.Act {
	case tui.ActJoin:
		ls.do(s.Join(ctx, cmd.Group), client.JoinGroup{Group: cmd.Group})
	case tui.ActLeave:
		ls.do(s.Leave(ctx, cmd.Group), client.LeaveGroup{Group: cmd.Group})
	case tui.ActPrivate:
		ls.do(s.JoinInviteOnly(ctx, cmd.Group), client.JoinGroup{Group: cmd.Group, InviteOnly: true})
	case tui.ActInvite:
		ls.invite(ctx, cmd.User, cmd.Group)
	case tui.ActPasswd:
		ls.errorf("/passwd asks for a hidden password: use the full-screen client on a terminal")
	case tui.ActSend:
		ls.send(cmd)
	case tui.ActTo:
		ls.talkTo(cmd.To)
	case tui.ActWho:
		users, err := s.Who(ctx)
		ls.do(err, client.Who{Users: users})
	case tui.ActGroups:
		groups, err := s.Groups(ctx)
		ls.do(err, client.Groups{Groups: groups})
	case tui.ActHistory:
		ls.history(ctx, cmd.To, cmd.Limit)
	case tui.ActWhois:
		w, err := s.Whois(ctx, cmd.User)
		ls.do(err, w)
	case tui.ActNames:
		ls.names(ctx, cmd.Group)
	case tui.ActAway:
		a, err := s.SetAway(ctx, cmd.Text)
		ls.do(err, a)
	case tui.ActHelp:
		ls.out.infof("%s", strings.TrimSuffix(tui.HelpText, "\n"))
	case tui.ActQuit:
		return true
	}
	return false
}

// invite invites user into group (empty: the current conversation's).
func (ls *lineSession) invite(ctx context.Context, user, group string) {
	group, ok := ls.groupOr(group, "invite to which group? /invite USER #GROUP")
	if !ok {
		return
	}
	if err := ls.s.Invite(ctx, group, user); err != nil {
		ls.errorf("%v", describe(err, ls.cfg.timeout))
		return
	}
	ls.out.infof("invited %s to #%s: they can /join %s now", tui.Clean(user), tui.Clean(group), tui.Clean(group))
}

// send posts the text of cmd to its recipient, or to the current
// conversation.
func (ls *lineSession) send(cmd tui.Command) {
	to := cmd.To
	if cmd.ToCurrent {
		if ls.current.Name == "" {
			ls.errorf("no conversation: use /to USER or /to #GROUP first, or /msg USER TEXT")
			return
		}
		to = ls.current
	}
	if _, err := ls.out.post(func() (client.Outgoing, error) { return ls.s.Post(to, cmd.Text) }); err != nil {
		ls.errorf("%v", err)
	}
}

// talkTo makes to (if any) the current conversation and says which one
// is.
func (ls *lineSession) talkTo(to client.Recipient) {
	if to.Name != "" {
		ls.current = to
	}
	if ls.current.Name == "" {
		ls.out.infof("no conversation: use /to USER or /to #GROUP")
	} else {
		ls.out.infof("talking to %s", tui.Clean(ls.current.String()))
	}
}

// history prints the last limit messages with with (zero: the current
// conversation).
func (ls *lineSession) history(ctx context.Context, with client.Recipient, limit int) {
	if with.Name == "" {
		if with = ls.current; with.Name == "" {
			ls.errorf("history of what? /history USER, /history #GROUP, or /to one first")
			return
		}
	}
	msgs, err := ls.s.History(ctx, with, limit)
	ls.do(err, client.History{To: with, Messages: msgs})
}

// names prints the members of group (empty: the current conversation's).
func (ls *lineSession) names(ctx context.Context, group string) {
	group, ok := ls.groupOr(group, "names of which group? /names #GROUP")
	if !ok {
		return
	}
	n, err := ls.s.Names(ctx, group, "", 1000)
	ls.do(err, n)
}

// groupOr returns group, or if it is empty the current conversation's; if
// that is no group it says so (ask, then "or /to #GROUP first") and returns
// false.
func (ls *lineSession) groupOr(group, ask string) (string, bool) {
	if group != "" {
		return group, true
	}
	if ls.current.Group {
		return ls.current.Name, true
	}
	ls.errorf("%s, or /to #GROUP first", ask)
	return "", false
}

// do prints a request's outcome: the event on success, else the error.
func (ls *lineSession) do(err error, ok client.Event) {
	if err != nil {
		ls.errorf("%v", describe(err, ls.cfg.timeout))
		return
	}
	ls.out.event(ok)
}
