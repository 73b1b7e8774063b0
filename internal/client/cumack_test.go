package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ringchat/ringchat/internal/protocol"
	"github.com/ringchat/ringchat/internal/testutil"
)

// loginRaw logs c in with protocol 2 against srv, which answers granting
// the features in grant; it returns the features the LOGIN asked for.
func loginRaw(t *testing.T, c *Conn, srv *rawServer, grant ...string) []string {
	t.Helper()
	done := async(func() error { return c.LoginV2(testCtx(t), "bob", "") })
	var in protocol.FromClient
	if err := json.Unmarshal([]byte(srv.readLine(t)), &in); err != nil || in.MessageType != string(protocol.TypeLogin) {
		t.Fatalf("first line %+v (%v), want LOGIN", in, err)
	}
	b, err := json.Marshal(protocol.LoginV2{MessageType: protocol.TypeLogin, Username: "bob", Version: 2, Node: 1, Features: grant, ID: in.ID})
	if err != nil {
		t.Fatal(err)
	}
	srv.write(t, string(b))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return in.Features
}

func chatSeqLine(seq int) string {
	return fmt.Sprintf(`{"messageType":"CHAT_MESSAGE","id":"m-%d","seq":%d,"fromName":"a","toUsername":"bob","sentAt":"x","messageContent":"m"}`, seq, seq)
}

// readAcks reads the client's lines until an ACK_UPTO names want. Every
// acknowledgement must be an ACK_UPTO, naming a growing sequence.
func readAcks(t *testing.T, srv *rawServer, want int64) {
	t.Helper()
	var last int64
	for last < want {
		line := srv.readLine(t)
		var in protocol.FromClient
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatal(err)
		}
		switch protocol.Type(in.MessageType) {
		case protocol.TypeAlive:
			continue
		case protocol.TypeAckUpTo:
		default:
			t.Fatalf("client sent %s, want ACK_UPTO up to %d", line, want)
		}
		if in.Seq <= last || in.Seq > want {
			t.Fatalf("ACK_UPTO %d after %d, want a growing sequence up to %d", in.Seq, last, want)
		}
		last = in.Seq
	}
}

// With CumulativeAck the LOGIN asks for the feature; granted, AutoAck
// acknowledges what was received with ACK_UPTO, not ids.
func TestCumulativeAckGranted(t *testing.T) {
	c, srv := rawPairWith(t, Options{Timeout: testutil.WaitLimit, AutoAck: true, CumulativeAck: true})
	asked := loginRaw(t, c, srv, protocol.FeatureCumulativeAck)
	if !slices.Contains(asked, protocol.FeatureCumulativeAck) {
		t.Fatalf("LOGIN asked for %v, want %s", asked, protocol.FeatureCumulativeAck)
	}
	if !c.Granted(protocol.FeatureCumulativeAck) {
		t.Fatal("Granted(cumulative-ack) = false after a login answer granting it")
	}
	srv.write(t, chatSeqLine(5), chatSeqLine(6), chatSeqLine(9))
	for range 3 {
		<-c.Events()
	}
	readAcks(t, srv, 9)
	srv.write(t, chatSeqLine(12))
	<-c.Events()
	readAcks(t, srv, 12)
}

// A node that does not grant the feature is acknowledged by ids, and
// AckUpTo refuses to send; without CumulativeAck the LOGIN does not ask.
func TestCumulativeAckNotGranted(t *testing.T) {
	c, srv := rawPairWith(t, Options{Timeout: testutil.WaitLimit, AutoAck: true, CumulativeAck: true})
	loginRaw(t, c, srv)
	srv.write(t, chatSeqLine(5))
	<-c.Events()
	if line := srv.readLine(t); line != `{"messageType":"ACK","ids":["m-5"]}` {
		t.Fatalf("client sent %s, want an ACK by id", line)
	}
	if err := c.AckUpTo(testCtx(t), 5); !errors.Is(err, errNoCumulativeAck) {
		t.Errorf("AckUpTo without the feature: %v", err)
	}

	c2, srv2 := rawPairWith(t, Options{Timeout: testutil.WaitLimit, AutoAck: true})
	if asked := loginRaw(t, c2, srv2); slices.Contains(asked, protocol.FeatureCumulativeAck) {
		t.Errorf("LOGIN without CumulativeAck asked for %v", asked)
	}
}

// The cumulative acknowledgement never passes a message received but not
// yet to acknowledge (a Session's consumer does not have it yet): it
// names the newest sequence of the longest run of those to acknowledge,
// in the order received, and names each sequence once.
func TestAckFrontier(t *testing.T) {
	c := &Conn{}
	c.cumulative.Store(true)
	for _, seq := range []int64{5, 6, 8, 7} {
		c.noteReceived(ChatMessage{ID: fmt.Sprint(seq), Seq: seq})
	}
	step := func(done []int64, want int64) {
		t.Helper()
		c.ackMu.Lock()
		defer c.ackMu.Unlock()
		for _, s := range done {
			if !c.ackDone(s) {
				t.Fatalf("ackDone(%d) = false for a message received", s)
			}
		}
		if got := c.ackFrontier(); got != want {
			t.Fatalf("after %v the ACK_UPTO is %d, want %d", done, got, want)
		}
	}
	step(nil, 0)
	step([]int64{6}, 0) // 5 not yet
	step([]int64{5}, 6) // 5 and 6
	step(nil, 0)        // said already
	step([]int64{7}, 0) // 8, received before 7, not yet
	step([]int64{8}, 8) // 8, and 7 with it
	step(nil, 0)        // nothing more
	if c.ackDone(9) {
		t.Error("ackDone(9) = true for a message never received: it would be acknowledged by no one")
	}
	c.cumulative.Store(false)
	if c.ackDone(5) {
		t.Error("ackDone = true on a connection that acknowledges by ids")
	}
}
