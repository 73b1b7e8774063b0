// Package clienttest is a fake ringnode client port for tests: it speaks
// protocol 1 and protocol 2 (docs/PROTOCOL.md) on 127.0.0.1 in the shapes
// internal/protocol declares, as the real node does. It does not use
// package client, so it checks the client against the protocol, not
// against itself.
//
// Protocol 1 behaviour: LOGIN, JOIN_GROUP and LEAVE_GROUP are echoed in
// their canonical shape; LOGIN as TakenName (or as a user online already)
// gets an ERROR; requests with SilentName get no answer at all; LEAVE_GROUP
// of a group not joined gets an ERROR; CHAT_MESSAGE is relayed with the
// server's sender and sentAt to the online recipient or to the group's
// other online members, and a message to a user who is not online gets an
// ERROR. ALIVE is ignored. When a client half-closes, the server closes
// after answering.
//
// Protocol 2 (LOGIN with "version":2) adds what the real node does:
// request ids in answers, STORED receipts with a sequence number, a message
// id stored once, messages to users who are offline kept until they log in,
// deliveries kept until acknowledged and delivered again at the next login,
// passwords, WHO, GROUPS and HISTORY, ERROR codes. A message to a user who
// never logged in is refused (UNKNOWN_USER).
//
// One Server is one fake ring: AddNode gives it another client port, and
// every port shares the same users, groups and queue, so that clients can
// fail over between them. Crash closes a port and its connections,
// Restart opens it again on the same address.
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

	"github.com/ringchat/ringchat/internal/protocol"
)

// Names with special treatment.
const (
	TakenName  = "taken"  // LOGIN gets ERROR "username taken" (USER_ONLINE in protocol 2)
	SilentName = "silent" // LOGIN, JOIN_GROUP, LEAVE_GROUP get no answer
)

// SentAt is what the server stamps on relayed messages unless Now is set.
var SentAt = time.Date(2019, time.April, 25, 16, 55, 53, 0, time.Local)

// Server is a running fake server.
type Server struct {
	// Addr is the client port of the first node (id 1).
	Addr string
	// Now stamps relayed messages; set it before clients connect.
	Now func() time.Time

	wg sync.WaitGroup

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever state changes
	nodes    []*node
	conns    map[*sconn]bool
	users    map[string]*sconn
	known    map[string]bool   // users who have logged in once
	password map[string]string // claimed names
	groups   map[string]map[string]bool
	lines    []string
	seq      int64
	stored   map[string]*stored   // by message id
	history  []*stored            // in seq order
	queue    map[string][]*stored // per user: not yet acknowledged (protocol 2) or not yet written (protocol 1)
	muted    map[string]bool      // users whose chat messages get no answer
	away     map[string]string    // away messages, by user
	// noFailover: LOGIN grants no "failover" (an older node).
	noFailover bool
	// maxMessage, if set, is the largest message a protocol-2 LOGIN
	// asking for "limits" is told (SetMaxMessage).
	maxMessage int
}

// SetMaxMessage makes protocol-2 LOGINs that ask for "limits" say n bytes
// is the largest message (0: LOGIN does not say, as an older node).
func (s *Server) SetMaxMessage(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxMessage = n
}

// node is one client port of the fake ring.
type node struct {
	id   int64
	addr string
	ln   net.Listener // nil while crashed
	// thaw is closed when a frozen node answers again (nil: not frozen).
	thaw chan struct{}
}

type stored struct {
	seq        int64
	id         string
	from       string
	toUser     string
	toGroup    string
	content    string
	sentAt     string
	time       string
	recipients []string
}

type sconn struct {
	nc   net.Conn
	node *node
	wmu  sync.Mutex
	user string // guarded by Server.mu
	v2   bool   // guarded by Server.mu
	// cumAck: the LOGIN was granted "cumulative-ack" (Server.mu).
	cumAck bool
	sent   map[string]bool
}

// NewServer starts a server with one node; it is closed when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		Now:      func() time.Time { return SentAt },
		changed:  make(chan struct{}),
		conns:    map[*sconn]bool{},
		users:    map[string]*sconn{},
		known:    map[string]bool{},
		password: map[string]string{},
		groups:   map[string]map[string]bool{},
		stored:   map[string]*stored{},
		queue:    map[string][]*stored{},
		muted:    map[string]bool{},
	}
	s.Addr = s.AddNode(t)
	t.Cleanup(s.Close)
	return s
}

// AddNode opens another client port of the same fake ring and returns its
// address. Its node id is the number of ports so far.
func (s *Server) AddNode(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("clienttest: listen: %v", err)
	}
	s.mu.Lock()
	n := &node{id: int64(len(s.nodes) + 1), addr: ln.Addr().String(), ln: ln}
	s.nodes = append(s.nodes, n)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.accept(n, ln)
	return n.addr
}

