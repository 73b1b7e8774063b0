package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/store/storetest"
	"github.com/ringchat/ringchat/internal/testutil"
)

// userExists reports whether the store has a user of this name.
func userExists(t *testing.T, st store.Store, name string) bool {
	t.Helper()
	var found bool
	err := st.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.UserByName(name)
		found = err == nil
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func login2(user, password, id string) string {
	return fmt.Sprintf(`{"messageType":"LOGIN","username":%q,"version":2,"password":%q,"id":%q}`, user, password, id)
}

// TestUsedNameCannotBeClaimed: a name used with protocol 1 cannot be
// taken by someone else's password (they would get its queued messages and
// its groups' history, and lock the owner out); the owner sets a password
// from their own session.
func TestUsedNameCannotBeClaimed(t *testing.T) {
	r := newRing(t, 2, nil)
	alice := dialRaw(t, r.addr(1))
	alice.login("alice_s")
	alice.join("g")
	alice.nc.Close()
	eventually(t, "alice logged out", func() bool {
		on, err := r.st.Online(context.Background())
		return err == nil && len(on) == 0
	})
	bob := dialRaw(t, r.addr(2))
	bob.login("bob")
	bob.send(chatTo("alice_s", "for alice only"))
	eventually(t, "message queued for alice", func() bool { return storetest.PendingFor(t, r.st, "alice_s") == 1 })

	stranger := dialRaw(t, r.addr(2))
	stranger.send(login2("alice_s", "mine now", "s1"))
	stranger.expectError(protocol.CodePasswordNotSet, "SET_PASSWORD")
	stranger.send(`{"messageType":"HISTORY","toGroup":"g"}`)
	stranger.expectError(protocol.CodeNotLoggedIn, "log in first")

	// The owner still logs in the original way and gets the message.
	alice = dialRaw(t, r.addr(1))
	alice.login("alice_s")
	if got := alice.line(); !strings.Contains(got, "for alice only") {
		t.Fatalf("alice got %s", got)
	}
	alice.nc.Close()
	eventually(t, "alice logged out", func() bool {
		on, err := r.st.Online(context.Background())
		return err == nil && len(on) == 1
	})
	// From a session of her own (protocol 2, no password yet) she sets one.
	a2 := dialRaw(t, r.addr(1))
	a2.loginV2("alice_s", "")
	a2.send(`{"messageType":"SET_PASSWORD","password":"hunter2","id":"p1"}`)
	a2.expect(`{"messageType":"SET_PASSWORD","username":"alice_s","id":"p1"}`)
	a2.send(`{"messageType":"SET_PASSWORD","id":"p2"}`)
	a2.expectError(protocol.CodeBadRequest, "SET_PASSWORD needs a password")
	a2.nc.Close()
	eventually(t, "alice logged out", func() bool {
		on, err := r.st.Online(context.Background())
		return err == nil && len(on) == 1
	})
	v1 := dialRaw(t, r.addr(2))
	v1.send(`{"messageType":"LOGIN","username":"alice_s"}`)
	v1.expect(`{"messageType":"ERROR","errorMessage":"user \"alice_s\" is protected by a password: log in with protocol version 2 and the password"}`)
	v1.loginV2("alice_s", "hunter2")
	// SET_PASSWORD is protocol 2: the original client cannot send it.
	bob.send(`{"messageType":"SET_PASSWORD","password":"x"}`)
	bob.expect(`{"messageType":"ERROR","errorMessage":"unknown messageType \"SET_PASSWORD\""}`)
}

// TestFailedLoginsThrottled: after 3 wrong passwords (docs/PROTOCOL.md,
// "Accounts") the next attempt, even with the right password, is refused
// without being checked, with the time to wait; then it works.
func TestFailedLoginsThrottled(t *testing.T) {
	r := newRing(t, 1, nil)
	owner := dialRaw(t, r.addr(1))
	owner.loginV2("carol", "right")
	owner.nc.Close()
	c := dialRaw(t, r.addr(1))
	for i := range 3 {
		c.send(login2("carol", "wrong", fmt.Sprint("w", i)))
		c.expectError(protocol.CodeBadPassword, "wrong password")
	}
	// The 4th wrong password is not checked: a check would say "wrong
	// password".
	c.send(login2("carol", "wrong", "w3"))
	c.expect(`{"messageType":"ERROR","code":"LOGIN_THROTTLED","errorMessage":"too many failed logins for \"carol\" or from your address: try again in 1s","id":"w3"}`)
	c.send(login2("carol", "right", "r1"))
	c.expectError(protocol.CodeThrottled, "too many failed logins")
	// The delay passes (1 s after the third failure); attempts meanwhile
	// are refused and do not count.
	var m map[string]any
	i := 0
	ok := testutil.WaitFor(waitLimit, 50*time.Millisecond, func() bool {
		c.send(login2("carol", "right", fmt.Sprint("again", i)))
		i++
		m = c.obj()
		if m["messageType"] == "LOGIN" {
			return true
		}
		if m["code"] != string(protocol.CodeThrottled) && m["code"] != string(protocol.CodeUserOnline) {
			t.Fatalf("login after the delay: %v", m)
		}
		return false
	})
	if !ok {
		t.Fatalf("login after the delay: %v", m)
	}
}

// TestAddressThrottled: failures from one address slow down logins to
// any account from it.
func TestAddressThrottled(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { passwordMode(c); addressThrottle(c) })
	c := dialRaw(t, r.addr(1))
	c.send(`{"messageType":"REGISTER","username":"dave","password":"pw","id":"r"}`)
	c.expect(`{"messageType":"REGISTER","username":"dave","id":"r"}`)
	// REGISTER counts as one attempt of the address; after two the next
	// waits.
	c.send(login2("nobody", "guess", "g"))
	c.expectError(protocol.CodeNoAccount, "REGISTER")
	c.send(login2("dave", "pw", "d"))
	c.expect(`{"messageType":"ERROR","code":"LOGIN_THROTTLED","errorMessage":"too many failed logins for \"dave\" or from your address: try again in 1s","id":"d"}`)
}

