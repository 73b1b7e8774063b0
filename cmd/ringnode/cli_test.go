package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/ringchat/ringchat/internal/procutil"
	"github.com/ringchat/ringchat/internal/status"
	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
)

var ringnodeBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, "./cmd/ringnode", &ringnodeBin))
}

type result struct {
	stdout, stderr string
	code           int
}

// run starts ringnode in dir with args and extra environment.
func run(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return runRingnode(t, dir, time.Minute, env, "", args...)
}

// runRingnode runs ringnode in dir with args, extra environment and
// standard input; a command still running after limit is killed (exit
// code -1).
func runRingnode(t *testing.T, dir string, limit time.Duration, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, ringnodeBin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, append(cleanEnv(), env...), strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run ringnode %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// cleanEnv drops the variables that would change what the command does.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RINGNODE_") || strings.HasPrefix(kv, "RINGCHAT_DB=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// workDir makes a directory holding the repository's nodes.csv.
func workDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(), "nodes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nodes.csv"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mysqlURL(t *testing.T) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(testutil.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u := "mysql://" + cfg.User
	if cfg.Passwd != "" {
		u += ":" + cfg.Passwd
	}
	return u + "@" + cfg.Addr + "/" + cfg.DBName
}

func checkFreshStatus(t *testing.T, dir string, env []string) {
	t.Helper()
	r := run(t, dir, env, "status", "--json")
	if r.code != 0 {
		t.Fatalf("status --json: exit %d: %s", r.code, r.stderr)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, r.stdout)
	}
	if len(rep.Nodes) != 5 || rep.Coordinator != nil || len(rep.Ring) != 0 {
		t.Fatalf("fresh status = %+v", rep)
	}
	for i, n := range rep.Nodes {
		if n.Answers == nil {
			t.Errorf("node %d: not probed", i+1)
		}
		n.Answers = nil // whether something listens on 800x here is not the test's
		want := status.NodeReport{ID: int64(i + 1), Host: "127.0.0.1", CoordinationPort: 5001 + i, ClientPort: 8001 + i, Online: []string{}, HealthAgeMS: -1}
		if diff := cmp.Diff(want, n); diff != "" {
			t.Errorf("node %d (-want +got):\n%s", i+1, diff)
		}
	}
}

func TestMigrateTwiceAndStatus(t *testing.T) {
	stores := map[string]func(t *testing.T) []string{
		"sqlite-default": func(t *testing.T) []string { return nil },
		"sqlite": func(t *testing.T) []string {
			return []string{"RINGCHAT_DB=sqlite:" + filepath.Join(t.TempDir(), "x.db")}
		},
		"mariadb-url":    func(t *testing.T) []string { return []string{"RINGCHAT_DB=" + mysqlURL(t)} },
		"mariadb-driver": func(t *testing.T) []string { return []string{"RINGNODE_DB=" + testutil.MySQLDSN(t)} },
	}
	for name, envFn := range stores {
		t.Run(name, func(t *testing.T) {
			dir, env := workDir(t), envFn(t)
			first := run(t, dir, env, "migrate")
			if first.code != 0 || !strings.Contains(first.stdout, "applied 00001_init.sql") ||
				!strings.Contains(first.stdout, "5 nodes, 5 new") {
				t.Fatalf("first migrate: exit %d\nstdout: %s\nstderr: %s", first.code, first.stdout, first.stderr)
			}
			second := run(t, dir, env, "migrate")
			if second.code != 0 || strings.Contains(second.stdout, "applied") || !strings.Contains(second.stdout, "5 nodes, 0 new") {
				t.Fatalf("second migrate: exit %d\nstdout: %s\nstderr: %s", second.code, second.stdout, second.stderr)
			}
			checkFreshStatus(t, dir, env)
		})
	}
}

func TestConcurrentStartMigratesOnce(t *testing.T) {
	for name, env := range map[string]func(t *testing.T) string{
		"sqlite":  func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "x.db") },
		"mariadb": mysqlURL,
	} {
		t.Run(name, func(t *testing.T) {
			dir, dsn := workDir(t), env(t)
			var wg sync.WaitGroup
			results := make([]result, 5)
			for i := range results {
				wg.Go(func() { results[i] = run(t, dir, nil, "migrate", "--db", dsn) })
			}
			wg.Wait()
			applied := 0
			for i, r := range results {
				if r.code != 0 {
					t.Errorf("process %d: exit %d: %s", i, r.code, r.stderr)
				}
				applied += strings.Count(r.stdout, "applied 00001_init.sql")
			}
			if applied != 1 {
				t.Errorf("migration 1 reported applied by %d processes, want 1", applied)
			}
			st, err := store.Open(context.Background(), dsn, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			versions, err := store.AppliedMigrations(context.Background(), st)
			if err != nil || !cmp.Equal(versions, allVersions(t)) {
				t.Errorf("version table = %v, %v; want each of %v once", versions, err, allVersions(t))
			}
			nodes, _ := st.Nodes(context.Background())
			if len(nodes) != 5 {
				t.Errorf("%d nodes in the store, want 5", len(nodes))
			}
		})
	}
}

