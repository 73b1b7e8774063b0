package chat

import (
	"fmt"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestRegisterCapIsTen: one address makes 10 accounts (docs/PROTOCOL.md,
// "Accounts": 10 failed attempts from one address, a REGISTER counting as
// one); the 11th REGISTER is refused without making its account.
func TestRegisterCapIsTen(t *testing.T) {
	r := newRing(t, 1, nil)
	c := dialRaw(t, r.addr(1))
	for i := range 10 {
		c.send(fmt.Sprintf(`{"messageType":"REGISTER","username":"bulk%d","password":"pw","id":"r%d"}`, i, i))
		c.expect(fmt.Sprintf(`{"messageType":"REGISTER","username":"bulk%d","id":"r%d"}`, i, i))
	}
	c.send(`{"messageType":"REGISTER","username":"bulk10","password":"pw","id":"r10"}`)
	c.expect(`{"messageType":"ERROR","code":"LOGIN_THROTTLED","errorMessage":"too many attempts from your address: try again in 1s","id":"r10"}`)
	if userExists(t, r.st, "bulk10") {
		t.Error("the refused REGISTER made its account")
	}
}

// TestWrongPasswordThrottleRingWide: wrong passwords for one account sent
// to every node of a ring at once are checked 3 times in all, not 3 times
// per node: the count lives in the store. Then the account is throttled
// at every node, the right password included.
func TestWrongPasswordThrottleRingWide(t *testing.T) {
	const nodes = 5
	// The wait is long enough that no attempt of the test outlives it, and
	// the address throttle (every client is 127.0.0.1) is out of the way.
	tweak := func(c *Config) {
		c.Throttle.Base, c.Throttle.Max = time.Hour, time.Hour
		c.Throttle.AddressFree = 1000
	}
	for _, db := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"SQLite", func(t *testing.T) store.Store { return newStore(t, nodes) }},
		{"MariaDB", func(t *testing.T) store.Store {
			st := storetest.Open(t, testutil.MySQLDSN(t))
			storetest.SeedRing(t, st, nodes)
			return st
		}},
	} {
		t.Run(db.name, func(t *testing.T) {
			r := newRingOn(t, db.open(t), nodes, tweak)
			reg := dialRaw(t, r.addr(1))
			reg.send(`{"messageType":"REGISTER","username":"target","password":"right","id":"r"}`)
			reg.expect(`{"messageType":"REGISTER","username":"target","id":"r"}`)

			// Two connections per node, three guesses each, all sent at once.
			const perNode, guesses = 2, 3
			var conns []*raw
			for id := int64(1); id <= nodes; id++ {
				for range perNode {
					conns = append(conns, dialRaw(t, r.addr(id)))
				}
			}
			for i, c := range conns {
				for g := range guesses {
					c.send(login2("target", fmt.Sprintf("guess-%d-%d", i, g), fmt.Sprint("g", g)))
				}
			}
			counts := map[string]int{}
			for _, c := range conns {
				for range guesses {
					m := c.obj()
					counts[fmt.Sprint(m["code"])]++
				}
			}
			want := map[string]int{string(protocol.CodeBadPassword): 3, string(protocol.CodeThrottled): nodes*perNode*guesses - 3}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				t.Fatalf("answers to %d wrong passwords at %d nodes = %v, want %v (3 checked in all)",
					nodes*perNode*guesses, nodes, counts, want)
			}
			// Every node now refuses the account's logins unchecked.
			for id := int64(1); id <= nodes; id++ {
				c := dialRaw(t, r.addr(id))
				c.send(login2("target", "right", "ok"))
				c.expectError(protocol.CodeThrottled, "too many failed logins for \"target\"")
			}
		})
	}
}
