package tui

import (
	"context"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/protocol"
)

// The fake's account operations are logged in joins, as its joins are.
func (f *fake) JoinInviteOnly(_ context.Context, g string) error {
	if err := f.fail["join"]; err != nil {
		return err
	}
	f.joins = append(f.joins, "+private "+g)
	return nil
}

func (f *fake) Invite(_ context.Context, g, u string) error {
	if err := f.fail["invite"]; err != nil {
		return err
	}
	f.joins = append(f.joins, "invite "+u+" to "+g)
	return nil
}

func (f *fake) SetPassword(_ context.Context, pw string) error {
	f.joins = append(f.joins, "passwd "+pw)
	return f.fail["passwd"]
}

func TestPrivateGroupAndInvite(t *testing.T) {
	h := newHarness(t)
	h.line("/private club")
	h.want("joined invite-only #club")
	h.line("/invite bob")
	h.want("invited bob to #club: they can /join club now")
	h.line("/to bob")
	h.line("/invite carol")
	h.want("invite to which group?")
	h.line("/invite carol #ops")
	if got := h.b.joins; len(got) != 3 || got[0] != "+private club" || got[1] != "invite bob to club" || got[2] != "invite carol to ops" {
		t.Errorf("backend calls %q", got)
	}
}

func TestJoinRefusedExplained(t *testing.T) {
	h := newHarness(t)
	h.b.fail["join"] = &client.ServerError{Code: protocol.CodeNotInvited, Message: `group "club" is invite-only: a member must invite you first`}
	h.line("/join club")
	h.want(`group "club" is invite-only: a member must invite you first`, "ask one of its members to /invite alice")
}

func TestGroupsShowPrivateAndInvitations(t *testing.T) {
	h := newHarness(t)
	h.b.groups = []protocol.GroupInfo{{Group: "club", Members: 2, InviteOnly: true, Invited: true}, {Group: "ops", Members: 3, Member: true}}
	h.line("/groups")
	h.want("#club (2, invite-only, you are invited: /join club)", "#ops (3, joined)")
}

func TestPasswdIsHidden(t *testing.T) {
	h := newHarness(t)
	h.line("/passwd")
	h.want("new password (hidden")
	h.typeText("s3cret-pw")
	h.wantNot("s3cret-pw")
	h.press(tea.KeyEnter)
	h.want("password set")
	if got := h.b.joins; len(got) != 1 || got[0] != "passwd s3cret-pw" {
		t.Errorf("backend calls %q", got)
	}
	// Not kept in the input history.
	for _, l := range h.m.typed {
		if l == "s3cret-pw" {
			t.Error("the password is in the input history")
		}
	}
	// Esc cancels a prompt; the next line is an ordinary one again.
	h.line("/passwd")
	h.typeText("abc")
	h.press(tea.KeyEscape)
	h.want("password unchanged")
	h.line("/to bob")
	h.line("hello")
	if len(h.b.posts) != 1 || h.b.posts[0].Text != "hello" {
		t.Errorf("posts %+v", h.b.posts)
	}
}
