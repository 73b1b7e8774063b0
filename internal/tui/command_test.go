package tui

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/client"
)

func TestParse(t *testing.T) {
	tests := map[string]Command{
		"":                   {Act: ActNone},
		"   ":                {Act: ActNone},
		"hello there":        {Act: ActSend, Text: "hello there", ToCurrent: true},
		"//join":             {Act: ActSend, Text: "/join", ToCurrent: true},
		"/join g1":           {Act: ActJoin, Group: "g1"},
		"/JOIN\t#g1 ":        {Act: ActJoin, Group: "g1"},
		"/leave g1":          {Act: ActLeave, Group: "g1"},
		"/part g1":           {Act: ActLeave, Group: "g1"},
		"/msg bob hi  there": {Act: ActSend, To: client.ToUser("bob"), Text: "hi  there"},
		"/msg #g1 hi":        {Act: ActSend, To: client.ToGroup("g1"), Text: "hi"},
		"/g g1 hi":           {Act: ActSend, To: client.ToGroup("g1"), Text: "hi"},
		"/g #g1 hi":          {Act: ActSend, To: client.ToGroup("g1"), Text: "hi"},
		"/to bob":            {Act: ActTo, To: client.ToUser("bob")},
		"/to #g1":            {Act: ActTo, To: client.ToGroup("g1")},
		"/query bob":         {Act: ActTo, To: client.ToUser("bob")},
		"/to":                {Act: ActTo},
		"/who":               {Act: ActWho},
		"/groups":            {Act: ActGroups},
		"/history":           {Act: ActHistory, Limit: DefaultHistory},
		"/history 5":         {Act: ActHistory, Limit: 5},
		"/history bob":       {Act: ActHistory, To: client.ToUser("bob"), Limit: DefaultHistory},
		"/history #g1 100":   {Act: ActHistory, To: client.ToGroup("g1"), Limit: 100},
		"/help":              {Act: ActHelp},
		"/quit":              {Act: ActQuit},
		"/exit":              {Act: ActQuit},
	}
	for line, want := range tests {
		got, err := Parse(line)
		if err != nil {
			t.Errorf("Parse(%q): %v", line, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", line, diff)
		}
	}
	errs := map[string]string{
		"/join":          "usage: /join GROUP",
		"/join a b":      "usage: /join GROUP",
		"/msg bob":       "usage: /msg USER TEXT",
		"/g g1":          "usage: /g GROUP TEXT",
		"/to a b":        "usage: /to USER or /to #GROUP",
		"/history 0":     "/history: N must be 1 to 100",
		"/history 5 bob": "usage: /history [USER|#GROUP] [N]",
		"/history a b c": "usage: /history [USER|#GROUP] [N]",
		"/frobnicate":    `unknown command "/frobnicate" (try /help)`,
	}
	for line, want := range errs {
		if _, err := Parse(line); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) error = %v, want %q", line, err, want)
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
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}
