package migrations

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Both dialects must always carry the same schema versions, so that every
// store passes the same conformance suite.
func TestDialectsCarrySameVersions(t *testing.T) {
	list := func(dir string) []string {
		entries, err := fs.ReadDir(FS, dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".sql") {
				t.Errorf("%s/%s: only .sql files belong here", dir, e.Name())
			}
			b, _ := fs.ReadFile(FS, dir+"/"+e.Name())
			if !strings.Contains(string(b), "-- +goose Up") || !strings.Contains(string(b), "-- +goose Down") {
				t.Errorf("%s/%s lacks goose Up/Down annotations", dir, e.Name())
			}
			names = append(names, e.Name())
		}
		return names
	}
	mysql, sqlite := list("mysql"), list("sqlite")
	if len(mysql) == 0 {
		t.Fatal("no migrations embedded")
	}
	if diff := cmp.Diff(mysql, sqlite); diff != "" {
		t.Errorf("mysql and sqlite migrations differ (-mysql +sqlite):\n%s", diff)
	}
}
