package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ModuleRoot returns the repository root (the directory holding go.mod),
// found from this source file's location.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build compiles the command at pkg (as "./cmd/ringnode") into dir, with the
// race detector when the tests run with it, and returns the binary's path.
// Tests call it once from TestMain.
func Build(pkg, dir string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = ModuleRoot()
	cmd.Env = os.Environ()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// MainWithBinary is a TestMain body for packages whose tests run a
// command: it builds pkg into a temporary directory, stores the binary's
// path in *bin, runs the tests and cleans up. It returns the exit code.
func MainWithBinary(m interface{ Run() int }, pkg string, bin *string) int {
	dir, err := os.MkdirTemp("", "ringchat-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(pkg, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
