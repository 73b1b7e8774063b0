package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/procutil"
	"github.com/ringchat/ringchat/internal/testutil"
	"github.com/ringchat/ringchat/internal/wire"
)

// runFor is run with a time limit: a command still running after limit is
// killed (exit code -1).
func runFor(t *testing.T, dir string, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	return runRingnode(t, dir, limit, env, "", args...)
}

// labDir is a directory whose node list puts node 2 on another machine.
func labDir(t *testing.T) string {
	t.Helper()
	ports, err := procutil.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	list := fmt.Sprintf("id,host,coordination_port,client_port\n1,127.0.0.1,%d,%d\n2,10.0.0.2,5002,8002\n", ports[0], ports[1])
	if err := os.WriteFile(filepath.Join(dir, "nodes.csv"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A node whose node list reaches off this machine refuses the public
// development key, naming the flag; with a key from keygen it starts.
func TestClusterKeyRequiredOffLoopback(t *testing.T) {
	dir := labDir(t)
	r := runFor(t, dir, 15*time.Second, nil, "run", "-i", "1")
	if r.code != 2 {
		t.Fatalf("run without a key: exit %d, want 2 (stderr %q)", r.code, r.stderr)
	}
	for _, want := range []string{"10.0.0.2", "--cluster-key-file", "ringnode keygen"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not mention %q", r.stderr, want)
		}
	}
	// A non-loopback ring port needs the key as well, even on a loopback list.
	r = runFor(t, workDir(t), 15*time.Second, nil, "run", "-i", "1", "--listen", "0.0.0.0:0")
	if r.code != 2 || !strings.Contains(r.stderr, "--listen 0.0.0.0:0 is not a loopback address") {
		t.Errorf("--listen 0.0.0.0 without a key: exit %d, stderr %q", r.code, r.stderr)
	}

	if r := run(t, dir, nil, "keygen", "ring.key"); r.code != 0 {
		t.Fatalf("keygen: exit %d, %s", r.code, r.stderr)
	}
	cmd := exec.Command(ringnodeBin, "run", "-i", "1", "--cluster-key-file", "ring.key", "--log-format", "json")
	cmd.Dir, cmd.Env = dir, cleanEnv()
	var log procutil.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	serving := testutil.WaitFor(30*time.Second, 10*time.Millisecond, func() bool {
		if bytes.Contains(log.Bytes(), []byte("chat: serving clients")) {
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("node with a key exited: %v\n%s", err, log.Bytes())
		default:
		}
		return false
	})
	if !serving {
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("node with a key did not start:\n%s", log.Bytes())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Errorf("node with a key: %v\n%s", err, log.Bytes())
	}
}

// keygen writes a usable key readable by its owner only, and does not
// replace an existing one without --force.
func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.key")
	r := run(t, dir, nil, "keygen", path)
	if r.code != 0 || !strings.Contains(r.stdout, "mode 0600") {
		t.Fatalf("keygen: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	check := func() []byte {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
		}
		key, isDev, err := wire.LoadKey(path, "")
		if err != nil || isDev || len(key) != 32 {
			t.Fatalf("LoadKey: %d bytes, dev %v, %v", len(key), isDev, err)
		}
		return key
	}
	first := check()

	r = run(t, dir, nil, "keygen", path)
	if r.code == 0 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("keygen over an existing file: exit %d, stderr %q", r.code, r.stderr)
	}
	if !bytes.Equal(check(), first) {
		t.Error("keygen without --force changed the key")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if r = run(t, dir, nil, "keygen", "--force", path); r.code != 0 {
		t.Fatalf("keygen --force: exit %d, %s", r.code, r.stderr)
	}
	if bytes.Equal(check(), first) {
		t.Error("keygen --force kept the old key")
	}
	if r = run(t, dir, nil, "keygen"); r.code != 2 {
		t.Errorf("keygen without a file: exit %d", r.code)
	}
}

// --db-file reads the DSN from a file, for every command that takes --db;
// giving both is a mistake.
func TestDBFile(t *testing.T) {
	dir := workDir(t)
	dsnFile := filepath.Join(dir, "db.dsn")
	if err := os.WriteFile(dsnFile, []byte("  sqlite:"+filepath.Join(dir, "from-file.db")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, nil, "migrate", "--db-file", dsnFile); r.code != 0 || !strings.Contains(r.stdout, "from-file.db") {
		t.Fatalf("migrate --db-file: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, dir, []string{"RINGNODE_DB_FILE=" + dsnFile}, "status"); r.code != 0 || !strings.Contains(r.stdout, "from-file.db") {
		t.Errorf("status with RINGNODE_DB_FILE: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, dir, nil, "status", "--db", "sqlite:x.db", "--db-file", dsnFile); r.code != 2 || !strings.Contains(r.stderr, "not both") {
		t.Errorf("--db and --db-file: exit %d, stderr %q", r.code, r.stderr)
	}
	// The command line wins over the environment.
	if r := run(t, dir, []string{"RINGCHAT_DB=sqlite:elsewhere.db"}, "status", "--db-file", dsnFile); r.code != 0 || !strings.Contains(r.stdout, "from-file.db") {
		t.Errorf("--db-file over RINGCHAT_DB: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	empty := filepath.Join(dir, "empty.dsn")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, nil, "status", "--db-file", empty); r.code != 2 || !strings.Contains(r.stderr, "is empty") {
		t.Errorf("empty --db-file: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, dir, nil, "status", "--db-file", filepath.Join(dir, "missing")); r.code != 2 || !strings.Contains(r.stderr, "--db-file") {
		t.Errorf("missing --db-file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// --db-ca turns TLS on for a MariaDB DSN that names none: against a
// server without TLS the command fails saying so, instead of connecting in
// plain text. It makes no sense for SQLite.
func TestDBCA(t *testing.T) {
	certs := testutil.NewCerts(t)
	dir := workDir(t)
	url := mysqlURL(t)
	if r := run(t, dir, nil, "migrate", "--db", url); r.code != 0 {
		t.Fatalf("migrate: exit %d, %s", r.code, r.stderr)
	}
	r := run(t, dir, nil, "status", "--db", url, "--db-ca", certs.CAFile)
	if r.code == 0 || !strings.Contains(r.stderr, "TLS") {
		t.Errorf("status --db-ca against a server without TLS: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, dir, nil, "status", "--db", "sqlite:x.db", "--db-ca", certs.CAFile); r.code != 2 || !strings.Contains(r.stderr, "MariaDB") {
		t.Errorf("--db-ca with SQLite: exit %d, stderr %q", r.code, r.stderr)
	}
}
