package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/ring"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/wire"
)

// hostileKinds name what the barrage sends, as "path:reason": the path is
// "inbound" (TCP to the coordination port), "udp" (datagrams to it) or
// "client" (the client port); the reason is the drop reason the node is
// expected to count (transport.Reason*), "unusable" for an authenticated
// frame the node cannot use (node Stats.FramesBad), or the client-port
// probe.
const (
	hTCPMalformed   = "inbound:malformed"
	hTCPBadMAC      = "inbound:bad_mac"
	hTCPMisdirected = "inbound:misdirected"
	hTCPReplay      = "inbound:replay"
	hTCPStale       = "inbound:stale"
	hTCPTooLarge    = "inbound:too_large"
	hTCPNoHello     = "inbound:no_hello"
	hUDPMalformed   = "udp:malformed"
	hUDPBadMAC      = "udp:bad_mac"
	hUDPReplay      = "udp:replay"
	hUDPStale       = "udp:stale"
	hUDPUnusable    = "udp:unusable"
	hUDPMisdirected = "udp:misdirected" // a SUCCESSOR meant for another node, replayed here
	// Authenticated frames that only propose: a COORDINATOR at a far epoch,
	// a TOKEN at the largest generation by UDP. The node drops them after
	// asking the store (or at once: the token travels only on the ring
	// link); the run's ring checks see that they changed nothing.
	hUDPProposal = "udp:proposal"
	// Silent connections, 64 per coordination port: closed to make room
	// (too_many_hellos) or at the HELLO timeout (no_hello).
	hTCPSilent = "inbound:silent"
	// A TOKEN at generation 2^63-1 on a link opened in the name of the
	// node's predecessor in the store's ring. While the real
	// predecessor's link is up, the barrage's HELLO (it proves no store
	// secret) is refused with UNLINK (unproven_hello) and the TOKEN never
	// read; otherwise the node asks the store and discards it
	// (forged_token); nothing records its stamp.
	hTCPForgedToken = "inbound:forged_token"
	// A TOKEN of the current generation on a link opened in the name of a
	// node that is not the predecessor: refused at the HELLO as above, or
	// refused with UNLINK (not_predecessor), unless the real predecessor
	// dialled in again first and the link was replaced; either way never
	// acknowledged.
	hTCPNotPred  = "inbound:not_predecessor"
	hClientBad   = "client:malformed"
	hClientLong  = "client:oversized"
	hClientFlood = "client:flood"
)

// hostile is the hostile-input barrage.
type hostile struct {
	p      *procs
	st     store.Store // where the barrage reads the ring (the predecessor to speak for)
	rng    *rand.Rand
	good   *wire.Codec // the cluster key: valid frames, as a node makes them
	forged *wire.Codec // another key
	stale  *wire.Codec // the cluster key, a clock two minutes behind

	mu       sync.Mutex
	sent     map[int64]map[string]int    // node -> kind -> frames or probes sent
	codes    map[int64]map[string]int    // node -> ERROR code (or message) seen on the client port
	answered map[int64]map[string]int    // node -> client probe -> probes answered as expected
	failed   map[int64]map[string]int    // node -> client probe -> probes not answered as expected
	lastFail map[int64]map[string]string // node -> client probe -> the last such outcome
	cycles   map[int64]int
	// byPid counts the coordination-port kinds per process, to compare
	// with a live node's own counters.
	byPid map[int]map[string]int
	// probes are the forged tokens sent, with when: a node that cannot
	// read its store passes a token of a generation it cannot check on
	// unchecked and acknowledged (so that a store outage never stops the
	// ring), and the check leaves those sent while the store was in
	// trouble out.
	probes []tokenProbe
}

// tokenProbe is one forged TOKEN sent to node ID (process Pid).
type tokenProbe struct {
	ID      int64
	Pid     int
	Kind    string
	At      time.Time
	Taken   bool     // its own stamp acknowledged, not stale (hTCPNotPred)
	Stale   bool     // its own stamp acknowledged as stale (hTCPNotPred): judged and refused
	Answers []string // what the node wrote back
	// Unread: the node acknowledged nothing of this stamp and closed the
	// link as replaced (the real predecessor dialled in again): it may have
	// closed it with the TOKEN still unread, which no counter can count.
	Unread bool
}

