// Package scripts holds tests for the shell scripts in this directory.
package scripts

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/testutil"
)

// labEnv lists the environment variables lab.sh reads; tests start from an
// environment without them.
var labEnv = []string{
	"RINGNODE_NODES", "LAB_BIN", "RINGCHAT_DB", "RINGNODE_ELECTION", "LAB_SSH_USER",
	"LAB_SSH_OPTS", "LAB_WORKDIR", "RINGNODE_CLUSTER_KEY_FILE", "RINGNODE_DB_FILE",
}

func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, v := range labEnv {
			if name == v {
				drop = true
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func needBash(t *testing.T) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	return bash
}

type result struct {
	stdout, stderr string
	code           int
}

// lab runs lab.sh with args in env (nil: cleanEnv()).
func lab(t *testing.T, env []string, args ...string) result {
	t.Helper()
	bash := needBash(t)
	script, err := filepath.Abs("lab.sh")
	if err != nil {
		t.Fatal(err)
	}
	if env == nil {
		env = cleanEnv()
	}
	cmd := exec.Command(bash, append([]string{script}, args...)...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running lab.sh: %v", err)
		}
		code = ee.ExitCode()
	}
	return result{stdout.String(), stderr.String(), code}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func checkLines(t *testing.T, r result, want []string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr: %s", r.code, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("unexpected stderr: %s", r.stderr)
	}
	got := lines(r.stdout)
	if len(got) != len(want) {
		t.Errorf("got %d lines, want %d", len(got), len(want))
	}
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
}

const defOpts = "-o BatchMode=yes -o ConnectTimeout=5"

// upLine is the ssh line lab.sh prints for starting node id; run is the
// already quoted argument list after "BIN run".
func upLine(opts, target, workdir, bin string, id int, run string) string {
	n := strconv.Itoa(id)
	return "ssh " + opts + " " + target + " 'mkdir -p " + workdir + " && cd " + workdir +
		" && if [ -f node-" + n + ".pid ] && kill -0 \"$(cat node-" + n + ".pid)\" 2>/dev/null; then echo \"already running $(cat node-" + n + ".pid)\"; else nohup " +
		bin + " run " + run + " >node-" + n + ".log 2>&1 </dev/null & echo $! >node-" + n + ".pid && echo \"started $!\"; fi'"
}

// secretLine is the ssh line that stores its standard input, from src, as
// workdir/name.
func secretLine(opts, target, workdir, name, src string) string {
	f := workdir + "/" + name
	return "ssh " + opts + " " + target + " 'umask 077 && mkdir -p " + workdir + " && rm -f " + f + " && cat >" + f + "' <" + src
}

// defKey is the key file lab.sh uses (and up creates) by default.
const defKey = ".ringchat/lab-cluster.key"

func downLine(opts, target, workdir string, id int) string {
	f := workdir + "/node-" + strconv.Itoa(id) + ".pid"
	return "ssh " + opts + " " + target + " 'if [ -f " + f + " ]; then pid=$(cat " + f + "); if kill -0 \"$pid\" 2>/dev/null; then kill -TERM \"$pid\" && echo \"stopped $pid\"; else echo \"not running\"; fi; rm -f " + f + "; else echo \"not running\"; fi'"
}

func statusLine(opts, target, workdir string, id int) string {
	f := workdir + "/node-" + strconv.Itoa(id) + ".pid"
	return "ssh " + opts + " " + target + " 'if [ -f " + f + " ] && pid=$(cat " + f + ") && kill -0 \"$pid\" 2>/dev/null; then echo \"running $pid\"; else echo stopped; fi'"
}

const ourList = `# lab ring
id,host,coordination_port,client_port
1,10.0.0.1,5001,8001

2, lab-02.example , 5002 , 8002
3,10.0.0.1,5003,8003
`

