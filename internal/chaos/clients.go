package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
)

// sentMsg is one message a user sent, with its fate.
type sentMsg struct {
	N        int // the sender's counter: 1, 2, 3... in sending order
	ID       string
	To       client.Recipient
	Posted   time.Time
	Stored   time.Time // zero without a STORED receipt
	Seq      int64
	Refused  string    // the ERROR code of a final refusal
	Attempts int       // sends of this id (more than 1 after reconnects)
	Via      []int64   // nodes it was sent to, in order
	LastSent time.Time // when it was last sent (to Via's last node)
}

// shownMsg is one chat message the client library delivered to the user
// (after its deduplication by id).
type shownMsg struct {
	ID   string
	From string
	N    int // the sender's counter, from the content; 0 if foreign
	Seq  int64
	To   client.Recipient
	At   time.Time
	Node int64 // the node of the connection it came on
	Conn int   // the connection (1, 2, ...) it came on
}

// connInfo is one connection of a user.
type connInfo struct {
	N        int
	Node     int64
	Opened   time.Time
	LoggedIn time.Time // zero if the login failed
	Ended    time.Time // when its reader saw the end
	Closed   bool      // closed by the client (not by the node or a failure)
	Why      string    // why the client closed it
}

// rawMsg is a CHAT_MESSAGE line seen on the socket, before the library.
type rawMsg struct {
	Conn int
	At   time.Time
}

// user is one chat client: a goroutine that sends at a steady rate with
// one message in flight, and one reader per connection.
type user struct {
	w    *workload
	name string
	// leaving: the node whose Notice sent this user elsewhere (the next
	// login replaces the presence there); 0 once logged in again.
	leaving int64
	idx     int
	groups  []string
	rng     *rand.Rand
	seen    *client.Seen
	kick    chan kickReq

	mu         sync.Mutex
	conn       *client.Conn
	connAt     int // index into w.addrs
	connN      int // connections made so far
	curN       int // the current connection's number
	connDead   bool
	connDone   chan struct{} // closed when the current connection's reader has seen its end
	sent       []*sentMsg
	shown      []shownMsg
	raw        map[string][]rawMsg
	stored     map[string]client.Stored
	storedVia  map[string]int64
	refused    map[string]protocol.Code
	loose      map[protocol.Code]int // ERROR codes that answer no request
	protoErrs  int
	logins     int
	loginWaits []time.Duration // from a lost connection to the next login
	conns      []connInfo
	notify     chan struct{}
}

// kickReq asks a user to drop its connection and log in at another node.
type kickReq struct {
	at     time.Time
	gentle bool // half-close and read to the end first, rather than close at once
	done   chan kickResult
}

type kickResult struct {
	from, to int64
	took     time.Duration
	err      error
}

// workload is the set of chat clients.
type workload struct {
	cfg     Config
	addrs   []string // client port of node i+1
	nodeIDs []int64
	users   []*user
	members map[string][]string // group -> members (fixed before sending starts)
	note    func(format string, args ...any)

	sending atomic.Bool // clients start new messages while set
	wg      sync.WaitGroup
}

// retryable ERROR codes of a chat message: the message was not stored and
// may be sent again (docs/PROTOCOL.md).
var retryable = []protocol.Code{protocol.CodeBusy, protocol.CodeUnavailable, protocol.CodeShutdown, protocol.CodeRateLimited}

func newWorkload(cfg Config, rng *rand.Rand, addrs []string, nodeIDs []int64, note func(string, ...any)) *workload {
	w := &workload{cfg: cfg, addrs: addrs, nodeIDs: nodeIDs, members: map[string][]string{}, note: note}
	ngroups := max(1, cfg.Clients/5)
	for i := range cfg.Clients {
		u := &user{w: w, name: fmt.Sprintf("u%02d", i+1), idx: i,
			rng:  rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
			seen: client.NewSeen(0), kick: make(chan kickReq, 1),
			raw: map[string][]rawMsg{}, stored: map[string]client.Stored{}, storedVia: map[string]int64{},
			refused: map[string]protocol.Code{}, loose: map[protocol.Code]int{}, notify: make(chan struct{}, 1)}
		for g := range ngroups {
			if u.rng.IntN(2) == 0 {
				u.groups = append(u.groups, fmt.Sprintf("g%d", g+1))
			}
		}
		if len(u.groups) == 0 {
			u.groups = []string{fmt.Sprintf("g%d", 1+u.rng.IntN(ngroups))}
		}
		if i < bigGroupClients(cfg) {
			u.groups = append(u.groups, BigGroupName)
		}
		for _, g := range u.groups {
			w.members[g] = append(w.members[g], u.name)
		}
		w.users = append(w.users, u)
	}
	return w
}