// unread reports whether answers (of tcpAnswers) show a link closed as
// replaced with no TOKEN_ACK of the stamp ("TOKEN_ACK G/S").
func unread(answers []string, stamp string) bool {
	return slices.Contains(answers, "UNLINK replaced") &&
		!slices.ContainsFunc(answers, func(a string) bool { return a == stamp || a == stamp+" stale" })
}

func newHostile(p *procs, st store.Store, key []byte, seed uint64) (*hostile, error) {
	good, err := wire.NewCodec(key)
	if err != nil {
		return nil, err
	}
	forged, err := wire.NewCodec([]byte("not-the-cluster-key-at-all-0123456789"))
	if err != nil {
		return nil, err
	}
	stale, err := wire.NewCodec(key, wire.WithClock(func() time.Time { return time.Now().Add(-2 * time.Minute) }))
	if err != nil {
		return nil, err
	}
	return &hostile{p: p, st: st, rng: rand.New(rand.NewPCG(seed, 0x6b6f7374)), good: good, forged: forged, stale: stale,
		sent: map[int64]map[string]int{}, codes: map[int64]map[string]int{}, answered: map[int64]map[string]int{},
		failed: map[int64]map[string]int{}, lastFail: map[int64]map[string]string{}, cycles: map[int64]int{},
		byPid: map[int]map[string]int{}}, nil
}

func (h *hostile) count(m map[int64]map[string]int, id int64, k string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m[id] == nil {
		m[id] = map[string]int{}
	}
	m[id][k] += n
}

// sentTo counts n of kind sent to node id, and to its process pid.
func (h *hostile) sentTo(id int64, pid int, kind string, n int) {
	h.count(h.sent, id, kind, n)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byPid[pid] == nil {
		h.byPid[pid] = map[string]int{}
	}
	h.byPid[pid][kind] += n
}

func (h *hostile) fail(id int64, probe, what string) {
	h.count(h.failed, id, probe, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastFail[id] == nil {
		h.lastFail[id] = map[string]string{}
	}
	h.lastFail[id][probe] = what
}

// intn is a seeded random number below n, safe for concurrent use.
func (h *hostile) intn(n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rng.IntN(n)
}

// run attacks every running node, all at once, in cycles until ctx ends.
func (h *hostile) run(ctx context.Context) {
	for cycle := 0; ctx.Err() == nil; cycle++ {
		var wg sync.WaitGroup
		for _, id := range h.p.ids() {
			in := h.p.running(id)
			if in == nil || in.Stopped() {
				continue
			}
			pid := in.Pid
			wg.Go(func() {
				h.tcp(ctx, id, pid, cycle)
				// The transport logs one line per reason a second (the
				// rest are counted in its next line): a pause puts the
				// TCP and UDP drops of one reason on lines of their own.
				wait(ctx, 1100*time.Millisecond)
				if ctx.Err() != nil {
					return
				}
				h.udp(id, pid)
				h.client(ctx, id, cycle)
				h.mu.Lock()
				h.cycles[id]++
				h.mu.Unlock()
			})
		}
		wg.Wait()
		wait(ctx, 1100*time.Millisecond)
	}
}

// hello is a HELLO frame from src meant for node to.
func hello(src, to int64) wire.Frame {
	p, _ := json.Marshal(struct {
		To int64 `json:"to"`
	}{to})
	return wire.Frame{Type: "HELLO", Src: src, Payload: p}
}

// tcpSend dials the coordination port, writes lines and waits (briefly)
// for the node to close the connection, which it does after a bad first
// frame. It reports whether everything was written.
func tcpSend(ctx context.Context, addr string, lines ...[]byte) bool {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, l := range lines {
		if _, err := c.Write(append(l, '\n')); err != nil {
			return false
		}
	}
	_, _ = io.Copy(io.Discard, c) // until the node closes it (or the deadline)
	return true
}

func (h *hostile) tcp(ctx context.Context, id int64, pid, cycle int) {
	addr := net.JoinHostPort(h.p.addrs[id].Host, strconv.Itoa(h.p.addrs[id].Coord))
	src := int64(1000 + h.intn(1000)) // no such node
	if tcpSend(ctx, addr, []byte("GET / HTTP/1.0\r")) {
		h.sentTo(id, pid, hTCPMalformed, 1)
	}
	if b, err := h.forged.Encode(hello(src, id)); err == nil && tcpSend(ctx, addr, b) {
		h.sentTo(id, pid, hTCPBadMAC, 1)
	}
	// A valid HELLO meant for another node: refused as misdirected, but
	// its nonce is now known, so the same bytes again are a replay.
	if b, err := h.good.Encode(hello(src, 999)); err == nil && tcpSend(ctx, addr, b) {
		h.sentTo(id, pid, hTCPMisdirected, 1)
		if tcpSend(ctx, addr, b) {
			h.sentTo(id, pid, hTCPReplay, 1)
		}
	}
	if b, err := h.stale.Encode(hello(src, id)); err == nil && tcpSend(ctx, addr, b) {
		h.sentTo(id, pid, hTCPStale, 1)
	}
	if cycle%3 == 0 && tcpSend(ctx, addr, bytes.Repeat([]byte("x"), 70<<10)) {
		h.sentTo(id, pid, hTCPTooLarge, 1)
	}
	if cycle%4 == 1 && tcpSend(ctx, addr) { // silent: dropped at the HELLO timeout
		h.sentTo(id, pid, hTCPNoHello, 1)
	}
	if cycle%2 == 0 {
		h.forgedTokens(ctx, id, pid, addr)
	}
	if cycle%4 == 3 {
		// As many silent connections as a node holds waiting for their
		// HELLO: the node closes the oldest to make room, so its real
		// predecessor still gets in (the ring checks see it did).
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				if tcpSend(ctx, addr) {
					h.sentTo(id, pid, hTCPSilent, 1)
				}
			})
		}
		wg.Wait()
	}
}

