package tui

import (
	"errors"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/client"
)

func TestCloseAndPart(t *testing.T) {
	h := newHarness(t)
	h.line("/query bob")
	h.line("/to carol")
	h.want(" 2:bob  3:carol ", "carol › ")
	h.line("/close")
	h.want("bob › ")
	h.wantNot("carol")
	h.line("/join g1")
	h.line("/join g2")
	h.want(" 2:bob  3:#g1  4:#g2 ")
	h.line("/close") // a joined group's tab: left, then closed
	h.want("#g1 › ", "· left #g2")
	h.wantNot(":#g2", "groups: #g1 #g2")
	h.line("/part")
	h.want("bob › ", "· left #g1")
	h.wantNot(":#g1", "groups: #g1")
	if got := h.b.joins; len(got) != 4 || got[2] != "-g2" || got[3] != "-g1" {
		t.Fatalf("backend calls %q", got)
	}
	h.line("/part")
	h.want("! leave which group? /part GROUP")
	h.line("/part ops") // another tab's group: left, this tab stays
	h.want("bob › ", "· left #ops")

	h.b.fail["leave"] = errors.New("leave g3: not connected")
	h.line("/join g3")
	h.line("/part")
	h.want("#g3 › ", "! leave g3: not connected") // not left: the tab stays
	h.line("/close extra")
	h.want("! usage: /close (closes the current tab)")

	h.press('1', tea.ModAlt)
	h.line("/close")
	h.want("! the status tab stays open (/quit leaves ringchat)", " 1:ringchat ")

	// A message of a closed conversation opens it again.
	h.event(chat("c1", "carol", client.ToUser("alice"), "back again", now))
	h.want(" 4:carol (1)")
}

func TestMeAction(t *testing.T) {
	h := newHarness(t)
	h.line("/me waves")
	h.want("! no conversation here")
	h.line("/to bob")
	h.line("/me waves")
	if len(h.b.posts) != 1 || h.b.posts[0].Text != "/me waves" {
		t.Fatalf("posts %+v", h.b.posts)
	}
	h.want("10:20 * alice waves …")
	h.event(chat("m1", "bob", client.ToUser("alice"), "/me waves back", now))
	h.want("10:20 * bob waves back")
	h.line("/msg carol /me is late")
	h.want("→ carol * alice is late …")
	h.line("/me")
	h.want("! usage: /me ACTION")
}

func TestParseUI(t *testing.T) {
	tests := map[string]Command{
		"/close":       {Act: ActClose},
		"/part":        {Act: ActLeave, Close: true},
		"/part #g1":    {Act: ActLeave, Group: "g1", Close: true},
		"/search foo":  {Act: ActSearch, Text: "foo"},
		"/search":      {Act: ActSearch},
		"/me waves":    {Act: ActSend, Text: "/me waves", ToCurrent: true},
		"/leave g1":    {Act: ActLeave, Group: "g1"},
		"//close":      {Act: ActSend, Text: "/close", ToCurrent: true},
		"hello /close": {Act: ActSend, Text: "hello /close", ToCurrent: true},
	}
	for line, want := range tests {
		got, err := ParseUI(line)
		if err != nil {
			t.Errorf("ParseUI(%q): %v", line, err)
		} else if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseUI(%q) (-want +got):\n%s", line, diff)
		}
	}
	for line, want := range map[string]string{
		"/part a b": "usage: /part [GROUP]",
		"/close x":  "usage: /close (closes the current tab)",
		"/me":       "usage: /me ACTION",
	} {
		if _, err := ParseUI(line); err == nil || err.Error() != want {
			t.Errorf("ParseUI(%q) error = %v, want %q", line, err, want)
		}
	}
	// Line mode's parser knows /me, not the full-screen commands.
	if _, err := Parse("/close"); err == nil {
		t.Error("Parse(/close) succeeded")
	}
}
