package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/client/clienttest"
)

// TestRefusalsEndAtOnce: a login that no waiting would let in (the user
// logged in elsewhere, a wrong password) ends every command within 2 s
// with the server's words and status 1, whatever --timeout allows.
func TestRefusalsEndAtOnce(t *testing.T) {
	srv := clienttest.NewServer(t)
	peer(t, srv.Addr, "dora")
	claimed, err := client.StartSession(t.Context(), client.SessionConfig{Addrs: []string{srv.Addr}, User: "erin", Password: "right"})
	if err != nil {
		t.Fatal(err)
	}
	claimed.Close()
	srv.WaitGone(t, "erin")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tail", "--user", "dora"}, `user "dora" is already logged in at node 1`},
		{[]string{"who", "--user", "dora"}, `user "dora" is already logged in at node 1`},
		{[]string{"history", "--user", "dora", "--to", "bob"}, `user "dora" is already logged in at node 1`},
		{[]string{"--plain", "--user", "dora"}, `user "dora" is already logged in at node 1`},
		{[]string{"tail", "--user", "erin", "--password", "wrong"}, `wrong password for "erin"`},
		{[]string{"--plain", "--user", "erin", "--password", "wrong"}, `wrong password for "erin"`},
	} {
		start := time.Now()
		code, _, stderr := runOnce(t, nil, append(tc.args, "--node", srv.Addr, "--timeout", "1m")...)
		elapsed := time.Since(start)
		if code != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "within") || strings.Contains(stderr, "gave up") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr)
		}
		if elapsed > 2*time.Second {
			t.Errorf("%v: said after %v, want within 2 s", tc.args, elapsed)
		}
	}
}
