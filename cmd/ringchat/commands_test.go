package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ringchat/ringchat/internal/client"
)

func TestParseCommand(t *testing.T) {
	tests := map[string]command{
		"":                   {act: actNone},
		"   ":                {act: actNone},
		"hello there":        {act: actSend, text: "hello there", toCur: true},
		"//join":             {act: actSend, text: "/join", toCur: true},
		"/join g1":           {act: actJoin, group: "g1"},
		"/join\t#g1 ":        {act: actJoin, group: "g1"},
		"/leave g1":          {act: actLeave, group: "g1"},
		"/msg bob hi  there": {act: actSend, to: client.ToUser("bob"), text: "hi  there"},
		"/msg #g1 hi":        {act: actSend, to: client.ToGroup("g1"), text: "hi"},
		"/g g1 hi":           {act: actSend, to: client.ToGroup("g1"), text: "hi"},
		"/g #g1 hi":          {act: actSend, to: client.ToGroup("g1"), text: "hi"},
		"/to bob":            {act: actTo, to: client.ToUser("bob")},
		"/to #g1":            {act: actTo, to: client.ToGroup("g1")},
		"/to":                {act: actTo},
		"/help":              {act: actHelp},
		"/quit":              {act: actQuit},
		"/exit":              {act: actQuit},
	}
	for line, want := range tests {
		got, err := parseCommand(line)
		if err != nil {
			t.Errorf("parseCommand(%q): %v", line, err)
			continue
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(command{})); diff != "" {
			t.Errorf("parseCommand(%q) (-want +got):\n%s", line, diff)
		}
	}
	errs := map[string]string{
		"/join":       "usage: /join GROUP",
		"/join a b":   "usage: /join GROUP",
		"/msg bob":    "usage: /msg USER TEXT",
		"/g g1":       "usage: /g GROUP TEXT",
		"/to a b":     "usage: /to USER or /to #GROUP",
		"/frobnicate": `unknown command "/frobnicate" (try /help)`,
	}
	for line, want := range errs {
		if _, err := parseCommand(line); err == nil || err.Error() != want {
			t.Errorf("parseCommand(%q) error = %v, want %q", line, err, want)
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain ünïcode":   "plain ünïcode",
		"a\nb\tc":         `a\nb\tc`,
		"\x1b[31mred":     `\x1b[31mred`,
		"evil\u202egnp":   `evil\u202egnp`,
		"\u0085next line": `\x85next line`,
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}
