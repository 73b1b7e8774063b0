package scripts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// make chat takes the chat name from NAME, never from the shell's USER
// (the Unix login), and without NAME leaves it to the client, which asks.
func TestMakeChatName(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	for _, tc := range []struct {
		args []string
		want string // the --user part of the client's command, or "" for none
	}{
		{[]string{"NAME=alice"}, "--user 'alice'"},
		{nil, ""},
	} {
		cmd := exec.Command("make", append([]string{"-n", "-C", "..", "chat"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "USER=unixlogin")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n chat %v: %v", tc.args, err)
		}
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "/ringchat ") {
				line = l
			}
		}
		switch {
		case line == "":
			t.Fatalf("make -n chat %v runs no client:\n%s", tc.args, out)
		case strings.Contains(line, "unixlogin"):
			t.Errorf("make chat %v took the Unix login: %s", tc.args, line)
		case tc.want != "" && !strings.Contains(line, tc.want):
			t.Errorf("make chat %v: %s, want %s", tc.args, line, tc.want)
		case tc.want == "" && strings.Contains(line, "--user"):
			t.Errorf("make chat without NAME names a user: %s", line)
		}
	}
}
