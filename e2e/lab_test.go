package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
	"github.com/ringchat/ringchat/internal/status"
	"github.com/ringchat/ringchat/internal/testutil"
)

// The end-to-end test of scripts/lab.sh on a lab of 5 hosts made by
// scripts/netlab.sh (network namespaces on a bridge in 198.18.200.0/24,
// an sshd on each, a MariaDB server on the bridge). It needs root; under
// CI=true a missing prerequisite fails it (.ci/run installs them).

// testLab is the lab of this test: its own name and subnet, so that it
// never touches a lab someone made with netlab.sh's defaults.
type testLab struct {
	t      *testing.T
	script string
	env    []string
	dir    string
	subnet string
	// registered: the chat accounts made so far.
	registered map[string]bool
}

const labHosts = 5

func newTestLab(t *testing.T) *testLab {
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "not root (network namespaces and an sshd per lab host need it)"
	case lookPath("ip") == "":
		why = "no ip command (apt-get install iproute2)"
	case lookPath("sshd", "/usr/sbin/sshd") == "" || lookPath("ssh") == "" || lookPath("scp") == "":
		why = "no sshd, ssh or scp (apt-get install openssh-server openssh-client)"
	case lookPath("mariadbd", "/usr/sbin/mariadbd") == "":
		why = "no mariadbd (scripts/mariadb.sh install)"
	case lookPath("unshare") == "":
		why = "no unshare (util-linux)"
	}
	if why == "" {
		if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
			why = fmt.Sprintf("ip netns does not work here: %v %s", err, out)
		}
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the lab test cannot run: %s (.ci/run installs its prerequisites)", why)
		}
		t.Skipf("SKIPPING the lab test (scripts/netlab.sh, lab.sh over a real sshd): %s", why)
	}
	// One lab test at a time on this machine (another checkout's make test
	// may run it too): an abstract unix socket is the lock, released when
	// the process ends, and leaves no file.
	var lock net.Listener
	if !testutil.WaitFor(5*time.Minute, 200*time.Millisecond, func() bool {
		var err error
		lock, err = net.Listen("unix", "@ringchat-netlab-rctest")
		return err == nil
	}) {
		t.Fatal("another lab test held the lab for 5 minutes")
	}
	t.Cleanup(func() { lock.Close() })
	root := testutil.ModuleRoot()
	l := &testLab{
		t:      t,
		script: filepath.Join(root, "scripts", "netlab.sh"),
		dir:    "/tmp/ringchat-netlab-rctest",
		subnet: "198.18.200",

		registered: map[string]bool{},
	}
	l.env = append(os.Environ(), "NETLAB_NAME=rctest", "NETLAB_SUBNET="+l.subnet, "NETLAB_DIR="+l.dir,
		fmt.Sprintf("NETLAB_HOSTS=%d", labHosts))
	// A lab left by a killed run goes first.
	l.netlab("down")
	t.Cleanup(func() {
		out, err := l.run("down")
		if err != nil {
			t.Errorf("netlab.sh down: %v\n%s", err, out)
		}
		l.checkGone()
		if out, err := l.run("status"); err == nil || !strings.Contains(out, "missing") {
			t.Errorf("netlab.sh status after down: %v\n%s", err, out)
		}
	})
	if out, err := l.run("up"); err != nil {
		t.Fatalf("netlab.sh up: %v\n%s", err, out)
	}
	// up again changes nothing: the same sshd on every host; status
	// says all is there.
	before := l.netlab("status")
	l.netlab("up")
	if after := l.netlab("status"); after != before || strings.Count(after, " sshd ") != labHosts {
		t.Fatalf("netlab.sh status before and after a second up:\n%s\n%s", before, after)
	}
	return l
}