// TestHashSlotHonoursContext: a login that finds every hashing slot taken
// gives up with BUSY when its time is up, instead of waiting for ever.
func TestHashSlotHonoursContext(t *testing.T) {
	r := newRing(t, 1, func(c *Config) { c.HashWorkers = 1; c.StoreTimeout = time.Second })
	s := r.servers[0]
	s.hashSem <- struct{}{} // a long hash holds the only slot
	held := true
	defer func() {
		if held {
			<-s.hashSem
		}
	}()
	c := dialRaw(t, r.addr(1))
	c.send(login2("erin", "pw", "e1"))
	c.expectError(protocol.CodeBusy, "try again")
	if userExists(t, r.st, "erin") {
		t.Error("a login that failed created its user")
	}
	<-s.hashSem
	held = false
	// A slow machine may time the next one out too: it succeeds in the end.
	var m map[string]any
	i := 0
	ok := testutil.WaitFor(waitLimit, 0 /* each try waits for its answer */, func() bool {
		c.send(login2("erin", "pw", fmt.Sprint("e", i+2)))
		i++
		m = c.obj()
		if m["messageType"] == "LOGIN" {
			return true
		}
		if m["code"] != string(protocol.CodeBusy) && m["code"] != string(protocol.CodeUnavailable) {
			t.Fatalf("login with a free slot: %v", m)
		}
		return false
	})
	if !ok {
		t.Fatalf("login with a free slot: %v", m)
	}
}

// TestPasswordMode: every login needs protocol 2 and the password of an
// account made by REGISTER; a refused login leaves no user and no
// presence behind.
func TestPasswordMode(t *testing.T) {
	r := newRing(t, 1, passwordMode)
	c := dialRaw(t, r.addr(1))
	c.send(`{"messageType":"LOGIN","username":"frank"}`)
	c.expect(`{"messageType":"ERROR","errorMessage":"this node requires a password for every login: log in with protocol version 2 and your password (REGISTER creates an account)"}`)
	c.send(login2("frank", "", "a"))
	c.expectError(protocol.CodePasswordNeeded, "requires a password")
	c.send(login2("frank", "pw", "b"))
	c.expect(`{"messageType":"ERROR","code":"NO_ACCOUNT","errorMessage":"no account \"frank\": send REGISTER with a username and a password first","id":"b"}`)
	if userExists(t, r.st, "frank") {
		t.Fatal("a refused login created its user")
	}
	c.send(`{"messageType":"REGISTER","username":"frank","id":"r1"}`)
	c.expectError(protocol.CodeBadRequest, "REGISTER needs a password")
	c.send(`{"messageType":"REGISTER","username":"frank","password":"pw","id":"r2"}`)
	c.expect(`{"messageType":"REGISTER","username":"frank","id":"r2"}`)
	c.send(`{"messageType":"REGISTER","username":"frank","password":"other","id":"r3"}`)
	c.expectError(protocol.CodeNameTaken, "taken")
	c.send(login2("frank", "bad", "c"))
	c.expectError(protocol.CodeBadPassword, "wrong password")
	if on, err := r.st.Online(context.Background()); err != nil || len(on) != 0 {
		t.Fatalf("online after a refused login: %v, %v", on, err)
	}
	c.loginV2("frank", "pw")
}