// BigGroupName is the group with Config.BigGroup seeded members.
const BigGroupName = "big"

// bigGroupClients is how many clients join the big group.
func bigGroupClients(cfg Config) int {
	if cfg.BigGroup <= 0 {
		return 0
	}
	return min(cfg.Clients, max(2, cfg.Clients/4))
}

// seedBigGroup creates n users and the big group with them as members,
// through the store (a batch a transaction); they never log in.
func seedBigGroup(ctx context.Context, st store.Store, n int) error {
	var gid int64
	err := st.Update(ctx, func(tx store.Tx) error {
		g, _, err := tx.EnsureGroup(BigGroupName)
		gid = g.ID
		return err
	})
	if err != nil {
		return fmt.Errorf("seed the big group: %w", err)
	}
	const batch = 500
	for lo := 0; lo < n; lo += batch {
		err := st.Update(ctx, func(tx store.Tx) error {
			for i := lo; i < min(n, lo+batch); i++ {
				u, _, err := tx.EnsureUser(fmt.Sprintf("offline%06d", i))
				if err != nil {
					return err
				}
				if _, err := tx.JoinGroup(gid, u.ID); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seed the big group: %w", err)
		}
	}
	return nil
}

// setup logs every user in (user i at node i mod n) and joins its groups.
func (w *workload) setup(ctx context.Context) error {
	errs := make([]error, len(w.users))
	var wg sync.WaitGroup
	for i, u := range w.users {
		wg.Go(func() {
			if _, err := u.connect(ctx, u.idx%len(w.addrs), -1); err != nil {
				errs[i] = err
				return
			}
			u.mu.Lock()
			c := u.conn
			u.mu.Unlock()
			for _, g := range u.groups {
				jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err := c.Join(jctx, g)
				cancel()
				if err != nil {
					errs[i] = fmt.Errorf("%s joins %s: %w", u.name, g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// run starts every user's sending loop; they stop starting messages when
// sending is cleared and exit when ctx ends.
func (w *workload) run(ctx context.Context) {
	w.sending.Store(true)
	for _, u := range w.users {
		w.wg.Go(func() { u.loop(ctx) })
	}
}

// nodeAt is the node id of address index i.
func (w *workload) nodeAt(i int) int64 { return w.nodeIDs[i] }

// tapConn reports every CHAT_MESSAGE line read from the socket, before the
// client library sees it. Read is only called by the library's reader.
type tapConn struct {
	net.Conn
	buf []byte
	on  func(id string)
}

var chatType = []byte(`"` + protocol.TypeChatMessage + `"`)

// CloseWrite half-closes the TCP connection underneath (client.Conn's
// CloseWrite needs it).
func (t *tapConn) CloseWrite() error {
	cw, ok := t.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("chaos: connection cannot be half-closed")
	}
	return cw.CloseWrite()
}

func (t *tapConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.buf = append(t.buf, p[:n]...)
		for {
			i := bytes.IndexByte(t.buf, '\n')
			if i < 0 {
				break
			}
			line := t.buf[:i]
			if bytes.Contains(line, chatType) {
				var m protocol.ChatV2
				if json.Unmarshal(line, &m) == nil && m.MessageType == protocol.TypeChatMessage && m.ID != "" {
					t.on(m.ID)
				}
			}
			t.buf = t.buf[i+1:]
		}
		if len(t.buf) > 2<<20 { // a runaway line: not ours to judge
			t.buf = nil
		}
		if len(t.buf) == 0 {
			t.buf = nil // let the array go
		}
	}
	return n, err
}

// connect logs the user in at the first node that lets it, trying the
// addresses in turn from index start (skipping avoid unless it is the only
// one), until ctx ends. It returns the index it logged in at.
func (u *user) connect(ctx context.Context, start, avoid int) (int, error) {
	n := len(u.w.addrs)
	pause := 50 * time.Millisecond
	var last error
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return -1, fmt.Errorf("%s: no node let it log in: %w (last: %v)", u.name, err, last)
		}
		idx := (start + i) % n
		if idx == avoid && n > 1 {
			continue
		}
		err := u.dial(ctx, idx)
		if err == nil {
			return idx, nil
		}
		last = err
		if i%n == n-1 {
			wait(ctx, pause)
			pause = min(2*pause, time.Second)
		}
	}
}

// dial opens a connection to address idx and logs in with protocol 2.
func (u *user) dial(ctx context.Context, idx int) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", u.w.addrs[idx])
	if err != nil {
		return err
	}
	node := u.w.nodeAt(idx)
	u.mu.Lock()
	connN := u.connN + 1
	u.connN = connN
	u.conns = append(u.conns, connInfo{N: connN, Node: node, Opened: time.Now()})
	u.mu.Unlock()
	tap := &tapConn{Conn: nc, on: func(id string) {
		u.mu.Lock()
		u.raw[id] = append(u.raw[id], rawMsg{Conn: connN, At: time.Now()})
		u.mu.Unlock()
	}}
	c := client.NewConn(tap, client.Options{Timeout: 5 * time.Second, KeepAlive: 10 * time.Second, AutoAck: true, Seen: u.seen,
		Features: []string{protocol.FeatureFailover}})
	done := make(chan struct{})
	go u.read(c, connN, node, done)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	u.mu.Lock()
	leaving := u.leaving
	u.mu.Unlock()
	err = c.LoginV2Leaving(lctx, u.name, "", leaving)
	cancel()
	if err != nil {
		c.Close()
		return err
	}
	u.mu.Lock()
	u.conn, u.connAt, u.connDead, u.connDone = c, idx, false, done
	u.leaving = 0
	u.conns[connN-1].LoggedIn = time.Now()
	u.curN = connN
	u.logins++
	u.mu.Unlock()
	return nil
}

// read records what connection connN delivers, and closes done when it
// ended.
func (u *user) read(c *client.Conn, connN int, node int64, done chan struct{}) {
	defer close(done)
	for ev := range c.Events() {
		switch ev := ev.(type) {
		case client.ChatMessage:
			from, n := parseContent(ev.Content)
			if from != ev.From {
				n = 0
			}
			u.mu.Lock()
			u.shown = append(u.shown, shownMsg{ID: ev.ID, From: ev.From, N: n, Seq: ev.Seq, To: ev.To,
				At: time.Now(), Node: node, Conn: connN})
			u.mu.Unlock()
		case client.Stored:
			u.mu.Lock()
			if _, ok := u.stored[ev.ID]; !ok {
				u.stored[ev.ID], u.storedVia[ev.ID] = ev, node
			}
			u.mu.Unlock()
			u.poke()
		case client.Notice:
			if !ev.OK() {
				// The node cannot reach the store or is out of the ring:
				// log in elsewhere at once, replacing the presence there
				// (as ringchat does).
				u.w.note("%s: node %d says %s: logging in elsewhere", u.name, node, ev.Code)
				u.mu.Lock()
				u.leaving = node
				u.mu.Unlock()
				c.Close()
			}
		case client.ErrorMessage:
			u.mu.Lock()
			if ev.ID != "" {
				u.refused[ev.ID] = ev.Code
			} else {
				u.loose[ev.Code]++
			}
			u.mu.Unlock()
			u.poke()
		case client.ProtocolError:
			u.mu.Lock()
			u.protoErrs++
			u.mu.Unlock()
		}
	}
	u.mu.Lock()
	if u.connN == connN {
		u.connDead = true
	}
	u.conns[connN-1].Ended = time.Now()
	u.mu.Unlock()
	u.poke()
}

func (u *user) poke() {
	select {
	case u.notify <- struct{}{}:
	default:
	}
}

// content is what a user sends: its name and counter, so that the checker
// can tell every message apart whatever its id.
func content(user string, n int) string { return user + "#" + strconv.Itoa(n) }

func parseContent(s string) (string, int) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return "", 0
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return "", 0
	}
	return s[:i], n
}

// current returns the live connection and its address index, or nil.
func (u *user) current() (*client.Conn, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil || u.connDead {
		return nil, u.connAt
	}
	return u.conn, u.connAt
}

// drop closes the current connection, for the reason why.
func (u *user) drop(why string) (int, time.Time) {
	u.mu.Lock()
	c, at := u.conn, u.connAt
	if c != nil {
		u.conns[u.curN-1].Closed, u.conns[u.curN-1].Why = true, why
	}
	u.conn = nil
	u.mu.Unlock()
	lost := time.Now()
	if c != nil {
		c.Close()
	}
	return at, lost
}

// closeGently half-closes the connection and waits (up to a few seconds)
// for the node to close its side, so that everything the node sent is
// read and handed over before the connection is closed.
func (u *user) closeGently() {
	u.mu.Lock()
	c, done := u.conn, u.connDone
	u.mu.Unlock()
	if c == nil {
		return
	}
	if err := c.CloseWrite(); err != nil {
		u.w.note("%s: half-close failed (%v): closing at once", u.name, err)
		return
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// reconnect drops the connection and logs in at another node.
func (u *user) reconnect(ctx context.Context, why string) error {
	at, lost := u.drop(why)
	n := len(u.w.addrs)
	start := (at + 1 + u.rng.IntN(max(1, n-1))) % n
	if _, err := u.connect(ctx, start, at); err != nil {
		return err
	}
	u.mu.Lock()
	u.loginWaits = append(u.loginWaits, time.Since(lost))
	u.mu.Unlock()
	return nil
}

// loop is the user's sending goroutine.
func (u *user) loop(ctx context.Context) {
	interval := time.Duration(float64(time.Second) / u.w.cfg.Rate)
	next := time.Now().Add(time.Duration(u.rng.Int64N(int64(interval))))
	for n := 1; ; {
		if !u.w.sending.Load() {
			u.idle(ctx)
			return
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case k := <-u.kick:
			t.Stop()
			u.move(ctx, k)
			continue
		case <-u.notify:
			t.Stop()
			if c, _ := u.current(); c == nil {
				if err := u.reconnect(ctx, "connection lost"); err != nil {
					return
				}
			}
			continue
		case <-t.C:
		}
		if !u.w.sending.Load() {
			continue
		}
		m := u.newMessage(n)
		n++
		if !u.deliver(ctx, m) {
			return
		}
		// A steady rate: the next message is due an interval (±25%) after
		// this one was due, or now if delivery took longer.
		jitter := time.Duration(float64(interval) * (0.75 + 0.5*u.rng.Float64()))
		next = next.Add(jitter)
		if d := time.Until(next); d < -interval {
			next = time.Now()
		}
	}
}

// newMessage picks a destination: a direct message to another user, or a
// message to one of the user's groups.
func (u *user) newMessage(n int) *sentMsg {
	m := &sentMsg{N: n, ID: uuid.Must(uuid.NewV7()).String()}
	if u.rng.Float64() < 0.4 {
		m.To = client.ToGroup(u.groups[u.rng.IntN(len(u.groups))])
	} else {
		other := u.w.users[u.rng.IntN(len(u.w.users)-1)]
		if other == u {
			other = u.w.users[len(u.w.users)-1]
		}
		m.To = client.ToUser(other.name)
	}
	u.mu.Lock()
	u.sent = append(u.sent, m)
	u.mu.Unlock()
	return m
}

// deliver sends m until it is stored or finally refused, reconnecting
// elsewhere when its node dies, stalls or shuts down. It returns false
// when ctx ends.
func (u *user) deliver(ctx context.Context, m *sentMsg) bool {
	out := client.Outgoing{ID: m.ID, To: m.To, Text: content(u.name, m.N)}
	backoff := 100 * time.Millisecond
	for {
		c, at := u.current()
		if c == nil {
			if err := u.reconnect(ctx, "connection lost"); err != nil {
				return false
			}
			continue
		}
		u.mu.Lock()
		m.Attempts++
		m.Via = append(m.Via, u.w.nodeAt(at))
		m.LastSent = time.Now()
		if m.Posted.IsZero() {
			m.Posted = time.Now()
		}
		u.mu.Unlock()
		if err := c.Resend(ctx, []client.Outgoing{out}); err != nil {
			if ctx.Err() != nil {
				return false
			}
			if err := u.reconnect(ctx, "send failed"); err != nil {
				return false
			}
			continue
		}
		deadline := time.NewTimer(u.w.cfg.StoreTimeout)
	waiting:
		for {
			u.mu.Lock()
			st, stored := u.stored[m.ID]
			code, refused := u.refused[m.ID]
			dead := u.conn != c || u.connDead
			if stored {
				m.Stored, m.Seq = time.Now(), st.Seq
			}
			if refused {
				delete(u.refused, m.ID)
			}
			u.mu.Unlock()
			switch {
			case stored:
				deadline.Stop()
				return true
			case refused && !slices.Contains(retryable, code):
				u.mu.Lock()
				m.Refused = string(code)
				u.mu.Unlock()
				deadline.Stop()
				return true
			case refused:
				deadline.Stop()
				wait(ctx, backoff)
				backoff = min(2*backoff, 2*time.Second)
				if code == protocol.CodeShutdown {
					if err := u.reconnect(ctx, "node shutting down"); err != nil {
						return false
					}
				}
				break waiting
			case dead:
				deadline.Stop()
				if err := u.reconnect(ctx, "connection lost"); err != nil {
					return false
				}
				break waiting
			}
			select {
			case <-ctx.Done():
				deadline.Stop()
				return false
			case <-u.notify:
			case k := <-u.kick:
				deadline.Stop()
				u.move(ctx, k)
				break waiting
			case <-deadline.C:
				u.w.note("%s: no STORED receipt within %v from node %d: logging in elsewhere", u.name, u.w.cfg.StoreTimeout, u.w.nodeAt(at))
				if err := u.reconnect(ctx, "no receipt"); err != nil {
					return false
				}
				break waiting
			}
		}
	}
}

// move carries out a client-reconnect fault.
func (u *user) move(ctx context.Context, k kickReq) {
	_, from := u.current()
	if k.gentle {
		u.closeGently()
	}
	why := "moved (closed)"
	if k.gentle {
		why = "moved (half-closed)"
	}
	err := u.reconnect(ctx, why)
	_, to := u.current()
	k.done <- kickResult{from: u.w.nodeAt(from), to: u.w.nodeAt(to), took: time.Since(k.at), err: err}
}

// idle keeps the user connected after sending stopped (the drain): it
// reconnects a lost connection and checks a quiet one with WHO.
func (u *user) idle(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-u.kick:
			u.move(ctx, k)
		case <-u.notify:
		case <-t.C:
			if c, _ := u.current(); c != nil {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Who(wctx)
				cancel()
				if err != nil && ctx.Err() == nil {
					u.w.note("%s: connection does not answer WHO (%v): logging in elsewhere", u.name, err)
					_, _ = u.drop("no answer to WHO")
				}
			}
		}
		if c, _ := u.current(); c == nil && ctx.Err() == nil {
			if err := u.reconnect(ctx, "connection lost"); err != nil {
				return
			}
		}
	}
}

// inFlight reports whether any user has a message neither stored nor
// refused.
func (w *workload) inFlight() int {
	k := 0
	for _, u := range w.users {
		u.mu.Lock()
		if len(u.sent) > 0 {
			m := u.sent[len(u.sent)-1]
			if m.Stored.IsZero() && m.Refused == "" {
				k++
			}
		}
		u.mu.Unlock()
	}
	return k
}

// closeAll closes every connection (after ctx ended).
func (w *workload) closeAll() {
	w.wg.Wait()
	for _, u := range w.users {
		u.drop("end of the run")
	}
}
