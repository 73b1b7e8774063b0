package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/ringchat/ringchat/internal/protocol"
)

// lineID is the id of a protocol-2 line the raw server read.
func lineID(t *testing.T, line string) string {
	t.Helper()
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.ID == "" {
		t.Fatalf("no id in %s (%v)", line, err)
	}
	return m.ID
}

// rawPairV2 is rawPair logged in with protocol 2 as user.
func rawPairV2(t *testing.T, user string) (*Conn, *rawServer) {
	t.Helper()
	c, srv := rawPair(t)
	l := async(func() error { return c.LoginV2(testCtx(t), user, "") })
	id := lineID(t, srv.readLine(t))
	srv.write(t, fmt.Sprintf(`{"messageType":"LOGIN","username":%q,"version":2,"node":1,"id":%q}`, user, id))
	if err := result(t, l); err != nil {
		t.Fatal(err)
	}
	return c, srv
}

// TestSendWaitResendsRateLimited: a message the node dropped for its rate
// limit (RATE_LIMITED, by the message's id) is sent again with the same id
// after a pause, and SendWait returns its STORED; any other refusal ends
// SendWait at once.
func TestSendWaitResendsRateLimited(t *testing.T) {
	c, srv := rawPairV2(t, "alice")
	var st Stored
	done := async(func() (err error) { st, err = c.SendWait(testCtx(t), ToUser("bob"), "hi"); return err })
	id := lineID(t, srv.readLine(t))
	for range 2 {
		srv.write(t, fmt.Sprintf(`{"messageType":"ERROR","code":"RATE_LIMITED","errorMessage":"slow down","id":%q}`, id))
		if again := lineID(t, srv.readLine(t)); again != id {
			t.Fatalf("sent again as %s, want the same id %s", again, id)
		}
	}
	srv.write(t, fmt.Sprintf(`{"messageType":"STORED","id":%q,"seq":7,"time":"2026-01-02T03:04:05.000Z"}`, id))
	if err := result(t, done); err != nil || st.ID != id || st.Seq != 7 {
		t.Fatalf("SendWait = %+v, %v", st, err)
	}
	if u := c.Unstored(); len(u) != 0 {
		t.Errorf("Unstored after STORED: %v", u)
	}

	done = async(func() (err error) { _, err = c.SendWait(testCtx(t), ToUser("bob"), "again"); return err })
	id = lineID(t, srv.readLine(t))
	srv.write(t, fmt.Sprintf(`{"messageType":"ERROR","code":"BUSY","errorMessage":"busy","id":%q}`, id))
	var se *ServerError
	if err := result(t, done); !errors.As(err, &se) || se.Code != protocol.CodeBusy {
		t.Fatalf("SendWait after BUSY = %v", err)
	}
}
