package logging

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/testutil"
)

// durField finds a duration logged with zerolog's Dur, and its field name.
var durField = regexp.MustCompile(`\bDur\("([^"]*)"`)

// TestDurationFieldsSayTheirUnit: a duration logged as "tick=20" leaves the
// reader guessing; every Dur field of the code is named *_ms, the unit
// DurationFieldUnit sets.
func TestDurationFieldsSayTheirUnit(t *testing.T) {
	root := testutil.ModuleRoot()
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range durField.FindAllStringSubmatch(string(b), -1) {
			found++
			if !strings.HasSuffix(m[1], "_ms") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s logs the duration %q without its unit: name it %s_ms", rel, m[1], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no Dur field found: the search is broken")
	}
}