func TestDryRunDefaults(t *testing.T) {
	nodes := writeFile(t, t.TempDir(), "ring.csv", ourList)

	t.Run("up", func(t *testing.T) {
		r := lab(t, nil, "--dry-run", "--nodes", nodes, "up")
		checkLines(t, r, []string{
			"ssh -o BatchMode=yes -o ConnectTimeout=5 10.0.0.1 'umask 077 && mkdir -p ringchat && rm -f ringchat/cluster.key && cat >ringchat/cluster.key' <.ringchat/lab-cluster.key",
			"scp -o BatchMode=yes -o ConnectTimeout=5 -- " + nodes + " 10.0.0.1:ringchat/ring.csv",
			secretLine(defOpts, "lab-02.example", "ringchat", "cluster.key", defKey),
			"scp -o BatchMode=yes -o ConnectTimeout=5 -- " + nodes + " lab-02.example:ringchat/ring.csv",
			`ssh -o BatchMode=yes -o ConnectTimeout=5 10.0.0.1 'mkdir -p ringchat && cd ringchat && if [ -f node-1.pid ] && kill -0 "$(cat node-1.pid)" 2>/dev/null; then echo "already running $(cat node-1.pid)"; else nohup ringnode run --id 1 --nodes ring.csv --election chang-roberts --cluster-key-file cluster.key >node-1.log 2>&1 </dev/null & echo $! >node-1.pid && echo "started $!"; fi'`,
			upLine(defOpts, "lab-02.example", "ringchat", "ringnode", 2, "--id 2 --nodes ring.csv --election chang-roberts --cluster-key-file cluster.key"),
			upLine(defOpts, "10.0.0.1", "ringchat", "ringnode", 3, "--id 3 --nodes ring.csv --election chang-roberts --cluster-key-file cluster.key"),
		})
	})
	t.Run("down", func(t *testing.T) {
		r := lab(t, nil, "--dry-run", "--nodes", nodes, "down")
		checkLines(t, r, []string{
			`ssh -o BatchMode=yes -o ConnectTimeout=5 10.0.0.1 'if [ -f ringchat/node-1.pid ]; then pid=$(cat ringchat/node-1.pid); if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" && echo "stopped $pid"; else echo "not running"; fi; rm -f ringchat/node-1.pid; else echo "not running"; fi'`,
			downLine(defOpts, "lab-02.example", "ringchat", 2),
			downLine(defOpts, "10.0.0.1", "ringchat", 3),
		})
	})
	t.Run("status", func(t *testing.T) {
		r := lab(t, nil, "status", "--nodes="+nodes, "--dry-run")
		checkLines(t, r, []string{
			`ssh -o BatchMode=yes -o ConnectTimeout=5 10.0.0.1 'if [ -f ringchat/node-1.pid ] && pid=$(cat ringchat/node-1.pid) && kill -0 "$pid" 2>/dev/null; then echo "running $pid"; else echo stopped; fi'`,
			statusLine(defOpts, "lab-02.example", "ringchat", 2),
			statusLine(defOpts, "10.0.0.1", "ringchat", 3),
		})
	})
}

// dsn contains spaces, both quote characters, '$', a backquote and a
// semicolon: it must arrive intact, and never on a command line.
const dsn = `user=ring pass='a b"c' host=$HOST;x` + "`id`"

