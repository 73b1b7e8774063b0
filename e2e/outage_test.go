package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/testutil"
)

// tcpProxy forwards connections from its address to a server's, until it
// is cut: then its connections close and new ones are refused, until it
// is healed (on the same address).
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
}

// forward joins c to a new connection to the target.
func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 3*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(pair[0], pair[1])
			pair[0].Close()
			pair[1].Close()
		}()
	}
}

// cut closes the listener and every connection: the server is gone.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// heal listens again on the proxy's address.
func (p *tcpProxy) heal() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// v1Line is a protocol-1 client speaking lines.
type v1Line struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialV1(t *testing.T, addr, user string) *v1Line {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &v1Line{t: t, nc: nc, br: bufio.NewReader(nc)}
	c.send(map[string]any{"messageType": "LOGIN", "username": user})
	if m := c.next(); m["messageType"] != "LOGIN" {
		t.Fatalf("login %s: %v", user, m)
	}
	return c
}

func (c *v1Line) send(m map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	if _, err := c.nc.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

func (c *v1Line) chat(to, text string) {
	c.send(map[string]any{"messageType": "CHAT_MESSAGE", "toUsername": to, "messageContent": text})
}

func (c *v1Line) next() map[string]any {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(within))
	l, err := c.br.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(l, &m); err != nil {
		c.t.Fatalf("line %q: %v", l, err)
	}
	return m
}

// A node cut from MariaDB while its clients send keeps their messages and
// stores them once the store is back: they arrive once, and neither the
// protocol-1 nor the protocol-2 sender gets an ERROR. The cut lasts longer
// than chat.Config.PoisonStreak's default (5 s) and many failed visits,
// the outage that was taken for a poison message (issue 28).
func TestNodeCutFromStoreKeepsMessages(t *testing.T) {
	dsn := testutil.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, cfg.Addr)
	cfg.Addr = proxy.addr
	r := testutil.NewRing(t, ringnodeBin, dsn, 1, 2, 3)
	r.Start(3)
	openWhenMigrated(t, dsn)
	r.Start(2)
	r.Start(1, "--db", cfg.FormatDSN()) // node 1 reaches MariaDB through the proxy
	c := &chatRing{r: r}
	b := c.v2(t, 2, "b", client.Options{AutoAck: true})
	a := c.v2(t, 1, "a", client.Options{AutoAck: true})
	p := dialV1(t, c.addr(1), "p")
	// Node 1 stores and delivers, and knows b (a recipient known at the
	// node is accepted without the store).
	p.chat("b", "warm")
	waitChat(t, b, func(m client.ChatMessage) bool { return m.Content == "warm" })

	p.chat("b", "just before the cut")
	proxy.cut()
	cutAt := time.Now()
	p.chat("b", "during the cut")
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	id, err := a.Post(ctx, client.ToUser("b"), "v2 during the cut")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, within, "node 1's visits fail for longer than PoisonStreak", func() bool {
		return bytes.Count(r.Log(1), []byte("chat: visit failed")) >= 5 && time.Since(cutAt) > 6*time.Second
	})
	proxy.heal()
	healAt := time.Now()
	got := map[string]int{}
	for got["during the cut"] == 0 || got["v2 during the cut"] == 0 {
		got[waitChat(t, b, func(client.ChatMessage) bool { return true }).Content]++
	}
	delivered := time.Since(healAt)
	p.chat("p", "after")
	if m := p.next(); m["messageType"] != "CHAT_MESSAGE" || m["messageContent"] != "after" {
		t.Fatalf("protocol-1 sender got %v, want its own message (no ERROR)", m)
	}
	waitReceipt(t, a, id)
	if _, err := a.SendWait(ctx, client.ToUser("b"), "last"); err != nil {
		t.Fatal(err)
	}
	for got["last"] == 0 {
		got[waitChat(t, b, func(client.ChatMessage) bool { return true }).Content]++
	}
	want := map[string]int{"just before the cut": 1, "during the cut": 1, "v2 during the cut": 1, "last": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("b got %v, want %v", got, want)
	}
	if log := r.Log(1); bytes.Contains(log, []byte("set aside")) {
		t.Fatalf("node 1 set work aside:\n%s", grepLines(log, "set aside"))
	}
	t.Logf("cut %v, %d failed visits at node 1; delivered %v after the heal",
		healAt.Sub(cutAt).Round(time.Millisecond), bytes.Count(r.Log(1), []byte("chat: visit failed")), delivered.Round(time.Millisecond))
}

// waitReceipt waits for STORED for id on c, failing on an ERROR for it.
func waitReceipt(t *testing.T, c *client.Conn, id string) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection ended: %v", c.Err())
			}
			switch ev := ev.(type) {
			case client.Stored:
				if ev.ID == id {
					return
				}
			case client.ErrorMessage:
				if ev.ID == id || ev.ID == "" {
					t.Fatalf("ERROR for a message sent during the cut: %+v", ev)
				}
			}
		case <-timeout:
			t.Fatal(errors.New("no STORED for the message sent during the cut"))
		}
	}
}

// grepLines returns the lines of log that contain s.
func grepLines(log []byte, s string) string {
	var out []string
	for l := range strings.SplitSeq(string(log), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
