package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ringchat/ringchat/internal/store"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// An SQLite store is private to the user running the nodes: its directory
// is created 0700 and the database, -wal and -shm files are 0600.
func TestSQLiteFilesPrivate(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state", ".ringchat")
	path := filepath.Join(dir, "ringchat.db")
	st, err := store.Open(ctx, "sqlite:"+path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := store.Migrate(ctx, st); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("directory %s has mode %v, want 0700", d, m)
		}
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if m := mode(t, f); m != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(f), m)
		}
	}
}

// A store left world-readable (by an older version) is made private when
// it is opened.
func TestSQLiteFilesTightened(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	st, err := store.Open(ctx, "sqlite:"+path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Migrate(ctx, st); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(ctx, "sqlite:"+path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if m := mode(t, path); m != 0o600 {
		t.Errorf("reopened store has mode %v, want 0600", m)
	}
}