func TestDryRunOptions(t *testing.T) {
	nodes := writeFile(t, t.TempDir(), "nodes.csv", ourList)
	args := []string{
		"--dry-run", "--nodes", nodes, "--user", "alice", "--ssh-opts", "-o Port=2222  -i /k/id",
		"--bin", "/opt/ring node/ringnode", "--db", dsn, "--election", "bully",
		"--workdir", "lab/ring", "--cluster-key-file", "/etc/ring key",
	}
	const opts = "-o Port=2222 -i /k/id"
	run := func(id int) string {
		return "--id " + strconv.Itoa(id) + " --nodes nodes.csv --election bully --cluster-key-file cluster.key --db-file db.dsn"
	}
	const bin = `/opt/ring\ node/ringnode`

	t.Run("up", func(t *testing.T) {
		r := lab(t, nil, append(args, "up")...)
		checkLines(t, r, []string{
			"ssh -o Port=2222 -i /k/id alice@10.0.0.1 'umask 077 && mkdir -p lab/ring && rm -f lab/ring/cluster.key && cat >lab/ring/cluster.key' <'/etc/ring key'",
			"ssh -o Port=2222 -i /k/id alice@10.0.0.1 'umask 077 && mkdir -p lab/ring && rm -f lab/ring/db.dsn && cat >lab/ring/db.dsn' <'(--db)'",
			"scp -o Port=2222 -i /k/id -- " + nodes + " alice@10.0.0.1:lab/ring/nodes.csv",
			secretLine(opts, "alice@lab-02.example", "lab/ring", "cluster.key", "'/etc/ring key'"),
			secretLine(opts, "alice@lab-02.example", "lab/ring", "db.dsn", "'(--db)'"),
			"scp -o Port=2222 -i /k/id -- " + nodes + " alice@lab-02.example:lab/ring/nodes.csv",
			`ssh -o Port=2222 -i /k/id alice@10.0.0.1 'mkdir -p lab/ring && cd lab/ring && if [ -f node-1.pid ] && kill -0 "$(cat node-1.pid)" 2>/dev/null; then echo "already running $(cat node-1.pid)"; else nohup /opt/ring\ node/ringnode run --id 1 --nodes nodes.csv --election bully --cluster-key-file cluster.key --db-file db.dsn >node-1.log 2>&1 </dev/null & echo $! >node-1.pid && echo "started $!"; fi'`,
			upLine(opts, "alice@lab-02.example", "lab/ring", bin, 2, run(2)),
			upLine(opts, "alice@10.0.0.1", "lab/ring", bin, 3, run(3)),
		})
	})
	t.Run("down", func(t *testing.T) {
		r := lab(t, nil, append(args, "down")...)
		checkLines(t, r, []string{
			downLine(opts, "alice@10.0.0.1", "lab/ring", 1),
			downLine(opts, "alice@lab-02.example", "lab/ring", 2),
			downLine(opts, "alice@10.0.0.1", "lab/ring", 3),
		})
	})
	t.Run("status", func(t *testing.T) {
		r := lab(t, nil, append(args, "status")...)
		checkLines(t, r, []string{
			statusLine(opts, "alice@10.0.0.1", "lab/ring", 1),
			statusLine(opts, "alice@lab-02.example", "lab/ring", 2),
			statusLine(opts, "alice@10.0.0.1", "lab/ring", 3),
		})
	})
	t.Run("environment", func(t *testing.T) {
		env := cleanEnv(
			"RINGNODE_NODES="+nodes, "LAB_SSH_USER=alice", "LAB_SSH_OPTS=-o Port=2222  -i /k/id",
			"LAB_BIN=/opt/ring node/ringnode", "RINGCHAT_DB="+dsn, "RINGNODE_ELECTION=bully",
			"LAB_WORKDIR=lab/ring", "RINGNODE_CLUSTER_KEY_FILE=/etc/ring key",
		)
		r := lab(t, env, "--dry-run", "--only", "3", "up")
		checkLines(t, r, []string{
			secretLine(opts, "alice@10.0.0.1", "lab/ring", "cluster.key", "'/etc/ring key'"),
			secretLine(opts, "alice@10.0.0.1", "lab/ring", "db.dsn", "'(--db)'"),
			"scp -o Port=2222 -i /k/id -- " + nodes + " alice@10.0.0.1:lab/ring/nodes.csv",
			upLine(opts, "alice@10.0.0.1", "lab/ring", bin, 3, run(3)),
		})
		// Options override the environment.
		r = lab(t, env, "--dry-run", "--only", "3", "--user", "bob", "--ssh-opts", "", "status")
		checkLines(t, r, []string{
			"ssh bob@10.0.0.1 'if [ -f lab/ring/node-3.pid ] && pid=$(cat lab/ring/node-3.pid) && kill -0 \"$pid\" 2>/dev/null; then echo \"running $pid\"; else echo stopped; fi'",
		})
	})
	t.Run("home relative bin", func(t *testing.T) {
		r := lab(t, nil, "--dry-run", "--nodes", nodes, "--only", "1", "--bin", "~/go/bin/ringnode", "up")
		checkLines(t, r, []string{
			secretLine(defOpts, "10.0.0.1", "ringchat", "cluster.key", defKey),
			"scp " + defOpts + " -- " + nodes + " 10.0.0.1:ringchat/nodes.csv",
			upLine(defOpts, "10.0.0.1", "ringchat", `"$HOME"/go/bin/ringnode`, 1, "--id 1 --nodes nodes.csv --election chang-roberts --cluster-key-file cluster.key"),
		})
	})
}

