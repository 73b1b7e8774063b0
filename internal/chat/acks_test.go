package chat

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// 200,000 acknowledgements of messages a client never got (made-up ids,
// and another user's real message): at most 1,000 of them (the queue's maxStrayAcks) wait for
// the store, visits take them a bounded number at a time, the other users
// of the node chat on meanwhile (every message arrives, in order, and no
// visit fails), and the real message still reaches its recipient.
func TestStrayAcksBounded(t *testing.T) {
	r := newRing(t, 1, nil)
	ctx := ctxT(t)
	a := dialV2(t, r.addr(1), "a", "", client.Options{AutoAck: true})
	b := dialV2(t, r.addr(1), "b", "", client.Options{AutoAck: true})
	c := dialV2(t, r.addr(1), "c", "", client.Options{AutoAck: true})
	c.Close()
	srv := r.servers[0]
	eventually(t, "c logged out", func() bool { return srv.Stats().Clients == 2 })
	kept, err := a.SendWait(ctx, client.ToUser("c"), "kept for c")
	if err != nil {
		t.Fatal(err)
	}
	x := dialRaw(t, r.addr(1))
	x.loginV2("x", "")

	const lines, perLine = 200, protocol.MaxAckIDs
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for i := range lines {
			ids := make([]string, perLine)
			for j := range ids {
				ids[j] = fmt.Sprintf("%q", fmt.Sprintf("stray-%d-%d", i, j))
			}
			ids[0] = fmt.Sprintf("%q", kept.ID)
			line := `{"messageType":"ACK","ids":[` + strings.Join(ids, ",") + `]}` + "\n"
			if _, err := x.nc.Write([]byte(line)); err != nil {
				return // the test failed elsewhere and closed it
			}
		}
	}()
	// a and b chat while the flood comes in, and after it.
	for k := 0; ; k++ {
		text := fmt.Sprintf("m%d", k)
		if _, err := a.SendWait(ctx, client.ToUser("b"), text); err != nil {
			t.Fatal(err)
		}
		if m := nextChat(t, b); m.Content != text {
			t.Fatalf("b got %q, want %q", m.Content, text)
		}
		if k >= 20 {
			select {
			case <-flooded:
			default:
				continue
			}
			break
		}
	}
	// A request after the flood: its answer means every ACK line was read.
	x.send(`{"messageType":"GROUPS","id":"after"}`)
	for {
		m := x.obj()
		if m["id"] == "after" {
			break
		}
		if m["code"] != string(protocol.CodeBusy) {
			t.Fatalf("unexpected answer to the flood %v", m)
		}
	}
	if waiting := srv.Queue().Stats().StrayAcks; waiting > 1000 {
		t.Errorf("%d stray acknowledgements wait for the store, want at most 1,000 (one user's cap)", waiting)
	}
	eventually(t, "stray acknowledgements looked up", func() bool { return srv.Stats().PendingAcks == 0 })
	if f := srv.Stats().FailedVisits; f != 0 {
		t.Errorf("%d visits failed", f)
	}
	c2 := dialV2(t, r.addr(1), "c", "", client.Options{AutoAck: true})
	if m := nextChat(t, c2); m.ID != kept.ID || m.Content != "kept for c" {
		t.Fatalf("c got %+v, want the message x acknowledged in its place", m)
	}
}
