package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/tui"
)

const sampleConfig = `# ringchat's settings
node = 2                      # a node id of nodes
nodes = "~/ring/nodes.csv"
user = 'alice'
bell = false
log_dir = "~/irclogs/ringchat"

[colors]
me = "#ffffff"
mention = "161"   # the highlight's background
senders = ["39", "208", "#00ff00"]
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseConfig(t *testing.T) {
	fc, err := parseConfig(strings.NewReader(sampleConfig), "/home/a")
	if err != nil {
		t.Fatal(err)
	}
	if fc.node != "2" || fc.nodes != "/home/a/ring/nodes.csv" || fc.user != "alice" || fc.bell == nil || *fc.bell || fc.logDir != "/home/a/irclogs/ringchat" {
		t.Errorf("parsed %+v", fc)
	}
	want := tui.Colors{Me: "#ffffff", Mention: "161", Senders: []string{"39", "208", "#00ff00"}}
	if diff := cmp.Diff(want, fc.colors); diff != "" {
		t.Errorf("colours (-want +got):\n%s", diff)
	}
	if fc, err := parseConfig(strings.NewReader(`user = "a#b \"q\""`+"\n"), ""); err != nil || fc.user != `a#b "q"` {
		t.Errorf("a # and quotes inside a string: %q, %v", fc.user, err)
	}

	for text, want := range map[string]string{
		"user = \"alice\"\nnick = \"al\"":      `2: unknown key "nick" (known: node, nodes, user, bell, receipts, log_dir)`,
		"bell = yes":                           "1: bell: want true or false, got yes",
		"user = \"alice":                       `1: user: want a quoted string, got "alice`,
		"user = alice":                         "1: user: want a quoted string, got alice",
		"\n\n[colours]":                        "3: unknown table [colours] (known: [colors])",
		"user = \"a\"\nuser = \"b\"":           "2: user is set twice",
		"[colors]\nme = \"300\"":               `2: colors.me: colour "300": want 0 to 255 or #rrggbb`,
		"[colors]\nsenders = [\"red\"]":        `2: colors.senders: colour "red": want 0 to 255 or #rrggbb`,
		"[colors]\nsenders = \"39\"":           `2: colors.senders: want an array of strings such as ["39", "208"], got "39"`,
		"[colors]\nuser = \"x\"":               `2: unknown key "colors.user" (known: me, mention, time, info, error, senders)`,
		"just some words":                      `1: want key = value, got "just some words"`,
		"= 3":                                  `1: want key = value, got "= 3"`,
		"node = \"10.0.0.1:8001\"\nbell = 1 2": "2: bell: want true or false, got 1 2",
	} {
		if _, err := parseConfig(strings.NewReader(text), ""); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}

func TestConfigFilePrecedence(t *testing.T) {
	list := nodesFile(t, "127.0.0.1:8101", "127.0.0.1:8102")
	path := writeConfig(t, "node = 2\nnodes = \""+list+"\"\nuser = \"filed\"\nbell = false\nlog_dir = \"/file/logs\"\n[colors]\ntime = \"240\"\n")

	// The file alone.
	cfg, ui, err := resolveWith(t, map[string]string{"RINGCHAT_CONFIG": path})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.addrs, " "); got != "127.0.0.1:8102 127.0.0.1:8101" || cfg.user != "filed" || ui.bell || ui.logDir != "/file/logs" || ui.colors.Time != "240" {
		t.Errorf("from the file: addrs %s, user %q, ui %+v", got, cfg.user, ui)
	}
	// The environment wins over it, and flags over both.
	cfg, ui, err = resolveWith(t, map[string]string{"RINGCHAT_CONFIG": path, "RINGCHAT_USER": "env", "RINGCHAT_BELL": "true", "RINGCHAT_NODE": "h:1"})
	if err != nil || cfg.user != "env" || !ui.bell || cfg.addrs[0] != "h:1" {
		t.Errorf("environment: %+v %+v %v", cfg, ui, err)
	}
	cfg, ui, err = resolveWith(t, map[string]string{"RINGCHAT_CONFIG": path, "RINGCHAT_USER": "env"}, "--user", "flag", "--log-dir", "/flag", "--node", "1")
	if err != nil || cfg.user != "flag" || ui.logDir != "/flag" || cfg.addrs[0] != "127.0.0.1:8101" {
		t.Errorf("flags: %+v %+v %v", cfg, ui, err)
	}
	// The default place: $XDG_CONFIG_HOME, else ~/.config.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".config", "ringchat"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "ringchat", "config.toml"), []byte(`user = "homed"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err := resolveWith(t, map[string]string{"HOME": home}); err != nil || cfg.user != "homed" {
		t.Errorf("~/.config/ringchat/config.toml: %q %v", cfg.user, err)
	}
	if cfg, _, err := resolveWith(t, map[string]string{"HOME": home, "XDG_CONFIG_HOME": t.TempDir()}); err != nil || cfg.user != "" {
		t.Errorf("no file under $XDG_CONFIG_HOME is no error: %q %v", cfg.user, err)
	}
}

func TestBadConfigFile(t *testing.T) {
	path := writeConfig(t, "user = \"alice\"\nbel = true\n")
	code, stdout, stderr := runOnce(t, nil, "--config", path, "--user", "bob")
	if code != 2 || stdout != "" || !strings.Contains(stderr, path+`:2: unknown key "bel"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	missing := filepath.Join(t.TempDir(), "none.toml")
	code, _, stderr = runOnce(t, map[string]string{"RINGCHAT_CONFIG": missing}, "send", "--user", "a", "--to", "b", "x")
	if code != 2 || !strings.Contains(stderr, "config file: open "+missing+": no such file or directory") {
		t.Errorf("a missing --config: exit %d, stderr %q", code, stderr)
	}
}