func TestDryRunOnly(t *testing.T) {
	nodes := writeFile(t, t.TempDir(), "nodes.csv", ourList)
	r := lab(t, nil, "--dry-run", "--nodes", nodes, "--only", "2", "down")
	checkLines(t, r, []string{downLine(defOpts, "lab-02.example", "ringchat", 2)})

	r = lab(t, nil, "--dry-run", "--nodes", nodes, "--only", "2", "status")
	checkLines(t, r, []string{statusLine(defOpts, "lab-02.example", "ringchat", 2)})

	r = lab(t, nil, "--dry-run", "--nodes", nodes, "--only", "2", "up")
	checkLines(t, r, []string{
		secretLine(defOpts, "lab-02.example", "ringchat", "cluster.key", defKey),
		"scp " + defOpts + " -- " + nodes + " lab-02.example:ringchat/nodes.csv",
		upLine(defOpts, "lab-02.example", "ringchat", "ringnode", 2, "--id 2 --nodes nodes.csv --election chang-roberts --cluster-key-file cluster.key"),
	})

	// Several ids, in file order, each once.
	r = lab(t, nil, "--dry-run", "--nodes", nodes, "--only", "3, 1,3", "status")
	checkLines(t, r, []string{
		statusLine(defOpts, "10.0.0.1", "ringchat", 1),
		statusLine(defOpts, "10.0.0.1", "ringchat", 3),
	})
}