func lookPath(name string, also ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range also {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func (l *testLab) run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{l.script}, args...)...)
	cmd.Env = l.env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (l *testLab) netlab(args ...string) string {
	l.t.Helper()
	out, err := l.run(args...)
	if err != nil {
		l.t.Fatalf("netlab.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// checkGone: nothing of the lab is left on the machine.
func (l *testLab) checkGone() {
	ns, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, s := range []string{string(ns), string(links)} {
		if strings.Contains(s, "rctest") {
			l.t.Errorf("netlab.sh down left behind:\n%s", s)
		}
	}
	if _, err := os.Stat(l.dir); err == nil {
		l.t.Errorf("netlab.sh down left %s", l.dir)
	}
	if out, _ := exec.Command("pgrep", "-af", l.dir).Output(); len(bytes.TrimSpace(out)) > 0 {
		l.t.Errorf("netlab.sh down left processes:\n%s", out)
	}
}

func (l *testLab) host(i int) string { return fmt.Sprintf("%s.%d", l.subnet, i) }

func (l *testLab) clientAddr(i int) string { return l.host(i) + ":8001" }

// lab runs scripts/lab.sh with the lab's node list, ssh config and store.
func (l *testLab) lab(key string, args ...string) string {
	l.t.Helper()
	all := []string{filepath.Join(testutil.ModuleRoot(), "scripts", "lab.sh"),
		"--nodes", filepath.Join(l.dir, "nodes.csv"), "--ssh-opts", "-F " + filepath.Join(l.dir, "ssh_config"),
		"--db-file", filepath.Join(l.dir, "db.dsn"), "--cluster-key-file", key}
	cmd := exec.Command("bash", append(all, args...)...)
	cmd.Env = cleanLabEnv()
	cmd.Dir = l.t.TempDir()
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		l.t.Fatalf("lab.sh %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func cleanLabEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "LAB_") && !strings.HasPrefix(name, "RINGNODE_") && name != "RINGCHAT_DB" {
			env = append(env, kv)
		}
	}
	return env
}

// ringStatus is "ringnode status --json" run here against the lab's store.
func (l *testLab) ringStatus() (status.Report, error) {
	var r status.Report
	cmd := exec.Command(ringnodeBin, "status", "--json", "--nodes", filepath.Join(l.dir, "nodes.csv"),
		"--db-file", filepath.Join(l.dir, "db.dsn"), "--log-level", "error")
	out, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("ringnode status: %v: %s", err, out)
	}
	return r, json.Unmarshal(out, &r)
}

// healthy: the store's ring is all 5 nodes and each answers.
func healthy(r status.Report) bool {
	if len(r.Ring) != labHosts || len(r.RingProblems) > 0 {
		return false
	}
	for _, n := range r.Nodes {
		if !n.InRing || n.Answers == nil || !*n.Answers {
			return false
		}
	}
	return true
}

// labRunning parses lab.sh status: node id -> pid of those running.
func labRunning(t *testing.T, out string) map[int64]int {
	t.Helper()
	running := map[int64]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("lab.sh status line %q", line)
		}
		id, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("lab.sh status line %q", line)
		}
		if f[2] == "running" && len(f) == 4 {
			pid, _ := strconv.Atoi(f[3])
			running[id] = pid
		}
	}
	return running
}

