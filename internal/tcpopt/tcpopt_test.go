package tcpopt

import (
	"net"
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
