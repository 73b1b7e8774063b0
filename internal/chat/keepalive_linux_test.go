package chat

import (
	"bufio"
	"crypto/tls"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// Accepted client connections, plain and TLS, have TCP keep-alive on with
// the configured idle time, interval and count: it is what notices a dead
// peer of a protocol-1 session, which is never closed for silence. Read
// from the server's side of the sockets.
func TestKeepAliveOnAcceptedConnections(t *testing.T) {
	ka := net.KeepAliveConfig{Enable: true, Idle: 37 * time.Second, Interval: 7 * time.Second, Count: 3}
	certs := testutil.NewCerts(t)
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plain", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(t, 1, func(c *Config) {
				c.KeepAlive = ka
				if tc.tls {
					c.TLS = &tls.Config{Certificates: []tls.Certificate{certs.Cert}, MinVersion: tls.VersionTLS12}
				}
			})
			var c *raw
			if tc.tls {
				nc, err := tls.Dial("tcp", r.addr(1), &tls.Config{RootCAs: certs.Pool, ServerName: "127.0.0.1"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				c = &raw{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<20)}
			} else {
				c = dialRaw(t, r.addr(1))
			}
			c.login("old") // protocol 1: the session that relies on keep-alive
			got := serverSockopts(t, r.servers[0])
			want := [4]int{1, 37, 7, 3}
			if got != want {
				t.Fatalf("server side SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT = %v, want %v", got, want)
			}
		})
	}
}

// serverSockopts reads the keep-alive options of the server's one client
// connection: SO_KEEPALIVE, TCP_KEEPIDLE (s), TCP_KEEPINTVL (s), TCP_KEEPCNT.
func serverSockopts(t *testing.T, s *Server) [4]int {
	t.Helper()
	s.mu.Lock()
	var conns []*conn
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("%d server connections, want 1", len(conns))
	}
	tc, ok := tcpConn(conns[0].nc)
	if !ok {
		t.Fatalf("server connection %T is not over TCP", conns[0].nc)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got [4]int
	var errs []error
	opts := [4][2]int{
		{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE},
		{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE},
		{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL},
		{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT},
	}
	if err := rc.Control(func(fd uintptr) {
		for i, o := range opts {
			v, err := syscall.GetsockoptInt(int(fd), o[0], o[1])
			got[i] = v
			if err != nil {
				errs = append(errs, err)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return got
}