// session logs user in at lab host i, failing over to the others; a new
// user registers at another host first.
func (l *testLab) session(t *testing.T, i int, user string) *client.Session {
	t.Helper()
	addrs := []string{l.clientAddr(i)}
	for j := 1; j <= labHosts; j++ {
		if j != i {
			addrs = append(addrs, l.clientAddr(j))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if !l.registered[user] {
		// --auth password: an account first, at the host before i.
		c, err := client.Dial(ctx, l.clientAddr(i%labHosts+1), client.Options{Timeout: within})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Register(ctx, user, "pw-"+user)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		l.registered[user] = true
	}
	s, err := client.StartSession(ctx, client.SessionConfig{Addrs: addrs, User: user, Password: "pw-" + user,
		Options: client.Options{Timeout: within}})
	if err != nil {
		t.Fatalf("%s at %s: %v", user, addrs[0], err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (l *testLab) nodeOf(t *testing.T, s *client.Session) int64 {
	t.Helper()
	_, node, _ := s.Where()
	return node
}

// TestLabOverSSH deploys a 5-host ring with lab.sh over a real sshd, chats
// across hosts (direct, group, offline delivery), checks that lab.sh status
// and ringnode status agree, restarts every host in turn with a new binary
// while two conversations go on (nothing lost, nothing doubled, FIFO), and
// stops the ring with lab.sh down.
func TestLabOverSSH(t *testing.T) {
	l := newTestLab(t)
	key := filepath.Join(t.TempDir(), "cluster.key")

	up := l.lab(key, "--copy-bin", ringnodeBin, "up")
	if n := strings.Count(up, " started "); n != labHosts {
		t.Fatalf("lab.sh up started %d nodes, want %d:\n%s", n, labHosts, up)
	}
	var rep status.Report
	testutil.Eventually(t, 2*within, "a ring of the 5 lab hosts, every node answering", func() bool {
		r, err := l.ringStatus()
		rep = r
		return err == nil && healthy(r)
	})
	t.Logf("ring %v, coordinator %v", rep.Ring, rep.Coordinator.Node)
	for _, n := range rep.Nodes {
		if n.Host != l.host(int(n.ID)) {
			t.Errorf("node %d on %s, want %s", n.ID, n.Host, l.host(int(n.ID)))
		}
	}

	// lab.sh status and ringnode status agree: every node runs, in its
	// host's network, and answers.
	running := labRunning(t, l.lab(key, "status"))
	if len(running) != labHosts {
		t.Fatalf("lab.sh status: %d running, want %d", len(running), labHosts)
	}
	for id, pid := range running {
		ns, err := exec.Command("ip", "netns", "identify", strconv.Itoa(pid)).Output()
		if want := fmt.Sprintf("rctest%d", id); err != nil || strings.TrimSpace(string(ns)) != want {
			t.Errorf("node %d (pid %d) runs in netns %q (%v), want %s", id, pid, bytes.TrimSpace(ns), err, want)
		}
	}

	// The off-loopback defaults: a login without a password is refused.
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if c, err := client.DialV2(ctx, []string{l.clientAddr(2)}, "nopass", "", client.Options{Timeout: within}); err == nil {
		c.Close()
		t.Errorf("a login without a password was let in on a lab host")
	}

	chatAcrossHosts(t, l)
	rollingRestart(t, l, key)

	down := l.lab(key, "down")
	if n := strings.Count(down, " stopped "); n != labHosts {
		t.Errorf("lab.sh down stopped %d nodes, want %d:\n%s", n, labHosts, down)
	}
	testutil.Eventually(t, within, "lab.sh status: every node stopped; ringnode status: none answers", func() bool {
		if len(labRunning(t, l.lab(key, "status"))) != 0 {
			return false
		}
		r, err := l.ringStatus()
		return err == nil && !slices.ContainsFunc(r.Nodes, func(n status.NodeReport) bool { return n.Answers == nil || *n.Answers })
	})
}

// chatAcrossHosts: users on different hosts chat directly and in a group,
// and a message to a user offline waits for them at another host.
func chatAcrossHosts(t *testing.T, l *testLab) {
	alice := l.session(t, 1, "alice")
	bob := l.session(t, 3, "bob")
	carol := l.session(t, 5, "carol")
	if a, b, c := l.nodeOf(t, alice), l.nodeOf(t, bob), l.nodeOf(t, carol); a != 1 || b != 3 || c != 5 {
		t.Fatalf("logged in at nodes %d, %d, %d, want 1, 3, 5", a, b, c)
	}
	if _, err := alice.Post(client.ToUser("bob"), "hello from host 1"); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, bob, "hello from host 1"); m.From != "alice" {
		t.Errorf("bob got %+v", m)
	}

	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, s := range []*client.Session{alice, bob, carol} {
		if err := s.Join(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := carol.Post(client.ToGroup("lab"), "to the group from host 5"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*client.Session{alice, bob} {
		if m := receive(t, s, "to the group from host 5"); m.From != "carol" || !m.To.Group {
			t.Errorf("%s got %+v", s.User(), m)
		}
	}

	// dave claims his name at host 2 and leaves; alice writes to him; he
	// logs in at host 4 and has it.
	dave := l.session(t, 2, "dave")
	dave.Close()
	if _, err := alice.Post(client.ToUser("dave"), "while you were away"); err != nil {
		t.Fatal(err)
	}
	waitStored(t, alice)
	dave = l.session(t, 4, "dave")
	if m := receive(t, dave, "while you were away"); m.From != "alice" {
		t.Errorf("dave got %+v", m)
	}
	if n := l.nodeOf(t, dave); n != 4 {
		t.Errorf("dave at node %d, want 4", n)
	}
}

// waitStored waits until s has no message waiting for its receipt.
func waitStored(t *testing.T, s *client.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("%s: messages not stored: %v", s.User(), err)
	}
}

// stream is one conversation during the rolling restart: its sender posts
// numbered messages, its receivers record each arrival.
type stream struct {
	mu       sync.Mutex
	prefix   string
	posted   int
	arrivals map[string][]int         // receiver -> message numbers, in arrival order
	at       map[string][]time.Time   // receiver -> arrival times
	sentAt   map[int]time.Time        // message number -> posted
	late     map[string]time.Duration // receiver -> longest post-to-arrival
}

func newStream(prefix string) *stream {
	return &stream{prefix: prefix, arrivals: map[string][]int{}, at: map[string][]time.Time{},
		sentAt: map[int]time.Time{}, late: map[string]time.Duration{}}
}

func (st *stream) post(t *testing.T, s *client.Session, to client.Recipient) {
	st.mu.Lock()
	n := st.posted
	st.posted++
	st.sentAt[n] = time.Now()
	st.mu.Unlock()
	if _, err := s.Post(to, fmt.Sprintf("%s %d", st.prefix, n)); err != nil {
		t.Errorf("post %s %d: %v", st.prefix, n, err)
	}
}

func (st *stream) count(user string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.arrivals[user])
}

func (st *stream) total() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.posted
}

// receive records the stream's messages s shows until done is closed.
func (st *stream) receive(s *client.Session, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case ev, ok := <-s.Events():
			if !ok {
				return
			}
			m, isChat := ev.(client.ChatMessage)
			if !isChat {
				continue
			}
			num, found := strings.CutPrefix(m.Content, st.prefix+" ")
			if !found {
				continue
			}
			n, err := strconv.Atoi(num)
			if err != nil {
				continue
			}
			now := time.Now()
			st.mu.Lock()
			st.arrivals[s.User()] = append(st.arrivals[s.User()], n)
			st.at[s.User()] = append(st.at[s.User()], now)
			st.late[s.User()] = max(st.late[s.User()], now.Sub(st.sentAt[n]))
			st.mu.Unlock()
		}
	}
}

// check: every posted message arrived at user once, in the order posted;
// it returns the longest time without an arrival between from and to.
func (st *stream) check(t *testing.T, user string, from, to time.Time) time.Duration {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	got := st.arrivals[user]
	seen := map[int]int{}
	for _, n := range got {
		seen[n]++
	}
	var lost, doubled []int
	for n := range st.posted {
		switch seen[n] {
		case 0:
			lost = append(lost, n)
		case 1:
		default:
			doubled = append(doubled, n)
		}
	}
	if len(lost) > 0 || len(doubled) > 0 {
		t.Errorf("%s at %s: %d posted, lost %v, doubled %v", st.prefix, user, st.posted, lost, doubled)
	}
	if !slices.IsSorted(got) {
		t.Errorf("%s at %s: out of order: %v", st.prefix, user, got)
	}
	last, gap := from, time.Duration(0)
	for _, a := range st.at[user] {
		if a.Before(from) || a.After(to) {
			continue
		}
		gap = max(gap, a.Sub(last))
		last = a
	}
	return gap
}

// rollingRestart: lab.sh restart with a new binary while alice writes to
// bob and bob to the group: nothing lost, nothing doubled, in order; the
// longest pause is reported.
func rollingRestart(t *testing.T, l *testLab, key string) {
	newBin := filepath.Join(t.TempDir(), "ringnode")
	build := exec.Command("go", "build", "-o", newBin, "-ldflags",
		"-X github.com/ringchat/ringchat/internal/buildinfo.Version=lab-restart", "./cmd/ringnode")
	build.Dir = testutil.ModuleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the new binary: %v\n%s", err, out)
	}
	newExe, err := os.ReadFile(newBin)
	if err != nil {
		t.Fatal(err)
	}

	alice := l.session(t, 1, "alice2")
	bob := l.session(t, 4, "bob2")
	carol := l.session(t, 2, "carol2")
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, s := range []*client.Session{bob, alice, carol} {
		if err := s.Join(ctx, "restart"); err != nil {
			t.Fatal(err)
		}
	}
	direct, group := newStream("direct"), newStream("group")
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { direct.receive(bob, done) })
	wg.Go(func() { group.receive(alice, done) })
	wg.Go(func() { group.receive(carol, done) })
	defer func() { close(done); wg.Wait() }()

	stopPosting := make(chan struct{})
	posting := make(chan struct{})
	go func() {
		defer close(posting)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopPosting:
				return
			case <-tick.C:
				direct.post(t, alice, client.ToUser("bob2"))
				group.post(t, bob, client.ToGroup("restart"))
			}
		}
	}()
	testutil.Eventually(t, within, "chat flowing before the restart", func() bool { return direct.count("bob2") >= 20 })

	began := time.Now()
	out := l.lab(key, "--copy-bin", newBin, "restart")
	ended := time.Now()
	t.Logf("lab.sh restart (%v):\n%s", ended.Sub(began).Round(time.Millisecond), out)
	if n := strings.Count(out, " restarted "); n != labHosts {
		t.Errorf("lab.sh restart restarted %d nodes, want %d", n, labHosts)
	}
	// A few more seconds of chat on the new ring, then every message is owed.
	after := direct.total()
	testutil.Eventually(t, within, "chat flowing after the restart", func() bool { return direct.count("bob2") >= after+20 })
	close(stopPosting)
	<-posting
	for _, s := range []*client.Session{alice, bob} {
		waitStored(t, s)
	}
	testutil.Eventually(t, within, "every message delivered", func() bool {
		return direct.count("bob2") >= direct.total() && group.count("alice2") >= group.total() && group.count("carol2") >= group.total()
	})
	gaps := map[string]time.Duration{
		"direct at bob2":  direct.check(t, "bob2", began, ended),
		"group at alice2": group.check(t, "alice2", began, ended),
		"group at carol2": group.check(t, "carol2", began, ended),
	}
	t.Logf("rolling restart with %d direct and %d group messages (every 50 ms each): longest time without an arrival %v (direct at bob2), %v and %v (group at alice2, carol2); longest post-to-arrival %v, %v, %v",
		direct.total(), group.total(), gaps["direct at bob2"].Round(time.Millisecond), gaps["group at alice2"].Round(time.Millisecond),
		gaps["group at carol2"].Round(time.Millisecond), direct.late["bob2"].Round(time.Millisecond),
		group.late["alice2"].Round(time.Millisecond), group.late["carol2"].Round(time.Millisecond))

	// Every node now runs the new binary, and the ring holds all five.
	running := labRunning(t, l.lab(key, "status"))
	for id, pid := range running {
		exe, err := os.ReadFile(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || !bytes.Equal(exe, newExe) {
			t.Errorf("node %d (pid %d) does not run the new binary (%v)", id, pid, err)
		}
	}
	if len(running) != labHosts {
		t.Errorf("after the restart %d nodes run, want %d", len(running), labHosts)
	}
	testutil.Eventually(t, within, "the ring of 5 after the restart", func() bool {
		r, err := l.ringStatus()
		return err == nil && healthy(r)
	})
}
