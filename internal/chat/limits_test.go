package chat

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/testutil"
)

// A connection that never logs in is closed when the login timeout, counted
// from accept, runs out, however many blank lines and ALIVEs it sends.
func TestLoginDeadlineIsFixedAtAccept(t *testing.T) {
	const login = 500 * time.Millisecond
	r := newRing(t, 1, func(c *Config) { c.LoginTimeout = login })
	c := dialRaw(t, r.addr(1))
	start := time.Now()
	closed := make(chan []string, 1)
	go func() {
		var lines []string
		_ = c.nc.SetReadDeadline(time.Now().Add(waitLimit))
		for {
			l, err := c.br.ReadString('\n')
			if err != nil {
				closed <- lines
				return
			}
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
	}()
	keepAlive := time.NewTicker(login / 5)
	defer keepAlive.Stop()
	giveUp := time.After(6 * login)
	for {
		select {
		case lines := <-closed:
			elapsed := time.Since(start)
			if elapsed > 3*login {
				t.Errorf("closed after %v, login timeout %v", elapsed, login)
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "not logged in after") {
				t.Errorf("closing lines %q, want one IDLE_TIMEOUT error", lines)
			}
			return
		case <-keepAlive.C:
			// Errors once the server has closed: the reader reports it.
			_, _ = c.nc.Write([]byte("\n   \n{\"messageType\":\"ALIVE\"}\n"))
		case <-giveUp:
			t.Fatalf("a connection sending blank lines and ALIVE is still open after %v (login timeout %v)", 6*login, login)
		}
	}
}

// One address cannot hold more than MaxClientsPerIP connections; the one
// over the cap is told why, and a slot freed is usable again.
func TestClientsPerAddressCapped(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.MaxClientsPerIP = 2 })
	a := dialRaw(t, r.addr(1))
	a.login("alice")
	b := dialRaw(t, r.addr(1)) // connected, not logged in: it counts too
	eventually(t, "two clients counted", func() bool { return r.servers[0].Stats().Clients == 2 })

	over := dialRaw(t, r.addr(1))
	lines := over.closed()
	if len(lines) != 1 || !strings.Contains(lines[0], `"errorMessage":"too many connections from 127.0.0.1: at most 2 per address"`) {
		t.Fatalf("refused connection got %q, want one ERROR naming the cap", lines)
	}
	if st := r.servers[0].Stats(); st.Refused != 1 || st.Clients != 2 {
		t.Errorf("stats after the refusal: %+v", st)
	}

	b.nc.Close()
	eventually(t, "the closed client's slot freed", func() bool { return r.servers[0].Stats().Clients == 1 })
	c := dialRaw(t, r.addr(1))
	c.login("carol")
	c.send(chatTo("alice", "room again"))
	m := a.obj()
	if m["messageContent"] != "room again" || m["fromName"] != "carol" {
		t.Errorf("alice got %v", m)
	}
}

func TestConfigRejectsBadLimits(t *testing.T) {
	st := newStore(t, 1)
	cfg := testConfig(t, 1, st)
	cfg.MaxClientsPerIP = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "MaxClientsPerIP") {
		t.Errorf("MaxClientsPerIP 0: %v", err)
	}
	cfg = testConfig(t, 1, st)
	cfg.TLS = &tls.Config{}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("TLS without a certificate: %v", err)
	}
	// Keep-alive is what finds the dead peers of protocol-1 sessions.
	for _, ka := range []net.KeepAliveConfig{{}, {Enable: true}, {Enable: true, Idle: time.Minute, Interval: time.Second}} {
		cfg = testConfig(t, 1, st)
		cfg.KeepAlive = ka
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "KeepAlive") {
			t.Errorf("KeepAlive %+v: %v", ka, err)
		}
	}
}

// A socket whose peer stopped answering keep-alive probes fails with
// ETIMEDOUT: the peer is gone, and the connection closes as for a reset,
// not as an IDLE_TIMEOUT of ours (a protocol-1 session has no idle limit,
// and "nothing received for 5m0s" would be untrue). Our own read deadline
// still closes with IDLE_TIMEOUT.
func TestPeerGoneIsNotIdle(t *testing.T) {
	s, err := New(testConfig(t, 1, newStore(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		want protocol.Code // "": closed without a reason, not counted as dropped
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}, ""},
		{&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, protocol.CodeIdle},
	} {
		server, client := net.Pipe()
		c := newConn(s, server, "127.0.0.1")
		c.sess, c.version = &session{name: "u", version: protocol.V2}, protocol.V2
		dropped := s.stats.dropped.Load()
		c.readFailed(tc.err)
		var got protocol.Code
		if c.final != nil {
			got = c.final.Code
		}
		if !c.closed() || got != tc.want || (s.stats.dropped.Load() != dropped) != (tc.want != "") {
			t.Errorf("%v: closed %v with %q (dropped %d more), want %q", tc.err, c.closed(), got, s.stats.dropped.Load()-dropped, tc.want)
		}
		server.Close()
		client.Close()
	}
}

// With TLS configured the client port speaks TLS: two users chat over it,
// verifying the server against a CA made here; a plain-text client gets
// nothing it can read.
func TestChatOverTLS(t *testing.T) {
	certs := testutil.NewCerts(t)
	r := newRing(t, 1, func(c *Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{certs.Cert}, MinVersion: tls.VersionTLS12}
	})
	dialTLS := func() *raw {
		t.Helper()
		nc, err := tls.Dial("tcp", r.addr(1), &tls.Config{RootCAs: certs.Pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &raw{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<20)}
	}
	alice, bob := dialTLS(), dialTLS()
	alice.login("alice")
	bob.login("bob")
	alice.send(chatTo("bob", "over TLS"))
	if m := bob.obj(); m["messageContent"] != "over TLS" || m["fromName"] != "alice" {
		t.Errorf("bob got %v", m)
	}

	plain := dialRaw(t, r.addr(1))
	plain.send(`{"messageType":"LOGIN","username":"mallory"}`)
	for _, l := range plain.closed() {
		if strings.Contains(l, "LOGIN") {
			t.Errorf("a plain-text client was served: %q", l)
		}
	}
}

// A client refused for its address (or a full node) is told why: the
// login fails at once with the server's reason and code, on every node it
// was given, not with a lost connection after retrying until its deadline.
func TestRefusedClientToldWhy(t *testing.T) {
	r := newRing(t, 2, func(c *Config) { c.MaxClientsPerIP = 1 })
	_ = dialV2(t, r.addr(1), "a", "", client.Options{})
	_ = dialV2(t, r.addr(2), "b", "", client.Options{})
	_, err := client.DialV2(ctxT(t), []string{r.addr(1), r.addr(2)}, "c", "", client.Options{Timeout: waitLimit})
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != protocol.CodeTooManyConns || !strings.Contains(se.Message, "at most 1 per address") {
		t.Fatalf("login over the cap: %v, want TOO_MANY_CONNECTIONS with the reason", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the refusal took the whole deadline: %v", err)
	}
}
