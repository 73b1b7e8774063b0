package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// resolveWith parses args as the root command does and returns the
// connection and UI settings.
func resolveWith(t *testing.T, env map[string]string, args ...string) (config, uiOptions, error) {
	t.Helper()
	g := &globals{getenv: func(k string) string { return env[k] }}
	root := newRootCmdWith(g)
	var cfg config
	var ui uiOptions
	var err error
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if cfg, err = g.resolve(cmd, args); err == nil {
			ui, err = g.resolveUI(cmd.Flags())
		}
		return nil
	}
	root.SetArgs(args)
	if xerr := root.Execute(); xerr != nil {
		t.Fatal(xerr)
	}
	return cfg, ui, err
}

func TestBellSetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, true},
		{[]string{"--bell=false"}, nil, false},
		{nil, map[string]string{"RINGCHAT_BELL": "0"}, false},
		{[]string{"--bell"}, map[string]string{"RINGCHAT_BELL": "false"}, true},
	} {
		_, ui, err := resolveWith(t, tc.env, tc.args...)
		if err != nil || ui.bell != tc.want {
			t.Errorf("%q %v: bell %v, %v; want %v", tc.args, tc.env, ui.bell, err, tc.want)
		}
	}
	if _, _, err := resolveWith(t, map[string]string{"RINGCHAT_BELL": "loud"}); err == nil || err.Error() != `RINGCHAT_BELL="loud": want true or false` {
		t.Errorf("a bad RINGCHAT_BELL: %v", err)
	}
}

func TestReceiptsSetting(t *testing.T) {
	off := writeConfig(t, "receipts = false\n")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, true},
		{[]string{"--receipts=false"}, nil, false},
		{nil, map[string]string{"RINGCHAT_RECEIPTS": "false"}, false},
		{nil, map[string]string{"RINGCHAT_CONFIG": off}, false},
		{nil, map[string]string{"RINGCHAT_CONFIG": off, "RINGCHAT_RECEIPTS": "true"}, true},
		{[]string{"--receipts"}, map[string]string{"RINGCHAT_RECEIPTS": "false"}, true},
	} {
		_, ui, err := resolveWith(t, tc.env, tc.args...)
		if err != nil || ui.receipts != tc.want {
			t.Errorf("%q %v: receipts %v, %v; want %v", tc.args, tc.env, ui.receipts, err, tc.want)
		}
	}
	if _, _, err := resolveWith(t, map[string]string{"RINGCHAT_RECEIPTS": "maybe"}); err == nil || err.Error() != `RINGCHAT_RECEIPTS="maybe": want true or false` {
		t.Errorf("a bad RINGCHAT_RECEIPTS: %v", err)
	}
}

func TestLogDirSetting(t *testing.T) {
	_, ui, _ := resolveWith(t, map[string]string{"RINGCHAT_LOG_DIR": "/env/logs"})
	if ui.logDir != "/env/logs" {
		t.Errorf("from the environment: %q", ui.logDir)
	}
	_, ui, _ = resolveWith(t, map[string]string{"RINGCHAT_LOG_DIR": "/env/logs"}, "--log-dir", "/flag/logs")
	if ui.logDir != "/flag/logs" {
		t.Errorf("the flag does not win: %q", ui.logDir)
	}
}

func TestStateDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/a"}, "/x/state/ringchat"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/a"}, "/home/a/.local/state/ringchat"},
		{map[string]string{"HOME": "/home/a"}, "/home/a/.local/state/ringchat"},
		{nil, ""},
	} {
		if _, ui, _ := resolveWith(t, tc.env); ui.stateDir != tc.want {
			t.Errorf("%v: state directory %q, want %q", tc.env, ui.stateDir, tc.want)
		}
	}
	if got := stateFile(uiOptions{stateDir: "/s"}, "../x"); got != "/s/%2E.%2Fx.json" {
		t.Errorf("state file %q", got)
	}
}
