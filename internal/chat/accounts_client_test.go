package chat

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// TestAccountsWithClient drives REGISTER, SET_PASSWORD, invite-only groups
// and INVITE through the Go client.
func TestAccountsWithClient(t *testing.T) {
	r := newRing(t, 2, passwordMode)
	ctx := ctxT(t)
	c, err := client.Dial(ctx, r.addr(1), client.Options{Timeout: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, u := range []string{"ann", "ben"} {
		if err := c.Register(ctx, u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	var se *client.ServerError
	if err := c.Register(ctx, "ann", "x"); !errors.As(err, &se) || se.Code != protocol.CodeNameTaken {
		t.Fatalf("second REGISTER of ann: %v", err)
	}
	if err := c.LoginV2(ctx, "ann", "ann-pw"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPassword(ctx, "new-pw"); err != nil {
		t.Fatal(err)
	}
	if err := c.JoinInviteOnly(ctx, "club"); err != nil {
		t.Fatal(err)
	}
	ben := dialV2(t, r.addr(2), "ben", "ben-pw", client.Options{AutoAck: true})
	if err := ben.Join(ctx, "club"); !errors.As(err, &se) || se.Code != protocol.CodeNotInvited {
		t.Fatalf("ben joins club uninvited: %v", err)
	}
	if err := c.Invite(ctx, "club", "ben"); err != nil {
		t.Fatal(err)
	}
	groups, err := ben.Groups(ctx)
	if err != nil || fmt.Sprint(groups) != "[{club 1 false invite-only invited}]" {
		t.Fatalf("ben's GROUPS = %v, %v", groups, err)
	}
	if err := ben.Join(ctx, "club"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The new password is the one that works now.
	d, err := client.Dial(ctx, r.addr(2), client.Options{Timeout: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.LoginV2(ctx, "ann", "ann-pw"); !errors.As(err, &se) || se.Code != protocol.CodeBadPassword {
		t.Fatalf("old password: %v", err)
	}
	again, err := client.DialV2(ctx, []string{r.addr(2)}, "ann", "new-pw", client.Options{Timeout: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}
