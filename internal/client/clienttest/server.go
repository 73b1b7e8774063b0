// Package clienttest is a fake ringnode client port for tests: it speaks
// protocol v1 on 127.0.0.1 with its own JSON handling (it does not use
// package client, so it checks the client against the protocol, not
// against itself).
//
// Behaviour: LOGIN, JOIN_GROUP and LEAVE_GROUP are echoed in their canonical
// shape; LOGIN as TakenName (or as a user online already) gets an ERROR;
// requests with SilentName get no answer at all; LEAVE_GROUP of a group not
// joined gets an ERROR; CHAT_MESSAGE is relayed with the server's sender and
// sentAt to the online recipient or to the group's other online members, and
// a message to a user who is not online gets an ERROR. ALIVE is ignored.
// When a client half-closes, the server closes after answering.
package clienttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Names with special treatment.
const (
	TakenName  = "taken"  // LOGIN gets ERROR "username taken"
	SilentName = "silent" // LOGIN, JOIN_GROUP, LEAVE_GROUP get no answer
)

// SentAt is what the server stamps on relayed messages unless Now is set.
var SentAt = time.Date(2019, time.April, 25, 16, 55, 53, 0, time.Local)

// Server is a running fake server.
type Server struct {
	Addr string
	// Now stamps relayed messages; set it before clients connect.
	Now func() time.Time

	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever state changes
	conns   map[*sconn]bool
	users   map[string]*sconn
	groups  map[string]map[string]bool
	lines   []string
}

type sconn struct {
	nc   net.Conn
	wmu  sync.Mutex
	user string // guarded by Server.mu
}

// NewServer starts a server; it is closed when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("clienttest: listen: %v", err)
	}
	s := &Server{
		Addr:    ln.Addr().String(),
		Now:     func() time.Time { return SentAt },
		ln:      ln,
		changed: make(chan struct{}),
		conns:   map[*sconn]bool{},
		users:   map[string]*sconn{},
		groups:  map[string]map[string]bool{},
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and waits for all its goroutines.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Lines returns every line received so far, from all clients, in order.
func (s *Server) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// WaitLine waits until a received line equals want.
func (s *Server) WaitLine(t testing.TB, want string) {
	t.Helper()
	s.wait(t, fmt.Sprintf("line %s", want), func() bool {
		for _, l := range s.lines {
			if l == want {
				return true
			}
		}
		return false
	})
}

// WaitUser waits until user is logged in.
func (s *Server) WaitUser(t testing.TB, user string) {
	t.Helper()
	s.wait(t, "login of "+user, func() bool { return s.users[user] != nil })
}

// WaitGone waits until user is no longer logged in (its connection closed).
func (s *Server) WaitGone(t testing.TB, user string) {
	t.Helper()
	s.wait(t, "logout of "+user, func() bool { return s.users[user] == nil })
}

// SendRaw writes line (plus "\n") to the connection of the online user.
func (s *Server) SendRaw(user, line string) error {
	s.mu.Lock()
	c := s.users[user]
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("clienttest: %s is not online", user)
	}
	return c.write([]byte(line + "\n"))
}

func (s *Server) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("clienttest: timed out waiting for %s; lines so far: %q", what, s.Lines())
		}
	}
}

// notifyLocked wakes waiters; s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &sconn{nc: nc}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) serve(c *sconn) {
	defer s.wg.Done()
	defer func() {
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		if c.user != "" && s.users[c.user] == c {
			delete(s.users, c.user)
		}
		s.notifyLocked()
		s.mu.Unlock()
	}()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		s.mu.Lock()
		s.lines = append(s.lines, line)
		s.notifyLocked()
		s.mu.Unlock()
		s.handle(c, line)
	}
}

func (c *sconn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

func (c *sconn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	c.write(append(b, '\n'))
}

func (c *sconn) sendError(format string, args ...any) {
	c.send(map[string]string{"messageType": "ERROR", "errorMessage": fmt.Sprintf(format, args...)})
}
