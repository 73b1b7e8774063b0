package chaos

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringchat/ringchat/internal/client"
)

func series(n int, rss func(i int) int64, gor func(i int) int64) []sample {
	t0 := time.Unix(1_700_000_000, 0)
	out := make([]sample, n)
	for i := range out {
		out[i] = sample{At: t0.Add(time.Duration(i) * 2 * time.Second), RSSKiB: rss(i), Threads: 10, Goroutines: gor(i)}
	}
	return out
}

func TestJudgeStability(t *testing.T) {
	flat := series(60, func(int) int64 { return 20 << 10 }, func(int) int64 { return 30 })
	if v := judge(1, 1, flat, 20); !v.Judged || !v.OK || !v.GoroutinesExact {
		t.Errorf("flat series: %+v", v)
	}
	// RSS growing without bound: 20 MiB to about 140 MiB.
	leak := series(60, func(i int) int64 { return int64(20+2*i) << 10 }, func(int) int64 { return 30 })
	if v := judge(1, 1, leak, 20); v.OK || !strings.Contains(v.Why, "RSS") {
		t.Errorf("leaking memory judged %+v", v)
	}
	// A goroutine leak of ten per sample.
	gleak := series(60, func(int) int64 { return 20 << 10 }, func(i int) int64 { return int64(30 + 10*i) })
	if v := judge(1, 1, gleak, 20); v.OK || !strings.Contains(v.Why, "goroutines") {
		t.Errorf("leaking goroutines judged %+v", v)
	}
	// Warm-up growth is forgiven: a fast start, then flat.
	warm := series(60, func(i int) int64 { return int64(min(20+4*i, 40)) << 10 }, func(int) int64 { return 30 })
	if v := judge(1, 1, warm, 20); !v.OK {
		t.Errorf("warm-up judged %+v", v)
	}
	// Too short: not judged, not failed.
	if v := judge(1, 1, flat[:5], 20); v.Judged || !v.OK {
		t.Errorf("short series: %+v", v)
	}
	// Samples without pprof (a scrape failed) are left out of the
	// goroutine figures rather than mixed with thread counts.
	mixed := slices.Clone(flat)
	mixed[len(mixed)-1].Goroutines = -1
	if v := judge(1, 1, mixed, 20); !v.OK || !v.GoroutinesExact || v.GorLast != 30 {
		t.Errorf("mixed series: %+v", v)
	}
}

func TestParseNodeLog(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"info","node":2,"value":7,"gen":1,"seq":3,"message":"mutex probe increment"}`,
		`{"level":"info","node":2,"value":8,"gen":1,"seq":4,"message":"mutex probe increment"}`,
		`{"level":"info","node":2,"peer":0,"epoch":5,"message":"coordinator"}`,
		`{"level":"warn","node":2,"component":"transport","reason":"bad_mac","via":"udp","from":"127.0.0.1:1","suppressed":0,"message":"dropped input"}`,
		`{"level":"warn","node":2,"component":"transport","reason":"bad_mac","via":"inbound","from":"127.0.0.1:1","suppressed":4,"message":"dropped input"}`,
		`{"level":"warn","node":2,"from":1001,"message":"dropped a frame"}`,
		`{"level":"info","node":2,"remote":"127.0.0.1:9","refused":400,"message":"chat: closing a flooding client"}`,
		`not json at all`,
		`panic: runtime error: index out of range [3] with length 3`,
		`WARNING: DATA RACE`,
	}, "\n")
	path := filepath.Join(t.TempDir(), "node.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := parseNodeLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.ProbeValues, []int64{7, 8}) || !slices.Equal(l.Coordinator, []int64{5}) {
		t.Errorf("probe %v coordinator %v", l.ProbeValues, l.Coordinator)
	}
	if l.Drops["bad_mac"] != 6 || l.DropLines["udp:bad_mac"] != 1 || l.DropLines["inbound:bad_mac"] != 1 {
		t.Errorf("drops %v lines %v", l.Drops, l.DropLines)
	}
	if l.FramesBad != 1 || l.FloodClosed != 1 || len(l.Panics) != 2 {
		t.Errorf("frames bad %d, flood closed %d, panics %v", l.FramesBad, l.FloodClosed, l.Panics)
	}
}

func TestParseKinds(t *testing.T) {
	ks, err := ParseKinds("all,-net-delay")
	if err != nil || slices.Contains(ks, NetDelay) || len(ks) != len(AllKinds)-1 {
		t.Errorf("all,-net-delay: %v %v", ks, err)
	}
	ks, err = ParseKinds("sigstop, kill9-node,sigstop")
	if err != nil || !slices.Equal(ks, []Kind{StopCont, KillNode}) {
		t.Errorf("a list: %v %v", ks, err)
	}
	if _, err := ParseKinds("kill9-everything"); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.Ringnode = "/bin/true"
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"two nodes":    func(c *Config) { c.Nodes = 2 },
		"no rate":      func(c *Config) { c.Rate = 0 },
		"no binary":    func(c *Config) { c.Ringnode = "" },
		"bad method":   func(c *Config) { c.Election = "raft" },
		"bad range":    func(c *Config) { c.Gap = [2]time.Duration{time.Second, 0} },
		"unknown kind": func(c *Config) { c.Faults = []Kind{"meteor"} },
		"move style":   func(c *Config) { c.MoveStyle = "teleport" },
	} {
		c := DefaultConfig()
		c.Ringnode = "/bin/true"
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The tap sees every CHAT_MESSAGE line, even split across reads, and
// nothing else.
func TestTapConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	var ids []string
	tap := &tapConn{Conn: b, on: func(id string) { ids = append(ids, id) }}
	stream := `{"messageType":"STORED","id":"s1","seq":1}` + "\n" +
		`{"messageType":"CHAT_MESSAGE","id":"m1","messageContent":"x"}` + "\n" +
		`{"messageType":"HISTORY","messages":[{"messageType":"CHAT_MESSAGE","id":"h1"}]}` + "\n" +
		`{"messageType":"CHAT_MESSAGE","id":"m2","messageContent":"y"}` + "\n"
	go func() {
		for i := 0; i < len(stream); i += 7 {
			_, _ = a.Write([]byte(stream[i:min(i+7, len(stream))]))
		}
		a.Close()
	}()
	buf := make([]byte, 5)
	for {
		if _, err := tap.Read(buf); err != nil {
			break
		}
	}
	if !slices.Equal(ids, []string{"m1", "m2"}) {
		t.Errorf("tap saw %v, want [m1 m2]", ids)
	}
}

func TestReplayCommand(t *testing.T) {
	c := DefaultConfig()
	c.Seed, c.Duration = 42, time.Minute
	if got := Replay(c); got != "make chaos SEED=42 DURATION=1m0s NODES=5 CLIENTS=20" {
		t.Errorf("replay %q", got)
	}
	c.Faults = []Kind{KillNode, StopCont}
	if got := Replay(c); !strings.Contains(got, "--faults kill9-node,sigstop") {
		t.Errorf("replay %q does not name the faults", got)
	}
}

// A gentle client move half-closes the socket through the tap: the node
// reads the end of the stream and can still write.
func TestTapConnHalfCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		b := make([]byte, 16)
		if _, err := c.Read(b); err == nil {
			got <- errors.New("read data, want the end of the stream")
			return
		}
		_, err = c.Write([]byte("still here\n"))
		got <- err
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tap := &tapConn{Conn: nc, on: func(string) {}}
	defer tap.Close()
	c := client.NewConn(tap, client.Options{KeepAlive: -1})
	defer c.Close()
	if err := c.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite through the tap: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