func TestDryRunReferenceHeader(t *testing.T) {
	dir := t.TempDir()
	ref := writeFile(t, dir, "ref.csv", "nodeId, hostaddress, coordinationPort, clientport\r\n1, 127.0.0.1, 5001, 8001\r\n2, 127.0.0.1, 5002, 8002\r\n")
	r := lab(t, nil, "--dry-run", "--nodes", ref, "status")
	checkLines(t, r, []string{
		statusLine(defOpts, "127.0.0.1", "ringchat", 1),
		statusLine(defOpts, "127.0.0.1", "ringchat", 2),
	})

	// Columns are found by header name, whatever their order.
	reordered := writeFile(t, dir, "reordered.csv", "client_port,Host,coord_port,node_id\n8007,::1,5007,7\n8009,[fe80::1],5009,9\n")
	r = lab(t, nil, "--dry-run", "--nodes", reordered, "--user", "u", "up")
	checkLines(t, r, []string{
		secretLine(defOpts, "u@::1", "ringchat", "cluster.key", defKey),
		"scp " + defOpts + " -- " + reordered + " 'u@[::1]:ringchat/reordered.csv'",
		secretLine(defOpts, "u@fe80::1", "ringchat", "cluster.key", defKey),
		"scp " + defOpts + " -- " + reordered + " 'u@[fe80::1]:ringchat/reordered.csv'",
		upLine(defOpts, "u@::1", "ringchat", "ringnode", 7, "--id 7 --nodes reordered.csv --election chang-roberts --cluster-key-file cluster.key"),
		upLine(defOpts, "u@fe80::1", "ringchat", "ringnode", 9, "--id 9 --nodes reordered.csv --election chang-roberts --cluster-key-file cluster.key"),
	})

	// The repository's own node list.
	repo, err := filepath.Abs(filepath.Join("..", "nodes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	r = lab(t, nil, "--dry-run", "--nodes", repo, "down")
	if r.code != 0 || len(lines(r.stdout)) != 5 {
		t.Errorf("repo nodes.csv: exit %d, stdout:\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", ourList)
	// lab runs in a fresh directory, so a relative path must not be used.
	abs, err := filepath.Abs(good)
	if err != nil {
		t.Fatal(err)
	}
	hdr := "id,host,coordination_port,client_port\n"
	bad := func(name, content string) string { return writeFile(t, dir, name, content) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{"--nodes", abs}, "missing command"},
		{"invalid command", []string{"--nodes", abs, "start"}, "invalid command start"},
		{"two commands", []string{"--nodes", abs, "up", "down"}, "unexpected argument down"},
		{"unknown option", []string{"--nodes", abs, "--frobnicate", "up"}, "unknown option --frobnicate"},
		{"missing option value", []string{"up", "--nodes"}, "option --nodes needs a value"},
		{"value for flag", []string{"--nodes", abs, "--dry-run=yes", "up"}, "option --dry-run takes no value"},
		{"default node list missing", []string{"up"}, "cannot read node list nodes.csv"},
		{"unreadable node list", []string{"--nodes", filepath.Join(dir, "nope.csv"), "up"}, "cannot read node list"},
		{"unknown id in only", []string{"--nodes", abs, "--only", "9", "down"}, "id 9 in --only is not in"},
		{"bad id in only", []string{"--nodes", abs, "--only", "1,x", "down"}, `invalid id "x" in --only`},
		{"bad workdir", []string{"--nodes", abs, "--workdir", "a;b", "down"}, "invalid --workdir"},
		{"bad row id", []string{"--nodes", bad("id.csv", hdr+"1,h,1,2\nabc,h,3,4\n"), "up"}, `id.csv:3: id "abc" is not a positive integer`},
		{"bad row port", []string{"--nodes", bad("port.csv", hdr+"1,h,70000,2\n"), "up"}, `port.csv:2: coordination_port "70000" is not in range 1-65535`},
		{"missing field", []string{"--nodes", bad("short.csv", hdr+"1,h,1\n"), "up"}, "short.csv:2: missing fields"},
		{"too many fields", []string{"--nodes", bad("long.csv", hdr+"1,h,1,2,3\n"), "up"}, "long.csv:2: too many fields"},
		{"empty host", []string{"--nodes", bad("host.csv", hdr+"1, ,1,2\n"), "up"}, "host.csv:2: empty host"},
		{"option-like host", []string{"--nodes", bad("opt.csv", hdr+"1,-oProxyCommand=x,1,2\n"), "up"}, `opt.csv:2: invalid host "-oProxyCommand=x"`},
		{"duplicate id", []string{"--nodes", bad("dup.csv", hdr+"1,h,1,2\n1,g,1,2\n"), "up"}, "dup.csv:3: duplicate id 1"},
		{"unknown column", []string{"--nodes", bad("col.csv", "id,host,port,client_port\n"), "up"}, `col.csv:1: unknown column "port" in header`},
		{"missing column", []string{"--nodes", bad("miss.csv", "id,host,client_port\n1,h,2\n"), "up"}, "miss.csv:1: header is missing column coordination_port"},
		{"no nodes", []string{"--nodes", bad("none.csv", "# x\n"+hdr), "up"}, "header but no nodes"},
		{"db and db-file", []string{"--nodes", abs, "--db", "x", "--db-file", abs, "up"}, "--db or --db-file, not both"},
		{"unreadable db-file", []string{"--nodes", abs, "--db-file", filepath.Join(dir, "nope.dsn"), "up"}, "cannot read --db-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lab(t, nil, tt.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("unexpected stdout %q", r.stdout)
			}
			msg := lines(r.stderr)
			if len(msg) != 1 || !strings.HasPrefix(msg[0], "lab.sh: ") || !strings.Contains(msg[0], tt.want) {
				t.Errorf("stderr %q, want one line containing %q", r.stderr, tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	r := lab(t, nil, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "Usage: scripts/lab.sh [options] up|down|status") {
		t.Errorf("--help: exit %d, stdout %q", r.code, r.stdout)
	}
	for _, opt := range []string{"--nodes", "--bin", "--db", "--db-file", "--election", "--user", "--ssh-opts", "--workdir", "--cluster-key-file", "--only", "--dry-run"} {
		if !strings.Contains(r.stdout, opt) {
			t.Errorf("--help does not mention %s", opt)
		}
	}
}

// fakeRemote sets up a PATH with fake ssh and scp that run the remote command
// locally with sh in home (so the printf %q quoting is checked by a POSIX
// shell), and a fake ringnode in home/bin that records its arguments and
// sleeps. Hosts named *.invalid are unreachable (ssh exits 255).
func fakeRemote(t *testing.T) (env []string, home string) {
	t.Helper()
	for _, tool := range []string{"sh", "nohup", "sleep", "cat", "mkdir", "cp", "mv", "rm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	home = t.TempDir()
	fakebin := t.TempDir()
	writeExec := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExec(filepath.Join(fakebin, "ssh"), `#!/bin/sh
for a in "$@"; do target=$cmd; cmd=$a; done
case $target in *.invalid) echo "ssh: could not resolve $target" >&2; exit 255;; esac
cd "$HOME" || exit 255
exec sh -c "$cmd"
`)
	writeExec(filepath.Join(fakebin, "scp"), `#!/bin/sh
for a in "$@"; do src=$dst; dst=$a; done
case $dst in *.invalid:*) echo "scp: could not resolve" >&2; exit 255;; esac
exec cp -- "$src" "$HOME/${dst#*:}"
`)
	if err := os.Mkdir(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(filepath.Join(home, "bin", "ringnode"), `#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done >"args.$$.tmp" && mv "args.$$.tmp" "args.$$"
exec sleep 600
`)
	env = cleanEnv("HOME="+home, "PATH="+fakebin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return env, home
}

// waitFile polls until path exists or the deadline passes.
func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	var b []byte
	var err error
	if !testutil.WaitFor(20*time.Second, 10*time.Millisecond, func() bool {
		b, err = os.ReadFile(path)
		return err == nil
	}) {
		t.Fatalf("%s did not appear: %v", path, err)
	}
	return b
}

// TestUpStatusDown runs the real (non dry-run) commands against fake ssh,
// scp and ringnode, checking that quoted arguments arrive intact.
func TestUpStatusDown(t *testing.T) {
	env, home := fakeRemote(t)
	local := t.TempDir()
	nodes := writeFile(t, local, "ring.csv", "id,host,coordination_port,client_port\n1,127.0.0.1,5001,8001\n2,127.0.0.1,5002,8002\n")
	keyFile := writeFile(t, local, "ring key", "0123456789abcdef0123456789abcdef\n")
	common := []string{"--nodes", nodes, "--bin", "~/bin/ringnode", "--db", dsn, "--workdir", "lab/ring", "--cluster-key-file", keyFile}
	workdir := filepath.Join(home, "lab", "ring")

	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	})

	r := lab(t, env, append(common, "up")...)
	if r.code != 0 {
		t.Fatalf("up: exit %d, stderr: %s", r.code, r.stderr)
	}
	out := lines(r.stdout)
	if len(out) != 2 {
		t.Fatalf("up: stdout %q, want 2 lines", r.stdout)
	}
	for i, l := range out {
		prefix := strconv.Itoa(i+1) + " 127.0.0.1 started "
		if !strings.HasPrefix(l, prefix) {
			t.Fatalf("up line %q, want prefix %q", l, prefix)
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(l, prefix))
		if err != nil {
			t.Fatalf("up line %q: %v", l, err)
		}
		pids = append(pids, pid)
	}
	if b, err := os.ReadFile(filepath.Join(workdir, "ring.csv")); err != nil || !strings.HasPrefix(string(b), "id,host") {
		t.Errorf("node list not copied to workdir: %v", err)
	}
	for i, pid := range pids {
		id := strconv.Itoa(i + 1)
		args := strings.Split(strings.TrimSuffix(string(waitFile(t, filepath.Join(workdir, "args."+strconv.Itoa(pid)))), "\n"), "\n")
		want := []string{"run", "--id", id, "--nodes", "ring.csv", "--election", "chang-roberts", "--cluster-key-file", "cluster.key", "--db-file", "db.dsn"}
		if strings.Join(args, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("node %s argv:\n got %q\nwant %q", id, args, want)
		}
		b, err := os.ReadFile(filepath.Join(workdir, "node-"+id+".pid"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
			t.Errorf("node-%s.pid = %q, %v; want %d", id, b, err, pid)
		}
	}

	// The secrets arrive in files only their owner reads.
	for name, want := range map[string]string{"cluster.key": "0123456789abcdef0123456789abcdef\n", "db.dsn": dsn + "\n"} {
		p := filepath.Join(workdir, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, %v; want 0600", name, fi.Mode().Perm(), err)
		}
	}

	r = lab(t, env, append(common, "status")...)
	checkLines(t, r, []string{
		"1 127.0.0.1 running " + strconv.Itoa(pids[0]),
		"2 127.0.0.1 running " + strconv.Itoa(pids[1]),
	})

	// A second up leaves running nodes alone.
	r = lab(t, env, append(common, "--only", "2", "up")...)
	checkLines(t, r, []string{"2 127.0.0.1 already running " + strconv.Itoa(pids[1])})

	r = lab(t, env, append(common, "--only", "1", "down")...)
	checkLines(t, r, []string{"1 127.0.0.1 stopped " + strconv.Itoa(pids[0])})
	if _, err := os.Stat(filepath.Join(workdir, "node-1.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node-1.pid still there after down: %v", err)
	}

	r = lab(t, env, append(common, "status")...)
	checkLines(t, r, []string{
		"1 127.0.0.1 stopped",
		"2 127.0.0.1 running " + strconv.Itoa(pids[1]),
	})

	r = lab(t, env, append(common, "down")...)
	checkLines(t, r, []string{
		"1 127.0.0.1 not running",
		"2 127.0.0.1 stopped " + strconv.Itoa(pids[1]),
	})
	r = lab(t, env, append(common, "status")...)
	checkLines(t, r, []string{"1 127.0.0.1 stopped", "2 127.0.0.1 stopped"})
}

// TestSSHFailure checks that a failing host is reported, the other nodes are
// still handled, and the exit status is non-zero.
func TestSSHFailure(t *testing.T) {
	env, _ := fakeRemote(t)
	nodes := writeFile(t, t.TempDir(), "ring.csv", "id,host,coordination_port,client_port\n1,127.0.0.1,5001,8001\n2,lab-2.invalid,5002,8002\n3,127.0.0.1,5003,8003\n")
	for _, cmd := range []string{"status", "down", "up"} {
		t.Run(cmd, func(t *testing.T) {
			r := lab(t, env, "--nodes", nodes, "--bin", "/nonexistent/ringnode", cmd)
			if r.code == 0 || r.code == 2 {
				t.Errorf("exit %d, want 1", r.code)
			}
			out := lines(r.stdout)
			if len(out) != 2 || !strings.HasPrefix(out[0], "1 127.0.0.1 ") || !strings.HasPrefix(out[1], "3 127.0.0.1 ") {
				t.Errorf("stdout %q, want lines for nodes 1 and 3", r.stdout)
			}
			if !strings.Contains(r.stderr, "lab.sh: "+cmd+" failed for node(s) 2 (lab-2.invalid)") {
				t.Errorf("stderr %q does not report node 2", r.stderr)
			}
		})
	}
}

// TestUpMakesKey: without --cluster-key-file up creates a key (mode 0600)
// and copies it; a leading ~/ in a local path is the local home; an old,
// world-readable copy on the host is replaced by a private one.
func TestUpMakesKey(t *testing.T) {
	env, home := fakeRemote(t)
	writeFile(t, home, "ring.csv", "id,host,coordination_port,client_port\n1,127.0.0.1,5001,8001\n")
	writeFile(t, home, "db.dsn", dsn+"\n")
	workdir := filepath.Join(home, "lab")
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, workdir, "cluster.key", "an old key, readable by all\n")
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(workdir, "node-1.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	})
	r := lab(t, env, "--nodes", "~/ring.csv", "--bin", "~/bin/ringnode", "--workdir", "~/lab",
		"--cluster-key-file", "~/keys/lab.key", "--db-file", "~/db.dsn", "up")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "1 127.0.0.1 started ") {
		t.Fatalf("up: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	local := filepath.Join(home, "keys", "lab.key")
	if !strings.Contains(r.stderr, "created cluster key "+local+" (mode 0600)") {
		t.Errorf("stderr %q does not report the new key", r.stderr)
	}
	key, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.TrimSpace(string(key))) != 64 || strings.Trim(strings.TrimSpace(string(key)), "0123456789abcdef") != "" {
		t.Errorf("generated key %q, want 64 hex digits", key)
	}
	for _, f := range []string{local, filepath.Join(workdir, "cluster.key"), filepath.Join(workdir, "db.dsn")} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, fi.Mode().Perm(), err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(workdir, "cluster.key")); string(b) != string(key) {
		t.Errorf("host's key %q, want the local one %q", b, key)
	}
	if b, _ := os.ReadFile(filepath.Join(workdir, "db.dsn")); string(b) != dsn+"\n" {
		t.Errorf("host's DSN %q", b)
	}

	// A second up reuses the key: nodes started later can join.
	r = lab(t, env, "--nodes", "~/ring.csv", "--workdir", "~/lab", "--cluster-key-file", "~/keys/lab.key", "up")
	if r.code != 0 || strings.Contains(r.stderr, "created") {
		t.Errorf("second up: exit %d, stderr %q", r.code, r.stderr)
	}
	if again, _ := os.ReadFile(local); string(again) != string(key) {
		t.Error("a second up replaced the key")
	}
}
