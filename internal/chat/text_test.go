package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/testutil"
)

// TestMessagesKeepTheirText: a login asking for "limits" is told the
// largest message the node takes; a message over it is refused with a
// clear error and nothing of it reaches its recipient; a message of many
// lines arrives with its line breaks, in protocol 2 and in protocol 1.
func TestMessagesKeepTheirText(t *testing.T) {
	r := newRing(t, 1, nil)
	alice := dialRaw(t, r.addr(1))
	alice.send(`{"messageType":"LOGIN","username":"alice","version":2,"features":["limits","typing"],"id":"l1"}`)
	alice.expect(fmt.Sprintf(`{"messageType":"LOGIN","username":"alice","version":2,"node":1,"features":["limits"],"maxMessageBytes":%d,"id":"l1"}`, protocol.MaxContentBytes))

	bob := dialRaw(t, r.addr(1))
	if m := bob.loginV2("bob", ""); m["maxMessageBytes"] != nil {
		t.Fatalf("a login without \"limits\" was told %v", m)
	}

	long := strings.Repeat("x", 4510)
	alice.send(chatV2("bob", long, "0190f5a2-7b1c-7cde-8f00-000000000001"))
	e := alice.expectError(protocol.CodeTooLong, "message is 4510 bytes, over the limit of 4096 bytes per message: nothing of it was stored")
	if e["id"] != "0190f5a2-7b1c-7cde-8f00-000000000001" {
		t.Errorf("the refusal does not name the message: %v", e)
	}

	lines := make([]string, 20)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d of the paste", i+1)
	}
	text := strings.Join(lines, "\n")
	alice.send(chatV2("bob", text, "0190f5a2-7b1c-7cde-8f00-000000000002"))
	if m := alice.obj(); m["messageType"] != string(protocol.TypeStored) {
		t.Fatalf("alice got %v, want STORED", m)
	}
	if m := bob.obj(); m["messageContent"] != text { // the first: the long one was not stored
		t.Fatalf("bob got %v, want the 20 lines", m)
	}

	// Protocol 1 as the original: the text goes as it came, line breaks
	// and all, both ways.
	carol := dialRaw(t, r.addr(1))
	carol.login("carol")
	dave := dialRaw(t, r.addr(1))
	dave.login("dave")
	carol.send(chatTo("dave", "two\nlines"))
	if m := dave.obj(); m["messageContent"] != "two\nlines" {
		t.Fatalf("dave got %v", m)
	}
}

func chatV2(user, text, id string) string {
	b, _ := json.Marshal(map[string]string{"messageType": string(protocol.TypeChatMessage), "toUsername": user, "messageContent": text, "id": id})
	return string(b)
}

// TestAwaySetElsewhereIsToldSoon: an away message set at another node a
// moment after a sender there learned that the user was not away is told
// to that sender within 2 s, not once the node's copy is 10 s old.
func TestAwaySetElsewhereIsToldSoon(t *testing.T) {
	r := newRing(t, 2, nil)
	alice, bob := dialRaw(t, r.addr(1)), dialRaw(t, r.addr(2))
	alice.loginWith("alice", protocol.FeatureAway)
	bob.loginWith("bob")
	alice.send(chatTo("bob", "are you there?"))
	if m := alice.obj(); m["messageType"] != string(protocol.TypeStored) {
		t.Fatalf("alice got %v, want STORED (bob is not away)", m)
	}
	// alice's message may reach bob before the answer to his AWAY.
	bob.send(`{"messageType":"AWAY","message":"in a meeting","id":"a"}`)
	if m, _ := bob.until(string(protocol.TypeAway)); m["message"] != "in a meeting" {
		t.Fatalf("AWAY answer %v", m)
	}
	set := time.Now()
	told := false
	testutil.WaitFor(3*time.Second, 100*time.Millisecond, func() bool {
		alice.send(chatTo("bob", "still there?"))
		for {
			m := alice.obj()
			if m["messageType"] == string(protocol.TypeAway) && m["username"] == "bob" && m["message"] == "in a meeting" {
				told = true
			}
			if m["messageType"] == string(protocol.TypeStored) {
				return told
			}
		}
	})
	if !told || time.Since(set) > 2*time.Second {
		t.Fatalf("alice told of bob's away message: %v, after %v; want within 2 s", told, time.Since(set))
	}
}
