package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/chat"
	"github.com/ringchat/ringchat/internal/nodelist"
	"github.com/ringchat/ringchat/internal/store"
)

// runStdin is run with standard input.
func runStdin(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	return runRingnode(t, dir, time.Minute, nil, stdin, args...)
}

// TestUserPasswd: the operator sets a password from standard input, for a
// name already used without one and for a new name.
func TestUserPasswd(t *testing.T) {
	dir := workDir(t)
	path := filepath.Join(dir, "ring.db")
	dsn := "sqlite:" + path
	ctx := context.Background()
	st, _, err := store.Prepare(ctx, store.DSN{Dialect: "sqlite", Path: path}, nil, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { _, _, err := tx.EnsureUser("alice"); return err }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, tc := range []struct{ name, stdin, want string }{
		{"alice", "correct horse\n", `password of "alice" set`},
		{"bob", "battery staple\r\n", `created user "bob" with a password`},
	} {
		r := runStdin(t, dir, tc.stdin, "user", "passwd", tc.name, "--db", dsn)
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("passwd %s: exit %d, %q %q", tc.name, r.code, r.stdout, r.stderr)
		}
	}
	if r := runStdin(t, dir, "", "user", "passwd", "carol", "--db", dsn); r.code != 2 || !strings.Contains(r.stderr, "no password on standard input") {
		t.Errorf("empty input: exit %d, %q", r.code, r.stderr)
	}
	if r := runStdin(t, dir, "pw\n", "user", "passwd", " bad", "--db", dsn); r.code != 2 || !strings.Contains(r.stderr, "space") {
		t.Errorf("bad name: exit %d, %q", r.code, r.stderr)
	}
	st = storeAt(t, dsn)
	for name, pw := range map[string]string{"alice": "correct horse", "bob": "battery staple"} {
		err := st.Update(ctx, func(tx store.Tx) error {
			u, err := tx.UserByName(name)
			if err != nil {
				return err
			}
			if ok, err := chat.PasswordMatches(u.PasswordHash, pw); !ok || err != nil {
				t.Errorf("%s: the stored hash does not match (%v)", name, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Update(ctx, func(tx store.Tx) error { _, err := tx.UserByName("carol"); return err }); err == nil {
		t.Error("a refused passwd created its user")
	}
}

func storeAt(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestAuthDefault: open for a ring on loopback only, password as soon as a
// node or the client port is reachable from elsewhere; --auth wins.
func TestAuthDefault(t *testing.T) {
	node := func(id int64, host string) store.NodeRow {
		return store.NodeRow{Entry: nodelist.Entry{ID: id, Host: host, CoordPort: 5000, ClientPort: 8000}}
	}
	local := []store.NodeRow{node(1, "127.0.0.1"), node(2, "localhost")}
	lab := []store.NodeRow{node(1, "127.0.0.1"), node(2, "10.0.0.2")}
	for _, tc := range []struct {
		name  string
		o     chatOpts
		table []store.NodeRow
		want  chat.AuthMode
	}{
		{"loopback ring", chatOpts{}, local, chat.AuthOpen},
		{"a lab node", chatOpts{}, lab, chat.AuthPassword},
		{"clients from anywhere", chatOpts{listen: "0.0.0.0:8001"}, local, chat.AuthPassword},
		{"explicit open", chatOpts{auth: "open"}, lab, chat.AuthOpen},
		{"explicit password", chatOpts{auth: "password"}, local, chat.AuthPassword},
	} {
		got, err := authMode(tc.o, tc.table[0], tc.table)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := authMode(chatOpts{auth: "none"}, local[0], local); err == nil {
		t.Error("--auth none accepted")
	}
	r := run(t, workDir(t), nil, "run", "-i", "1", "--auth", "none")
	if r.code != 2 || !strings.Contains(r.stderr, "--auth") {
		t.Errorf("run --auth none: exit %d, %q", r.code, r.stderr)
	}
}
