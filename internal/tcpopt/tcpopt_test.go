package tcpopt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Both ends of a connection the node makes or accepts carry RTOMin where
// the kernel has the option; a plain socket keeps the kernel's minimum.
func TestDialedAndAcceptedConnectionsGetRTOMin(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := Dialer(0).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	defer a.Close()
	before, ok := rtoMinOf(a)
	if !ok {
		t.Skip("this kernel has no TCP_RTO_MIN_US (Linux 6.15 and later): the node keeps the kernel's minimum")
	}
	if before == RTOMin {
		t.Fatalf("an untuned accepted socket already has %v", before)
	}
	Tune(a)
	for name, conn := range map[string]net.Conn{"dialled": c, "accepted": a} {
		if d, _ := rtoMinOf(conn); d != RTOMin {
			t.Errorf("%s connection: minimum retransmission timeout %v, want %v", name, d, RTOMin)
		}
	}
}

// rtoMinOf reads a connection's minimum retransmission timeout; ok is
// false where the option is not supported.
func rtoMinOf(conn net.Conn) (d time.Duration, ok bool) {
	sc, isSys := conn.(syscall.Conn)
	if !isSys {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	_ = rc.Control(func(fd uintptr) { d, ok = getRTOMin(fd) })
	return d, ok
}

// The store's sockets carry StoreUserTimeout (and RTOMin) where the kernel
// has the options.
func TestStoreDialSetsTheUserTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := StoreDialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ut time.Duration
	var ok bool
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Control(func(fd uintptr) { ut, ok = getUserTimeout(fd) })
	if !ok {
		t.Skip("no TCP_USER_TIMEOUT here")
	}
	if ut != StoreUserTimeout {
		t.Errorf("user timeout %v, want %v", ut, StoreUserTimeout)
	}
	if d, ok := rtoMinOf(c); ok && d != RTOMin {
		t.Errorf("minimum retransmission timeout %v, want %v", d, RTOMin)
	}
}

// A request sent into a cut (every packet to and from the server's port
// dropped, made real with nft) fails within about StoreUserTimeout instead
// of waiting for the heal: the COMMIT of a node cut from the store gave up
// only 12 s after the heal without it. The same request on a socket
// without the option is still waiting when the other has failed.
func TestStoreRequestIntoACutFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for nft")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nft is not installed: .ci/run installs nftables")
		}
		t.Skip("nft is not installed (apt-get install nftables)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // never answers
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	tuned, err := StoreDialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tuned.Close()
	plain, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	table := fmt.Sprintf("tcpopt_test_%d", os.Getpid())
	rules := fmt.Sprintf("table inet %s {\n chain pre {\n  type filter hook prerouting priority -150; policy accept;\n  tcp dport %d drop\n  tcp sport %d drop\n }\n}\n", table, port, port)
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("nft cannot make the cut here: %v: %s", err, out)
	}
	defer func() {
		if out, err := exec.Command("nft", "delete", "table", "inet", table).CombinedOutput(); err != nil {
			t.Errorf("removing the nft table: %v: %s", err, out)
		}
	}()
	failed := make(chan error, 2)
	for _, c := range []net.Conn{tuned, plain} {
		go func() {
			if _, err := c.Write([]byte("COMMIT")); err != nil {
				failed <- err
				return
			}
			_, err := c.Read(make([]byte, 1))
			failed <- err
		}()
	}
	start := time.Now()
	select {
	case err := <-failed:
		took := time.Since(start)
		if !errors.Is(err, syscall.ETIMEDOUT) {
			t.Fatalf("the request into the cut failed with %v, want ETIMEDOUT", err)
		}
		if took > 4*StoreUserTimeout {
			t.Errorf("the request into the cut failed after %v, want about %v", took, StoreUserTimeout)
		}
	case <-time.After(20 * StoreUserTimeout):
		t.Fatalf("a request sent into a cut still waits after %v", 20*StoreUserTimeout)
	}
	// The plain socket is still waiting: it is the option that ended the other.
	select {
	case err := <-failed:
		t.Errorf("the socket without the option failed too (%v): the cut, not the option, ended them", err)
	default:
	}
}