// forgedTokens sends node id two TOKENs a key holder can forge: one at
// generation 2^63-1 in its predecessor's name, one of the current
// generation in another node's name (see hTCPForgedToken, hTCPNotPred).
// What comes back on the second link must not be a TOKEN_ACK.
func (h *hostile) forgedTokens(ctx context.Context, id int64, pid int, addr string) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	nodes, err := h.st.Nodes(rctx)
	var f store.Fence
	if err == nil {
		f, err = h.st.Fence(rctx)
	}
	cancel()
	if err != nil {
		return
	}
	topo := ring.Topology(store.Successors(nodes))
	pred := topo.Predecessor(id)
	if pred == 0 {
		return
	}
	tok := func(src, gen, seq int64) []byte {
		b, err := h.good.Encode(wire.Frame{Type: "TOKEN", Src: src,
			Payload: json.RawMessage(fmt.Sprintf(`{"token":{"gen":%d,"seq":%d}}`, gen, seq))})
		if err != nil {
			return nil
		}
		return b
	}
	if hb, err := h.good.Encode(hello(pred, id)); err == nil {
		at := time.Now()
		if t := tok(pred, math.MaxInt64, 0); t != nil {
			if answers, ok := tcpAnswers(ctx, addr, hb, t); ok {
				h.sentTo(id, pid, hTCPForgedToken, 1)
				h.probe(tokenProbe{ID: id, Pid: pid, Kind: hTCPForgedToken, At: at, Answers: answers,
					Unread: unread(answers, fmt.Sprintf("TOKEN_ACK %d/0", int64(math.MaxInt64)))})
			}
		}
	}
	var stranger int64
	for _, m := range topo.Members() {
		if m != id && m != pred {
			stranger = m
		}
	}
	if stranger == 0 {
		return
	}
	hb, err := h.good.Encode(hello(stranger, id))
	// A generation the node has surely confirmed (the one before the
	// store's, when there is one): the answer depends only on whether the
	// node takes a token from the stranger, not on whether it has checked
	// a generation made a moment ago (a token of a generation it has not
	// checked yet is acknowledged before the check, and discarded after).
	t := tok(stranger, max(f.Generation-1, 1), f.Seq+1000)
	if err != nil || t == nil {
		return
	}
	// A stale TOKEN_ACK is a refusal too: with the ring changing under
	// the faults, the "stranger" may have become the predecessor since
	// the read, and its token, lacking the generation's proof, is refused
	// as stale.
	// Taken means a TOKEN_ACK of this very token that is not stale: the
	// node also acknowledges on this link, its predecessor's for the
	// moment, a real token it held back for a store read before the
	// stranger linked in, and that acknowledgement names the real stamp.
	at := time.Now()
	if answers, ok := tcpAnswers(ctx, addr, hb, t); ok {
		h.sentTo(id, pid, hTCPNotPred, 1)
		stamp := fmt.Sprintf("TOKEN_ACK %d/%d", max(f.Generation-1, 1), f.Seq+1000)
		taken := slices.Contains(answers, stamp)
		h.probe(tokenProbe{ID: id, Pid: pid, Kind: hTCPNotPred, At: at, Taken: taken, Answers: answers,
			Stale: slices.Contains(answers, stamp+" stale"), Unread: unread(answers, stamp)})
		if !taken {
			h.count(h.answered, id, hTCPNotPred, 1)
		}
	}
}