// Crash closes the port at addr and every connection it serves, as a node
// that died: its users are logged out, their unacknowledged messages wait.
func (s *Server) Crash(addr string) {
	s.mu.Lock()
	n := s.nodeLocked(addr)
	var ln net.Listener
	if n != nil {
		ln, n.ln = n.ln, nil
	}
	var victims []*sconn
	for c := range s.conns {
		if c.node == n {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, c := range victims {
		c.nc.Close()
	}
}

// Restart opens the crashed port at addr again.
func (s *Server) Restart(t testing.TB, addr string) {
	t.Helper()
	s.mu.Lock()
	n := s.nodeLocked(addr)
	s.mu.Unlock()
	if n == nil {
		t.Fatalf("clienttest: no node at %s", addr)
		return
	}
	var ln net.Listener
	var err error
	for range 100 { // the port may linger for a moment after Crash
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("clienttest: listen again on %s: %v", addr, err)
	}
	s.mu.Lock()
	n.ln = ln
	s.mu.Unlock()
	s.wg.Add(1)
	go s.accept(n, ln)
}

// Drop closes the connection of the online user, as a lost network link.
func (s *Server) Drop(user string) {
	s.mu.Lock()
	c := s.users[user]
	s.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
}

// Mute makes the server swallow the chat messages of user without an
// answer (a stalled node), or answer them again.
func (s *Server) Mute(user string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.muted[user] = on
}

func (s *Server) nodeLocked(addr string) *node {
	for _, n := range s.nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

// Close stops the server and waits for all its goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	var lns []net.Listener
	for _, n := range s.nodes {
		if n.ln != nil {
			lns = append(lns, n.ln)
			n.ln = nil
		}
	}
	for c := range s.conns {
		c.nc.Close()
	}
	for _, n := range s.nodes {
		if n.thaw != nil {
			close(n.thaw)
			n.thaw = nil
		}
	}
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	s.wg.Wait()
}

// Lines returns every line received so far, from all clients, in order.
func (s *Server) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// Messages returns the content of every chat message stored (protocol 2
// senders), in order, each once.
func (s *Server) Messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.history {
		out = append(out, m.content)
	}
	return out
}

// Online returns the user's node id, or 0 when the user is offline.
func (s *Server) Online(user string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.users[user]; c != nil {
		return c.node.id
	}
	return 0
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

// WaitLineContaining waits until a received line contains part.
func (s *Server) WaitLineContaining(t testing.TB, part string) {
	t.Helper()
	s.wait(t, fmt.Sprintf("a line with %s", part), func() bool {
		for _, l := range s.lines {
			if strings.Contains(l, part) {
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

// WaitUserAt waits until user is logged in at the node with address addr.
func (s *Server) WaitUserAt(t testing.TB, user, addr string) {
	t.Helper()
	s.wait(t, "login of "+user+" at "+addr, func() bool { return s.users[user] != nil && s.users[user].node.addr == addr })
}

// WaitGone waits until user is no longer logged in (its connection closed).
func (s *Server) WaitGone(t testing.TB, user string) {
	t.Helper()
	s.wait(t, "logout of "+user, func() bool { return s.users[user] == nil })
}

// WaitAcked waits until every message to user has been acknowledged.
func (s *Server) WaitAcked(t testing.TB, user string) {
	t.Helper()
	s.wait(t, "acknowledgements of "+user, func() bool { return len(s.queue[user]) == 0 })
}

// WaitStored waits until n chat messages are stored.
func (s *Server) WaitStored(t testing.TB, n int) {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d stored messages", n), func() bool { return len(s.history) >= n })
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

func (s *Server) accept(n *node, ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := &sconn{nc: nc, node: n, sent: map[string]bool{}}
		s.mu.Lock()
		if n.ln != ln { // crashed meanwhile
			s.mu.Unlock()
			nc.Close()
			continue
		}
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
		s.mu.Lock()
		thaw := c.node.thaw
		s.mu.Unlock()
		if thaw != nil {
			<-thaw // frozen: the line waits, unanswered, as in a stopped process
		}
		s.handle(c, strings.TrimSuffix(line, "\n"))
	}
}

// Freeze makes the node at addr stop answering, as a process stopped with
// SIGSTOP: its connections stay open and connections are still accepted,
// but nothing is read or answered until Thaw (or Close). A user logged in
// there may log in at another node that the client says it left for it
// (LOGIN "leaving"), as the real ring allows once it spliced the node out.
func (s *Server) Freeze(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodeLocked(addr); n != nil && n.thaw == nil {
		n.thaw = make(chan struct{})
	}
}

// Thaw lets a frozen node answer again.
func (s *Server) Thaw(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodeLocked(addr); n != nil && n.thaw != nil {
		close(n.thaw)
		n.thaw = nil
	}
}

// Notice sends the protocol-2 connections at the node at addr a NOTICE
// with code (STORE_UNREACHABLE, OUT_OF_RING, NODE_OK), as a node that lost
// the store or the ring does.
func (s *Server) Notice(addr string, code protocol.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodeLocked(addr)
	if n == nil {
		return
	}
	for c := range s.conns {
		if c.node == n && c.v2 && c.user != "" {
			c.send(protocol.NodeNoticeV2{MessageType: protocol.TypeNotice, Code: code, Node: n.id, Message: fmt.Sprintf("node %d: %s", n.id, code)})
		}
	}
}

// NoFailover makes LOGIN grant no "failover" feature, as a node from
// before it did.
func (s *Server) NoFailover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noFailover = true
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
	c.send(protocol.ErrorV1{MessageType: protocol.TypeError, ErrorMessage: fmt.Sprintf(format, args...)})
}
