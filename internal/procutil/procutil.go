// Package procutil runs ringnode processes on this machine for the
// programs that need a ring of them: `ringnode cluster`, the end-to-end
// tests (internal/testutil), the chaos suite and the benchmark. Its
// Supervisor starts node processes with their arguments, environment and
// log capture, records when and why each exited, signals them (SIGTERM,
// SIGKILL, SIGSTOP, SIGCONT), restarts them and stops them all; FreePort,
// FreePorts and Buffer are what their node lists and logs need.
package procutil

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort returns a port free for both TCP and UDP on 127.0.0.1 (a node
// uses one number for both), chosen below the kernel's ephemeral range
// when it can be read. A port from that range, found free and released,
// can be taken before the node binds it, as the source port of any
// outgoing connection (the database's, a client's) or by another
// program's listen on port 0: seen in make test, a node that could not
// bind its metrics port ("address already in use").
func FreePort() (int, error) {
	if lo, hi, ok := portBand(); ok {
		for range 200 {
			if port := lo + rand.IntN(hi-lo); bindable(port) {
				return port, nil
			}
		}
	}
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if bindable(port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("procutil: no free TCP+UDP port found")
}

// bindable reports whether port is free for TCP and UDP on 127.0.0.1 now.
func bindable(port int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// portBandLow is the lowest port FreePort hands out from below the
// ephemeral range.
const portBandLow = 10000

// portBand is the band of ports below the kernel's ephemeral range
// (Linux's ip_local_port_range), or ok false where it cannot be read or
// leaves no room.
func portBand() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, 0, false
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first <= portBandLow+1000 {
		return 0, 0, false
	}
	return portBandLow, first, true
}

// FreePorts returns k free ports, no two alike: a port found free and
// released can be handed out again by the next search.
func FreePorts(k int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < k; tries++ {
		if tries > 50*k {
			return nil, fmt.Errorf("procutil: no %d distinct free ports", k)
		}
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// Buffer collects a process's output; it is safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Bytes returns a copy of what was written.
func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}
