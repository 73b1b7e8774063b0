package tcpopt

import (
	"net"
	"testing"
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
	before, ok := RTOMinOf(a)
	if !ok {
		t.Skip("this kernel has no TCP_RTO_MIN_US (Linux 6.15 and later): the node keeps the kernel's minimum")
	}
	if before == RTOMin {
		t.Fatalf("an untuned accepted socket already has %v", before)
	}
	Tune(a)
	for name, conn := range map[string]net.Conn{"dialled": c, "accepted": a} {
		if d, _ := RTOMinOf(conn); d != RTOMin {
			t.Errorf("%s connection: minimum retransmission timeout %v, want %v", name, d, RTOMin)
		}
	}
}
