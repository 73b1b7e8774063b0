package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The rolling restart and --copy-bin, against the fake ssh and scp of
// fakeRemote (e2e/lab_test.go runs them over a real sshd).

func TestDryRunRestartCopyBin(t *testing.T) {
	nodes := writeFile(t, t.TempDir(), "ring.csv", "id,host,coordination_port,client_port\n1,10.0.0.1,5001,8001\n2,10.0.0.2,5002,8002\n")
	r := lab(t, nil, "--dry-run", "--nodes", nodes, "--copy-bin", "/b/ringnode", "--db", "x", "--wait", "7", "--only", "2", "restart")
	const o = "-o BatchMode=yes -o ConnectTimeout=5"
	checkLines(t, r, []string{
		secretLine(o, "10.0.0.2", "ringchat", "cluster.key", defKey),
		secretLine(o, "10.0.0.2", "ringchat", "db.dsn", "'(--db)'"),
		"scp " + o + " -- " + nodes + " 10.0.0.2:ringchat/ring.csv",
		"scp " + o + " -- /b/ringnode 10.0.0.2:ringchat/.ringnode.new",
		"ssh " + o + " 10.0.0.2 'chmod 755 ringchat/.ringnode.new && mv -f ringchat/.ringnode.new ringchat/ringnode'",
		"ssh " + o + ` 10.0.0.2 'alive() { st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [ "${st#Z}" = "$st" ]; }; if [ -f ringchat/node-2.pid ] && pid=$(cat ringchat/node-2.pid) && alive "$pid"; then kill -TERM "$pid"; i=0; while alive "$pid"; do i=$((i+1)); if [ $i -gt 70 ]; then echo "still running $pid after 7s"; exit 1; fi; sleep 0.1; done; echo "stopped $pid"; else echo "not running"; fi; rm -f ringchat/node-2.pid'`,
		upLine(o, "10.0.0.2", "ringchat", "./ringnode", 2, "--id 2 --nodes ring.csv --election chang-roberts --cluster-key-file cluster.key --db-file db.dsn"),
		"ssh " + o + ` 10.0.0.2 'cd ringchat && i=0; while :; do s=$(./ringnode status --json --nodes ring.csv --log-level error --db-file db.dsn 2>/dev/null | tr -d '\'' \t\n'\''); if printf %s "$s" | grep -Eq '\''"id":2,[^}]*"in_ring":true[^}]*"answers":true'\''; then echo in-ring; exit 0; fi; i=$((i+1)); if [ $i -gt 35 ]; then echo "not in the ring after 7s"; exit 1; fi; sleep 0.2; done'`,
	})
}

func TestRestartUsageErrors(t *testing.T) {
	dir := t.TempDir()
	nodes := writeFile(t, dir, "ring.csv", ourList)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bin and copy-bin", []string{"--bin", "x", "--copy-bin", nodes, "up"}, "--bin (a binary already on the hosts) or --copy-bin"},
		{"unreadable copy-bin", []string{"--copy-bin", filepath.Join(dir, "nope"), "restart"}, "cannot read --copy-bin"},
		{"bad wait", []string{"--wait", "soon", "restart"}, `invalid --wait "soon"`},
		{"zero wait", []string{"--wait", "0", "restart"}, `invalid --wait "0"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := lab(t, nil, append([]string{"--nodes", nodes}, tt.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

// fakeNode is a ringnode for fakeRemote: "run" records its arguments and
// sleeps until SIGTERM; "status --json" says every node of the list whose
// pid file names a live process is in the ring and answers.
const fakeNode = `#!/bin/sh
if [ "$1" = status ]; then
	printf '{"ring":[],"nodes":['
	sep=
	for f in node-*.pid; do
		[ -f "$f" ] || continue
		id=${f#node-}; id=${id%.pid}
		if kill -0 "$(cat "$f")" 2>/dev/null; then
			printf '%s{"id": %s, "host":"h", "in_ring": true, "online": [], "answers": true}' "$sep" "$id"
			sep=,
		fi
	done
	printf ']}\n'
	exit 0
fi
for a in "$@"; do printf '%s\n' "$a"; done >"args.$$.tmp" && mv "args.$$.tmp" "args.$$"
exec sleep 600
`

func TestRestartCopiesAndWaits(t *testing.T) {
	env, home := fakeRemote(t)
	local := t.TempDir()
	nodes := writeFile(t, local, "ring.csv", "id,host,coordination_port,client_port\n1,127.0.0.1,5001,8001\n2,127.0.0.1,5002,8002\n")
	bin := filepath.Join(local, "ringnode v1")
	if err := os.WriteFile(bin, []byte(fakeNode), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--nodes", nodes, "--copy-bin", bin, "--workdir", "lab", "--cluster-key-file", filepath.Join(local, "key")}
	workdir := filepath.Join(home, "lab")
	var pids []string
	t.Cleanup(func() {
		for _, pid := range pids {
			if n, err := strconv.Atoi(pid); err == nil {
				if p, err := os.FindProcess(n); err == nil {
					_ = p.Kill()
				}
			}
		}
	})

	r := lab(t, env, append(common, "up")...)
	if r.code != 0 {
		t.Fatalf("up: exit %d, %s", r.code, r.stderr)
	}
	for _, l := range lines(r.stdout) {
		pids = append(pids, l[strings.LastIndex(l, " ")+1:])
	}
	if fi, err := os.Stat(filepath.Join(workdir, "ringnode")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the binary on the host: %v %v", fi, err)
	}

	// A new binary: restart copies it, stops and starts each node in turn.
	if err := os.WriteFile(bin, []byte(fakeNode+"# v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = lab(t, env, append(common, "--wait", "10", "restart")...)
	if r.code != 0 {
		t.Fatalf("restart: exit %d, %s\n%s", r.code, r.stderr, r.stdout)
	}
	out := lines(r.stdout)
	if len(out) != 2 {
		t.Fatalf("restart: %q, want 2 lines", r.stdout)
	}
	for i, l := range out {
		re := regexp.MustCompile(`^` + strconv.Itoa(i+1) + ` 127\.0\.0\.1 restarted ([0-9]+) in-ring-after [0-9]+\.[0-9]{3}s \(stopped ` + pids[i] + `\)$`)
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("restart line %q, want %s", l, re)
		}
		pids = append(pids, m[1])
		if m[1] == pids[i] {
			t.Errorf("node %d has its old pid", i+1)
		}
	}
	if b, err := os.ReadFile(filepath.Join(workdir, "ringnode")); err != nil || !strings.HasSuffix(string(b), "# v2\n") {
		t.Errorf("the new binary was not copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(workdir, ".ringnode.new")); err == nil {
		t.Errorf("the temporary copy is left")
	}
	r = lab(t, env, append(common, "down")...)
	if r.code != 0 || strings.Count(r.stdout, " stopped ") != 2 {
		t.Errorf("down: exit %d, %q", r.code, r.stdout)
	}
}
