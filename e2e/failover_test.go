package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestClientLeavesStoppedNode: a ringchat started with only --node of a
// node learns the ring's other nodes at login (and keeps them); when
// that node is stopped (SIGSTOP: its sockets stay open, nothing answers)
// it moves to another node within 3 s, and the message typed meanwhile
// arrives once. A later one-shot command given only a dead node's address
// fails over to the nodes kept.
func TestClientLeavesStoppedNode(t *testing.T) {
	bin, err := testutil.Build("./cmd/ringchat", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startClientRing(t, bin) // with a cache of its own, empty
	bob := c.session(t, 1, "bob")

	alice := c.start(t, "--node", c.addr(2), "--user", "alice")
	alice.waitOut("connected to node 2 (" + c.addr(2) + ") as alice")
	kept := filepath.Join(c.cache, "ringchat", "nodes.json")
	testutil.Eventually(t, within, "the ring's nodes kept", func() bool {
		b, err := os.ReadFile(kept)
		return err == nil && strings.Contains(string(b), c.addr(1)) && strings.Contains(string(b), c.addr(3))
	})

	c.r.Signal(2, syscall.SIGSTOP)
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			c.r.Signal(2, syscall.SIGCONT)
		}
	}
	defer resume()
	alice.send("/msg bob typed while node 2 sleeps")
	alice.waitOut("reconnected at node ")
	took := time.Since(stopped)
	t.Logf("left the stopped node after %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("moved %v after SIGSTOP, want within 3s; stdout:\n%s", took, alice.stdout)
	}
	if !strings.Contains(alice.stdout.String(), "error: connection to node 2 lost (node 2 at "+c.addr(2)+" did not answer") {
		t.Errorf("the move does not say why; stdout:\n%s", alice.stdout)
	}
	if m := receive(t, bob, "typed while node 2 sleeps"); m.From != "alice" {
		t.Fatalf("bob got %+v", m)
	}
	alice.waitOut("you -> bob: typed while node 2 sleeps (stored)")

	// Node 2 wakes up with the message in its socket: it is not
	// delivered again (bob's next message is the next one alice sends).
	resume()
	alice.send("/msg bob after the wake-up")
	for {
		m := receiveAny(t, bob)
		if m.Content == "after the wake-up" {
			break
		}
		t.Fatalf("bob got %q again before the next message", m.Content)
	}
	if code := alice.exit(); code != 0 {
		t.Errorf("alice: exit %d", code)
	}

	// A node down, given alone: the nodes kept are tried next.
	c.r.Kill(3)
	code, _, errOut := c.run(t, "send", "--node", c.addr(3), "--user", "carol", "--to", "bob", "through a kept node")
	if code != 0 {
		t.Fatalf("send through the kept nodes: exit %d, %s", code, errOut)
	}
	receive(t, bob, "through a kept node")
}

// receiveAny waits for the next chat message on s.
func receiveAny(t *testing.T, s *client.Session) client.ChatMessage {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("%s: session ended", s.User())
			}
			if m, isChat := ev.(client.ChatMessage); isChat {
				return m
			}
		case <-timeout:
			t.Fatalf("%s: no message within %v", s.User(), within)
		}
	}
}