func (h *hostile) probe(p tokenProbe) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probes = append(h.probes, p)
}

// tcpAnswers dials addr, writes lines and returns the types of the frames
// the node writes back until it closes the connection (or 3 s pass); a
// TOKEN_ACK is "TOKEN_ACK G/S" with the stamp it names, "TOKEN_ACK G/S
// stale" when it says stale.
func tcpAnswers(ctx context.Context, addr string, lines ...[]byte) ([]string, bool) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	for _, l := range lines {
		if _, err := c.Write(append(l, '\n')); err != nil {
			return nil, false
		}
	}
	var types []string
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var f struct {
			H struct {
				T string `json:"t"`
				P struct {
					Stamp *struct {
						Gen int64 `json:"gen"`
						Seq int64 `json:"seq"`
					} `json:"stamp"`
					Stale bool   `json:"stale"`
					Why   string `json:"why"`
				} `json:"p"`
			} `json:"h"`
		}
		if json.Unmarshal(sc.Bytes(), &f) == nil {
			t := f.H.T
			if s := f.H.P.Stamp; s != nil {
				t += fmt.Sprintf(" %d/%d", s.Gen, s.Seq)
			}
			if f.H.P.Stale {
				t += " stale"
			}
			if f.H.P.Why != "" {
				t += " " + f.H.P.Why // UNLINK: replaced or refused
			}
			types = append(types, t)
		}
	}
	return types, true
}

func (h *hostile) udp(id int64, pid int) {
	c, err := net.Dial("udp", net.JoinHostPort(h.p.addrs[id].Host, strconv.Itoa(h.p.addrs[id].Coord)))
	if err != nil {
		return
	}
	defer c.Close()
	send := func(kind string, b []byte) {
		if _, err := c.Write(b); err == nil {
			h.sentTo(id, pid, kind, 1)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(h.intn(1<<30)), uint64(id)))
	for range 5 {
		junk := make([]byte, 1+rng.IntN(300))
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		send(hUDPMalformed, junk)
	}
	src := int64(1000 + rng.IntN(1000))
	for range 3 {
		if b, err := h.forged.Encode(wire.Frame{Type: "TOKEN", Src: src, Epoch: 1 << 40,
			Payload: json.RawMessage(`{"token":{"gen":999999,"seq":1}}`)}); err == nil {
			send(hUDPBadMAC, b)
		}
	}
	// Authenticated but meaningless: the node counts it as unusable; the
	// same bytes again are a replay.
	if b, err := h.good.Encode(wire.Frame{Type: "CHAOS_PROBE", Src: src, Dst: id}); err == nil {
		send(hUDPUnusable, b)
		time.Sleep(5 * time.Millisecond) // in order on loopback, but the replay must come second
		send(hUDPReplay, b)
	}
	if b, err := h.stale.Encode(wire.Frame{Type: "WAKE", Src: src, Dst: id}); err == nil {
		send(hUDPStale, b)
	}
	// As a peer holding the key, in the names of real nodes.
	ids := h.p.ids()
	other := ids[rng.IntN(len(ids))]
	third := ids[rng.IntN(len(ids))]
	if other == id || third == id || other == third {
		return
	}
	if b, err := h.good.Encode(wire.Frame{Type: "SUCCESSOR", Src: other, Dst: third, Epoch: 1 << 40,
		Payload: json.RawMessage(fmt.Sprintf(`{"succ":%d,"ver":1099511627776}`, id))}); err == nil {
		send(hUDPMisdirected, b)
	}
	if b, err := h.good.Encode(wire.Frame{Type: "COORDINATOR", Src: other, Dst: id, Epoch: 1 << 40}); err == nil {
		send(hUDPProposal, b)
	}
	if b, err := h.good.Encode(wire.Frame{Type: "TOKEN", Src: other, Dst: id,
		Payload: json.RawMessage(`{"token":{"gen":9223372036854775807,"seq":1}}`)}); err == nil {
		send(hUDPProposal, b)
	}
}