// allVersions lists the schema versions the binary brings.
func allVersions(t *testing.T) []int64 {
	t.Helper()
	out, err := store.SchemaVersions()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStatusShowsRing(t *testing.T) {
	dir := workDir(t)
	dsn := "sqlite:" + filepath.Join(dir, "ring.db")
	if r := run(t, dir, nil, "migrate", "--db", dsn); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	epoch, err := st.ClaimCoordinator(ctx, 5, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = st.SetSuccessors(ctx, store.Coordinator{NodeID: 5, Epoch: epoch}, []store.SuccessorChange{
		{NodeID: 1, Successor: 3}, {NodeID: 3, Successor: 5}, {NodeID: 5, Successor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, u := range []struct {
			name string
			node int64
		}{{"alice", 3}, {"bob", 3}, {"carol", 1}} {
			usr, _, err := tx.EnsureUser(u.name)
			if err != nil {
				return err
			}
			if err := tx.SetPresence(usr.ID, u.node); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, nil, "status", "--db", dsn)
	if r.code != 0 {
		t.Fatalf("status: %s", r.stderr)
	}
	for _, want := range []string{
		"coordinator:  node 5 (epoch 1)",
		"ring:         1 -> 3 -> 5 -> 1 (3 of 5 nodes)",
		"online users: 3",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	var row3 string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "3 ") {
			row3 = line
		}
	}
	if f := strings.Fields(row3); len(f) < 9 || f[5] != "yes" || f[6] != "5" || !strings.Contains(row3, "alice, bob") {
		t.Errorf("row of node 3 = %q", row3)
	}
}

// After the ring stops, its rows still say "in ring": status says which
// nodes answer, so that a stopped ring reads as stopped.
func TestStatusSaysWhichNodesAnswer(t *testing.T) {
	dir := workDir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dead, err := procutil.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	list := fmt.Sprintf("id,host,coordination_port,client_port\n1,127.0.0.1,%d,%d\n2,127.0.0.1,%d,%d\n", dead[0], port, dead[1], dead[2])
	if err := os.WriteFile(filepath.Join(dir, "two.csv"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	db := "sqlite:" + filepath.Join(dir, "two.db")
	if r := run(t, dir, nil, "migrate", "-f", "two.csv", "--db", db); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	r := run(t, dir, nil, "status", "-f", "two.csv", "--db", db)
	if r.code != 0 {
		t.Fatalf("status: %s", r.stderr)
	}
	if !strings.Contains(r.stdout, "answering:    1 of 2 nodes") {
		t.Errorf("status does not count the one node that answers:\n%s", r.stdout)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			rows[f[0]] = f
		}
	}
	if rows["1"] == nil || rows["1"][4] != "yes" || rows["2"] == nil || rows["2"][4] != "no" {
		t.Errorf("ANSWERS column: node 1 %v, node 2 %v", rows["1"], rows["2"])
	}
}

func TestBadStoreGivesOneLine(t *testing.T) {
	dir := workDir(t)
	server := testutil.MySQLDSN(t) // also proves the server is up, so refusals below are ours
	cfg, _ := mysql.ParseDSN(server)
	tests := []struct {
		name, dsn, want string
		code            int
	}{
		{"unknown scheme", "postgres://localhost/x", "bad DSN", 2},
		{"bad port", "mysql://root@127.0.0.1:99999/x", "out of range", 2},
		{"no database", "mysql://root@127.0.0.1:3306", "needs a database name", 2},
		{"unreachable", "mysql://root@127.0.0.1:1/x", "connection refused", 1},
		{"bad credentials", "mysql://nosuchuser:wrong@" + cfg.Addr + "/x", "access denied", 1},
		{"missing database", "mysql://" + cfg.User + "@" + cfg.Addr + "/ringchat_no_such_db", "does not exist", 1},
		{"missing sqlite file", "sqlite:" + filepath.Join(dir, "none.db"), "no store at", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, nil, "status", "--db", tc.dsn)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != tc.code || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q (want one line with %q)", r.code, tc.code, r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "wrong") {
				t.Errorf("password leaked into the message: %q", r.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Error("status created a store file")
	}
}

func TestFlagsAndEnvironment(t *testing.T) {
	dir := workDir(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"bad log level from env", []string{"RINGNODE_LOG_LEVEL=loud"}, []string{"status"}, 2, "RINGNODE_LOG_LEVEL"},
		{"bad log format", nil, []string{"status", "--log-format", "xml"}, 2, "log format"},
		{"unknown command", nil, []string{"bogus"}, 2, "unknown command"},
		{"unknown flag", nil, []string{"status", "--bogus"}, 2, "unknown flag"},
		{"bad node list", nil, []string{"migrate", "-f", "missing.csv"}, 1, "missing.csv"},
		{"status with a missing node list", nil, []string{"status", "-f", "missing.csv"}, 1, "missing.csv"},
		{"version", nil, []string{"version"}, 0, ""},
		{"metrics on all interfaces", nil, []string{"run", "-i", "1", "--metrics-addr", "0.0.0.0:9100"}, 2, "loopback"},
		{"metrics address from env", []string{"RINGNODE_METRICS_ADDR=10.0.0.1:80"}, []string{"run", "-i", "1"}, 2, "loopback"},
		{"lease shorter than three ticks", nil, []string{"run", "-i", "1", "--lease-ttl", "30ms"}, 2, "--lease-ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, tc.env, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", r.code, tc.code, r.stderr, tc.want)
			}
		})
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("id,host,coordination_port,client_port\n1,h,5001,8001\n1,h,5002,8002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, []string{"RINGNODE_NODES=" + bad}, "migrate")
	if r.code == 0 || !strings.Contains(r.stderr, "bad.csv:3: duplicate id 1") {
		t.Errorf("bad node list from env: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".ringchat")); err == nil {
		t.Error("a rejected node list still created a store")
	}
	v := run(t, dir, nil, "version")
	if !strings.HasPrefix(v.stdout, "ringnode ") || !strings.Contains(v.stdout, fmt.Sprintf("schema %d", slices.Max(allVersions(t)))) {
		t.Errorf("version = %q", v.stdout)
	}
}

func TestClusterNodeArgs(t *testing.T) {
	o := &runOpts{metrics: "127.0.0.1:9100", cpuProfile: "/tmp/cpu.out"}
	got, err := nodeArgs(o, 2, 7)
	want := []string{"--id", "7", "--metrics-addr", "127.0.0.1:9102", "--cpu-profile", "/tmp/cpu.out.node7"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("nodeArgs = %q, %v; want %q", got, err, want)
	}
	if got, _ := nodeArgs(&runOpts{metrics: "localhost:0"}, 3, 4); !slices.Equal(got, []string{"--id", "4", "--metrics-addr", "localhost:0"}) {
		t.Fatalf("port 0: %q", got)
	}
	if got, _ := nodeArgs(&runOpts{}, 0, 1); !slices.Equal(got, []string{"--id", "1"}) {
		t.Fatalf("no options: %q", got)
	}
	if _, err := nodeArgs(&runOpts{metrics: "127.0.0.1:65535"}, 1, 2); err == nil {
		t.Fatal("port 65536 accepted")
	}
}

// A node of `ringnode cluster` killed with kill -9 is not restarted: the
// cluster says so with the command to start it again, counts what still
// runs when it stops, and warns about the development key once, not once
// per node.
func TestClusterNodeKilled(t *testing.T) {
	dir := t.TempDir()
	ports, err := procutil.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	list := "id,host,coordination_port,client_port\n"
	for i := range 3 {
		list += fmt.Sprintf("%d,127.0.0.1,%d,%d\n", i+1, ports[2*i], ports[2*i+1])
	}
	if err := os.WriteFile(filepath.Join(dir, "three.csv"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ringnodeBin, "cluster", "--drop", "--nodes", "three.csv", "--db", "sqlite:"+filepath.Join(dir, "c.db"), "--log-format", "json")
	cmd.Dir, cmd.Env = dir, cleanEnv()
	out := &procutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	testutil.Eventually(t, 30*time.Second, "the cluster starts 3 nodes", func() bool {
		return strings.Contains(string(out.Bytes()), "cluster: 3 nodes started")
	})
	kids, err := exec.Command("pgrep", "-P", strconv.Itoa(cmd.Process.Pid)).Output()
	if err != nil {
		t.Fatalf("the cluster's nodes: %v", err)
	}
	pids := strings.Fields(string(kids))
	if len(pids) != 3 {
		t.Fatalf("the cluster runs %d processes, want 3", len(pids))
	}
	pid, _ := strconv.Atoi(pids[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the cluster says the node is not restarted", func() bool {
		return strings.Contains(string(out.Bytes()), "is not restarted; to start it again, in another terminal: ")
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("the cluster did not stop")
	}
	text := string(out.Bytes())
	if !strings.Contains(text, "cluster: stopping 2 nodes (1 had exited)") {
		t.Errorf("the cluster's stop does not count what runs:\n%s", text)
	}
	if n := strings.Count(text, "insecure development key"); n != 1 {
		t.Errorf("%d warnings about the development key, want 1:\n%s", n, text)
	}
	if !strings.Contains(text, "run --id ") || !strings.Contains(text, "--db sqlite:") {
		t.Errorf("no command to start the node again:\n%s", text)
	}
}
