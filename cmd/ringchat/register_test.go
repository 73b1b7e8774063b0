package main

import (
	"strings"
	"testing"
)

// TestRegisterNeedsPassword: register refuses to run without a password.
func TestRegisterNeedsPassword(t *testing.T) {
	code, _, stderr := runOnce(t, nil, "register", "--node", "127.0.0.1:1", "--user", "alice")
	if code != 2 || !strings.Contains(stderr, "register needs --password") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
