package tui

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ringchat/ringchat/internal/client"
)

func TestLogFileName(t *testing.T) {
	for to, want := range map[client.Recipient]string{
		client.ToUser("bob"):          "bob.log",
		client.ToGroup("ops"):         "#ops.log",
		client.ToUser("../../x"):      "%2E.%2F..%2Fx.log",
		client.ToUser(".hidden"):      "%2Ehidden.log",
		client.ToUser("a/b\\c"):       "a%2Fb%5Cc.log",
		client.ToUser("100%"):         "100%25.log",
		client.ToUser("zoë"):          "zoë.log",
		client.ToUser("nul\x00\xff"):  "nul%00%FF.log",
		client.ToUser("sp ace\nline"): "sp%20ace%0Aline.log",
	} {
		if got := LogFileName(to); got != want {
			t.Errorf("LogFileName(%q) = %q, want %q", to.String(), got, want)
		}
	}
}

func TestAutolog(t *testing.T) {
	dir := t.TempDir()
	b := &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{}}
	h := &harness{t: t, b: b, m: New(Config{Backend: b, LogDir: dir, Now: func() time.Time { return now }, Location: time.UTC})}
	h.event(chat("m1", "bob", client.ToUser("alice"), "hi\nthere", now.Add(-time.Minute)))
	h.line("/to bob")
	h.line("hello bob")
	h.line("/me waves")
	h.event(chat("m2", "carol", client.ToGroup("ops"), "deploy done", now))
	h.event(chat("m3", "../../x", client.ToUser("alice"), "escape?", now))
	h.b.history["#ops"] = []client.ChatMessage{chat("h1", "dave", client.ToGroup("ops"), "old news", now.Add(-time.Hour))}
	h.line("/to #ops") // history is not logged again

	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("bob.log"), "2026-03-14 10:19:00 <bob> hi\\nthere\n2026-03-14 10:20:00 <alice> hello bob\n2026-03-14 10:20:00 * alice waves\n"; got != want {
		t.Errorf("bob.log:\n%s\nwant:\n%s", got, want)
	}
	if got, want := read("#ops.log"), "2026-03-14 10:20:00 <carol> deploy done\n"; got != want {
		t.Errorf("#ops.log:\n%s\nwant:\n%s", got, want)
	}
	if got := read("%2E.%2F..%2Fx.log"); got != "2026-03-14 10:20:00 <../../x> escape?\n" {
		t.Errorf("the hostile name's log: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the log directory, want 3", len(entries))
	}
	if fi, err := os.Stat(filepath.Join(dir, "bob.log")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("bob.log: %v %v, want mode 0600", fi.Mode(), err)
	}

	// Appended, never truncated: a second session adds to the file.
	h2 := &harness{t: t, b: b, m: New(Config{Backend: b, LogDir: dir, Now: func() time.Time { return now }, Location: time.UTC})}
	h2.event(chat("m4", "carol", client.ToGroup("ops"), "again", now))
	if got := read("#ops.log"); got != "2026-03-14 10:20:00 <carol> deploy done\n2026-03-14 10:20:00 <carol> again\n" {
		t.Errorf("#ops.log after a second session: %q", got)
	}
}

func TestAutologFailureShownOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	b := &fake{user: "alice", history: map[string][]client.ChatMessage{}, fail: map[string]error{}}
	h := &harness{t: t, b: b, m: New(Config{Backend: b, LogDir: dir, Now: func() time.Time { return now }})}
	h.update(tea.WindowSizeMsg{Width: 120, Height: 20})
	h.event(chat("m1", "bob", client.ToUser("alice"), "one", now))
	h.event(chat("m2", "bob", client.ToUser("alice"), "two", now))
	h.want("! logging stopped: open " + dir + "/bob.log: no such file or directory")
	if n := len(h.m.convs[""].entries); n != 2 { // the greeting and the one error
		t.Errorf("%d lines in the status tab, want 2", n)
	}
}
