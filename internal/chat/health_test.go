package chat

import (
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
)

const loginFailover = `{"messageType":"LOGIN","username":"alice","version":2,"features":["failover"],"id":"l1"}`

// TestFailoverLogin: a login asking for "failover" is told the ring's
// nodes and the feature granted, and its ALIVE with an id is answered; a
// login without it sees neither, and protocol 1 never gets an answer to
// ALIVE.
func TestFailoverLogin(t *testing.T) {
	r := newRing(t, 1, nil)
	srv := r.servers[0]
	srv.SetNodes([]protocol.NodeAddr{{Node: 1, Addr: "127.0.0.1:8001"}, {Node: 2, Addr: "127.0.0.1:8002"}})

	a := dialRaw(t, r.addr(1))
	a.send(loginFailover)
	a.expect(`{"messageType":"LOGIN","username":"alice","version":2,"node":1,"features":["failover"],"nodes":[{"node":1,"addr":"127.0.0.1:8001"},{"node":2,"addr":"127.0.0.1:8002"}],"id":"l1"}`)
	a.send(`{"messageType":"ALIVE","id":"p1"}`)
	a.expect(`{"messageType":"ALIVE","id":"p1"}`)

	b := dialRaw(t, r.addr(1))
	b.loginV2("bob", "")
	b.send(`{"messageType":"ALIVE","id":"p1"}`, `{"messageType":"WHO","id":"w"}`)
	if m := b.obj(); m["messageType"] != "ALIVE" || m["id"] != "p1" {
		t.Fatalf("v2 ALIVE answer %v", m)
	}

	c := dialRaw(t, r.addr(1))
	c.login("carol")
	c.send(`{"messageType":"ALIVE","id":"p1"}`)
	c.join("g") // the next line is the echo: ALIVE got no answer
}

// TestHealthNotices: a node that loses the store tells its protocol-2
// sessions that asked for "failover" at once, refuses a new LOGIN at
// once, and says when it serves again; protocol 1 is told nothing.
func TestHealthNotices(t *testing.T) {
	r := newRing(t, 1, nil)
	srv := r.servers[0]
	a := dialRaw(t, r.addr(1))
	a.send(loginFailover)
	a.obj()
	old := dialRaw(t, r.addr(1))
	old.login("carol")

	srv.SetHealth(Health{StoreDown: true})
	a.expect(`{"messageType":"NOTICE","code":"STORE_UNREACHABLE","node":1,"message":"node 1 cannot reach the store: log in at another node"}`)
	old.join("g") // protocol 1: the echo, no NOTICE before it

	for _, login := range []string{
		`{"messageType":"LOGIN","username":"bob","version":2,"id":"l2"}`,
		`{"messageType":"LOGIN","username":"dave"}`,
	} {
		n := dialRaw(t, r.addr(1))
		start := time.Now()
		n.send(login)
		n.expectError(protocol.CodeUnavailable, "node 1 cannot reach the store; log in at another node")
		if took := time.Since(start); took > time.Second {
			t.Fatalf("refused after %v, want at once", took)
		}
	}

	srv.SetHealth(Health{OutOfRing: true})
	a.expect(`{"messageType":"NOTICE","code":"OUT_OF_RING","node":1,"message":"node 1 is out of the ring: log in at another node"}`)
	srv.SetHealth(Health{})
	a.expect(`{"messageType":"NOTICE","code":"NODE_OK","node":1,"message":"node 1 serves again"}`)
	n := dialRaw(t, r.addr(1))
	n.loginV2("bob", "")
}

// TestLoginLeaving: a user logged in at a node of the ring logs in at
// another only when the client says it left that node (a node cut from
// the store cannot clear the presence); the node left closes the old
// session once it sees the presence elsewhere.
func TestLoginLeaving(t *testing.T) {
	joined := make(chan struct{}, 1)
	r := newRing(t, 2, func(c *Config) {
		if c.NodeID == 1 {
			c.Joined = joined
		}
	})
	a := dialRaw(t, r.addr(1))
	a.send(loginFailover)
	a.obj()

	b := dialRaw(t, r.addr(2))
	b.send(strings.Replace(loginFailover, `"id":"l1"`, `"id":"l2"`, 1))
	b.expectError(protocol.CodeUserOnline, "already logged in at node 1")
	b.send(`{"messageType":"LOGIN","username":"alice","version":2,"features":["failover"],"leaving":2,"id":"l3"}`)
	b.expectError(protocol.CodeUserOnline, "already logged in at node 1") // not the node it was at
	b.send(`{"messageType":"LOGIN","username":"alice","version":2,"leaving":1,"id":"l4"}`)
	b.expectError(protocol.CodeUserOnline, "already logged in at node 1") // "leaving" needs the feature
	b.send(`{"messageType":"LOGIN","username":"alice","version":2,"features":["failover"],"leaving":1,"id":"l5"}`)
	if m := b.obj(); m["messageType"] != "LOGIN" || m["node"] != float64(2) {
		t.Fatalf("login at node 2: %v", m)
	}
	joined <- struct{}{} // node 1's presence check runs now, not in 10 s
	a.expectError(protocol.CodeUserOnline, "logged in at another node")
}
