// Package buildinfo reports the version of the running binary.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at link time by the Makefile (-X); otherwise it is taken
// from the module's build information.
var Version = ""

// String returns "VERSION (commit REV, GOVERSION)".
func String() string {
	v, rev := Version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
			if s.Key == "vcs.modified" && s.Value == "true" {
				rev += "-dirty"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, rev, runtime.Version())
}
