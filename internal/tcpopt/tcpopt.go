// Package tcpopt tunes the node's own TCP sockets for a LAN: the store's
// connections and the ring's links.
//
// Linux retransmits a lost segment after at least 200 ms (its minimum
// retransmission timeout), however short the round trip. On a LAN whose
// round trip is well under a millisecond one lost packet then stalls a
// store statement, a TOKEN or its TOKEN_ACK for 200 ms: a visit held to
// 100-400 ms fails on it, and two losses in a row outlast the token's
// 300-ms acknowledgement timeout and splice a live successor out. The node
// lowers the minimum on its own sockets to RTOMin (TCP_RTO_MIN_US, Linux
// 6.15 and later): the kernel's timeout stays the path's smoothed round
// trip plus four deviations, so a slow path still waits as long as it
// needs. A kernel without the option keeps its own minimum (best effort;
// nothing fails). Only the node's end changes: what a peer sends (the
// store's answers) still waits for the peer's own minimum.
package tcpopt

import (
	"context"
	"net"
	"syscall"
	"time"
)

// RTOMin is the minimum retransmission timeout the node asks for on its
// TCP sockets: ten times a slow LAN round trip, a tenth of Linux's default.
const RTOMin = 20 * time.Millisecond

// Control is a net.Dialer Control function that sets RTOMin on the
// socket before it connects. It never fails a dial.
func Control(_, _ string, c syscall.RawConn) error {
	_ = c.Control(func(fd uintptr) { _ = setRTOMin(fd, RTOMin) })
	return nil
}

// Dialer returns a net.Dialer with timeout whose sockets get RTOMin.
func Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: Control}
}

// StoreUserTimeout is how long what the node sent the database server may
// stay unacknowledged before the kernel gives the connection up
// (TCP_USER_TIMEOUT): a second, six retransmissions at RTOMin. A
// statement's wait is bounded by its context (the driver closes the
// connection), but a transaction's COMMIT has no context: sent into a cut
// between the node and the server, it waited for the server's answer until
// the heal and the server's next retransmission (26 s in a chaos run, the
// token held all that time by the cut node, the ring without a visit). The
// server, for its part, aborts a transaction silent for a second
// (idle_write_transaction_timeout), so the fence's lock is free about when
// the cut node gives up and passes the token on.
const StoreUserTimeout = time.Second

// StoreDialContext dials the database server: RTOMin and StoreUserTimeout
// on the socket (for the driver's dial hook).
func StoreDialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		_ = c.Control(func(fd uintptr) {
			_ = setRTOMin(fd, RTOMin)
			_ = setUserTimeout(fd, StoreUserTimeout)
		})
		return nil
	}}
	return d.DialContext(ctx, network, addr)
}

// Tune sets RTOMin on an accepted connection (best effort).
func Tune(conn net.Conn) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	if rc, err := sc.SyscallConn(); err == nil {
		_ = Control("", "", rc)
	}
}
