package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDSNWithSeveralServers(t *testing.T) {
	for _, c := range []struct {
		dsn   string
		hosts []string
		str   string
	}{
		{"mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/ringchat",
			[]string{"127.0.0.1:3311", "127.0.0.1:3312", "127.0.0.1:3313"},
			"mysql://root@127.0.0.1:3311,127.0.0.1:3312,127.0.0.1:3313/ringchat"},
		{"mysql://u:secret@db1,db2:3307,[::1]:3308/chat?tls=false",
			[]string{"db1:3306", "db2:3307", "[::1]:3308"},
			"mysql://u:xxxxx@db1:3306,db2:3307,[::1]:3308/chat"},
		{"u:secret@tcp(db1:3306,db2:3306)/chat",
			[]string{"db1:3306", "db2:3306"},
			"mysql://u:xxxxx@db1:3306,db2:3306/chat"},
		{"mysql://root@127.0.0.1:3306/ringchat", []string{"127.0.0.1:3306"}, "mysql://root@127.0.0.1:3306/ringchat"},
	} {
		d, err := ParseDSN(c.dsn)
		if err != nil {
			t.Errorf("%s: %v", c.dsn, err)
			continue
		}
		if !slices.Equal(d.Hosts, c.hosts) || d.MySQL.Addr != c.hosts[0] {
			t.Errorf("%s: hosts %v (addr %s), want %v", c.dsn, d.Hosts, d.MySQL.Addr, c.hosts)
		}
		if d.String() != c.str {
			t.Errorf("%s: String %q, want %q", c.dsn, d.String(), c.str)
		}
		// Another server to try: one that does not answer is passed by
		// within a second.
		want := 5 * time.Second
		if len(c.hosts) > 1 {
			want = time.Second
		}
		if d.MySQL.Timeout != want {
			t.Errorf("%s: connect timeout %v, want %v", c.dsn, d.MySQL.Timeout, want)
		}
	}
	d, err := ParseDSN("mysql://root@a:1,b:2/db?timeout=3s")
	if err != nil || d.MySQL.Timeout != 3*time.Second {
		t.Errorf("a timeout given: %v, %v", d.MySQL.Timeout, err)
	}
	for _, bad := range []string{
		"mysql://root@a:3306,,b:3306/db",
		"mysql://root@a:3306,a:3306/db",
		"mysql://root@a:3306,b:99999/db",
		"u@tcp(a:3306,)/db",
	} {
		if _, err := ParseDSN(bad); !errors.Is(err, ErrBadDSN) {
			t.Errorf("%s: %v, want ErrBadDSN", bad, err)
		}
	}
}

func TestRotateHosts(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		k    int
		want string
	}{
		{"mysql://u:pw@a:1,b:2,c:3/db?tls=false", 1, "mysql://u:pw@b:2,c:3,a:1/db?tls=false"},
		{"mysql://u:pw@a:1,b:2,c:3/db", 5, "mysql://u:pw@c:3,a:1,b:2/db"},
		{"u:pw@tcp(a:1,b:2)/db?timeout=2s", 1, "u:pw@tcp(b:2,a:1)/db?timeout=2s"},
		{"mysql://u@a:1/db", 1, "mysql://u@a:1/db"},
		{"sqlite:x.db", 1, "sqlite:x.db"},
	} {
		if got := RotateHosts(c.dsn, c.k); got != c.want {
			t.Errorf("RotateHosts(%q, %d) = %q, want %q", c.dsn, c.k, got, c.want)
		}
	}
}
