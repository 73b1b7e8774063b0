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
	"net"
	"strconv"
	"sync"
)

// FreePort returns a port free for both TCP and UDP on 127.0.0.1 (a node
// uses one number for both).
func FreePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("procutil: no free TCP+UDP port found")
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