// TestInviteOnlyGroup: a group made invite-only is joined with a member's
// invitation only; others can neither join it, write to it nor see it.
func TestInviteOnlyGroup(t *testing.T) {
	r := newRing(t, 2, nil)
	alice := dialRaw(t, r.addr(1))
	alice.loginV2("alice", "")
	alice.send(`{"messageType":"JOIN_GROUP","group":"secret","inviteOnly":true,"id":"j"}`)
	alice.expect(`{"messageType":"JOIN_GROUP","group":"secret","inviteOnly":true,"id":"j"}`)
	bob := dialRaw(t, r.addr(2))
	bob.loginV2("bob", "")
	bob.send(`{"messageType":"JOIN_GROUP","group":"secret","id":"j"}`)
	bob.expect(`{"messageType":"ERROR","code":"NOT_INVITED","errorMessage":"group \"secret\" is invite-only: a member must invite you first","id":"j"}`)
	old := dialRaw(t, r.addr(2))
	old.login("old")
	old.send(`{"messageType":"JOIN_GROUP","group":"secret"}`)
	old.expect(`{"messageType":"ERROR","errorMessage":"group \"secret\" is invite-only: a member must invite you first"}`)
	old.send(chatGroup("secret", "let me in"))
	old.expect(`{"messageType":"ERROR","errorMessage":"group \"secret\" is invite-only: only its members can write to it"}`)
	bob.send(`{"messageType":"GROUPS","id":"l"}`)
	bob.expect(`{"messageType":"GROUPS","groups":[],"id":"l"}`)
	bob.send(`{"messageType":"INVITE","group":"secret","username":"old","id":"i"}`)
	bob.expectError(protocol.CodeNotMember, "only its members can invite")
	alice.send(`{"messageType":"INVITE","group":"secret","username":"nobody","id":"i"}`)
	alice.expectError(protocol.CodeUnknownUser, "no user")
	alice.send(`{"messageType":"INVITE","group":"secret","username":"bob","id":"i"}`)
	alice.expect(`{"messageType":"INVITE","group":"secret","username":"bob","id":"i"}`)
	bob.send(`{"messageType":"GROUPS","id":"l"}`)
	bob.expect(`{"messageType":"GROUPS","groups":[{"group":"secret","members":1,"member":false,"inviteOnly":true,"invited":true}],"id":"l"}`)
	bob.send(`{"messageType":"JOIN_GROUP","group":"secret","id":"j2"}`)
	bob.expect(`{"messageType":"JOIN_GROUP","group":"secret","inviteOnly":true,"id":"j2"}`)
	// A member invites too; the original client joins once invited.
	bob.send(`{"messageType":"INVITE","group":"secret","username":"old","id":"i2"}`)
	bob.expect(`{"messageType":"INVITE","group":"secret","username":"old","id":"i2"}`)
	old.join("secret")
	alice.send(chatGroup("secret", "welcome"))
	if st := alice.obj(); st["messageType"] != "STORED" {
		t.Fatalf("receipt %v", st)
	}
	if got := v1Line(t, old.line()); got != `{"messageType":"CHAT_MESSAGE","fromName":"alice","toUsername":"old","toGroup":"secret","messageContent":"welcome","sentAt":"*"}` {
		t.Errorf("old got %s", got)
	}
	if m := bob.obj(); m["messageContent"] != "welcome" {
		t.Errorf("bob got %v", m)
	}
	// An open group's name cannot become a private one.
	alice.send(`{"messageType":"JOIN_GROUP","group":"public","id":"p"}`)
	alice.expect(`{"messageType":"JOIN_GROUP","group":"public","id":"p"}`)
	bob.send(`{"messageType":"JOIN_GROUP","group":"public","inviteOnly":true,"id":"p"}`)
	bob.expectError(protocol.CodeBadRequest, "already exists and is open")
}

// TestGroupHistorySinceJoin: a member reads the group's history from the
// moment they joined, not what was said before.
func TestGroupHistorySinceJoin(t *testing.T) {
	r := newRing(t, 2, nil)
	alice := dialRaw(t, r.addr(1))
	alice.loginV2("alice", "")
	alice.send(`{"messageType":"JOIN_GROUP","group":"g","id":"j"}`)
	alice.expect(`{"messageType":"JOIN_GROUP","group":"g","id":"j"}`)
	alice.send(chatGroup("g", "before you came"))
	if st := alice.obj(); st["messageType"] != "STORED" {
		t.Fatalf("receipt %v", st)
	}
	bob := dialRaw(t, r.addr(2))
	bob.loginV2("bob", "")
	bob.send(`{"messageType":"JOIN_GROUP","group":"g","id":"j"}`)
	bob.expect(`{"messageType":"JOIN_GROUP","group":"g","id":"j"}`)
	alice.send(chatGroup("g", "after you came"))
	if st := alice.obj(); st["messageType"] != "STORED" {
		t.Fatalf("receipt %v", st)
	}
	if m := bob.obj(); m["messageContent"] != "after you came" {
		t.Fatalf("bob got %v", m)
	}
	history := func(c *raw) []string {
		c.send(`{"messageType":"HISTORY","toGroup":"g","id":"h"}`)
		m := c.obj()
		msgs, ok := m["messages"].([]any)
		if !ok {
			t.Fatalf("history answer %v", m)
		}
		var out []string
		for _, x := range msgs {
			out = append(out, x.(map[string]any)["messageContent"].(string))
		}
		return out
	}
	if got := strings.Join(history(bob), "|"); got != "after you came" {
		t.Errorf("bob's history = %q", got)
	}
	if got := strings.Join(history(alice), "|"); got != "before you came|after you came" {
		t.Errorf("alice's history = %q", got)
	}
}
