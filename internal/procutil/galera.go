package procutil

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Galera is a local 3-server MariaDB Galera cluster run by
// scripts/galera.sh on ports of its own, with its data in Dir.
type Galera struct {
	// Script is the path of scripts/galera.sh.
	Script string
	// Dir holds the servers' data, sockets and logs (removed by Down).
	Dir string
	// Port is the first server's port (the others follow); GComm the
	// first of the group communication ports (IST at GComm+10, SST at
	// GComm+20).
	Port, GComm int
}

// GaleraServers is how many servers the cluster has.
const GaleraServers = 3

// GaleraMissing says what this machine lacks to run a Galera cluster
// ("" if nothing).
func GaleraMissing() string {
	for _, f := range []string{"/usr/sbin/mariadbd", "/usr/lib/galera/libgalera_smm.so"} {
		if _, err := os.Stat(f); err != nil {
			return f + " is missing (apt-get install mariadb-server galera-4)"
		}
	}
	for _, c := range []string{"rsync", "mariadb", "mariadb-install-db"} {
		if _, err := exec.LookPath(c); err != nil {
			return c + " is missing (apt-get install rsync mariadb-server)"
		}
	}
	return ""
}

// NewGalera picks free ports for a cluster under a new directory below
// the system's temporary one (readable by the mysql user the servers run
// as).
func NewGalera(script string) (*Galera, error) {
	dir, err := os.MkdirTemp("", "ringchat-galera-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	// Below the kernel's ephemeral range (32768-60999 here): a port from
	// inside it can be taken by any outgoing connection between the check
	// and the server's bind (seen: "Bind on TCP/IP port ... Address
	// already in use" while other tests ran).
	var last error
	for range 200 {
		port, gcomm := 20000+rand.IntN(12000), 10000+rand.IntN(9900)
		if last = portsFree(port, GaleraServers); last != nil {
			continue
		}
		if last = portsFree(gcomm, 23); last == nil {
			return &Galera{Script: script, Dir: dir, Port: port, GComm: gcomm}, nil
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("procutil: no free ports for a Galera cluster: %w", last)
}

// portsFree fails unless TCP ports from..from+n-1 are free on 127.0.0.1.
func portsFree(from, n int) error {
	for p := from; p < from+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return err
		}
		l.Close()
	}
	return nil
}

// run runs the script with args and returns its output.
func (g *Galera) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{g.Script}, args...)...)
	cmd.Env = append(os.Environ(), "GALERA_DIR="+g.Dir, "GALERA_PORT="+strconv.Itoa(g.Port),
		"GALERA_GCOMM_PORT="+strconv.Itoa(g.GComm))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("galera.sh %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Up starts the three servers (the first bootstraps the cluster).
func (g *Galera) Up(ctx context.Context) error { _, err := g.run(ctx, "up"); return err }

// Down stops every server and removes Dir.
func (g *Galera) Down(ctx context.Context) error { _, err := g.run(ctx, "down"); return err }

// Kill kill -9s server i (1-3), as a crash would.
func (g *Galera) Kill(ctx context.Context, i int) error {
	_, err := g.run(ctx, "kill", strconv.Itoa(i))
	return err
}

// Start starts server i again and waits until it is synced with the
// cluster (state transfer done).
func (g *Galera) Start(ctx context.Context, i int) error {
	_, err := g.run(ctx, "start", strconv.Itoa(i))
	return err
}

// Status is the script's one line per server.
func (g *Galera) Status(ctx context.Context) (string, error) { return g.run(ctx, "status") }

// Host is server i's address (1-3).
func (g *Galera) Host(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(g.Port+i-1)) }

// DSN is a ringnode --db value naming the three servers, server first
// first and the others after it in order: nodes given different first
// servers spread over the cluster.
func (g *Galera) DSN(db string, first int) string {
	var hosts []string
	for k := range GaleraServers {
		hosts = append(hosts, g.Host((first-1+k)%GaleraServers+1))
	}
	return "mysql://root@" + strings.Join(hosts, ",") + "/" + db
}