// clientProbe dials the client port, writes payload and reads the answers
// until the node closes the connection, expect ERROR lines came (if
// expect > 0), or the deadline. It returns the ERROR codes seen and
// whether the node closed the connection.
func clientProbe(ctx context.Context, addr string, payload []byte, expect int, within time.Duration) (map[string]int, bool, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(within))
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		werr <- err
	}()
	codes := map[string]int{}
	br := bufio.NewReaderSize(c, 64<<10)
	closed, seen := false, 0
	for expect <= 0 || seen < expect {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m protocol.ErrorV2 // a protocol-1 ERROR has no code
			if json.Unmarshal(line, &m) == nil && m.MessageType == protocol.TypeError {
				k := string(m.Code)
				if k == "" {
					k = "v1:" + firstWords(m.ErrorMessage, 3)
				}
				codes[k]++
				seen++
			}
		}
		if err != nil {
			var ne net.Error
			closed = !(errors.As(err, &ne) && ne.Timeout())
			break
		}
	}
	c.Close()
	<-werr
	return codes, closed, nil
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

func (h *hostile) client(ctx context.Context, id int64, cycle int) {
	addr := net.JoinHostPort(h.p.addrs[id].Host, strconv.Itoa(h.p.addrs[id].Client))
	record := func(kind string, codes map[string]int, ok bool, why string) {
		h.count(h.sent, id, kind, 1)
		for k, n := range codes {
			h.count(h.codes, id, k, n)
		}
		if ok {
			h.count(h.answered, id, kind, 1)
		} else {
			h.fail(id, kind, why)
		}
	}
	bad := strings.Join([]string{`{not json`, `[1,2,3]`, `{"messageType":"NOPE"}`,
		`{"messageType":"CHAT_MESSAGE","toUsername":"u01","messageContent":"before login"}`,
		"\x00\x01\xfe\xff garbage", `{"messageType":"LOGIN","username":""}`}, "\n") + "\n"
	if codes, _, err := clientProbe(ctx, addr, []byte(bad), 6, 3*time.Second); err == nil {
		n := 0
		for _, k := range codes {
			n += k
		}
		record(hClientBad, codes, n == 6, fmt.Sprintf("6 malformed lines: %d ERROR answers (%v)", n, codes))
	}
	if cycle%2 == 0 {
		long := append(bytes.Repeat([]byte("y"), 70<<10), '\n')
		if codes, closed, err := clientProbe(ctx, addr, long, 0, 5*time.Second); err == nil {
			record(hClientLong, codes, closed,
				fmt.Sprintf("oversized line: connection not closed (errors %v)", codes))
		}
	}
	if cycle%4 == 0 {
		flood := bytes.Repeat([]byte(`{"messageType":"ALIVE"}`+"\n"), 1500)
		if codes, closed, err := clientProbe(ctx, addr, flood, 0, 8*time.Second); err == nil {
			record(hClientFlood, codes, closed, fmt.Sprintf("flood: connection not closed (errors %v)", codes))
		}
	}
}
