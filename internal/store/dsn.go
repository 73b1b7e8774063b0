package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultDSN is the zero-setup store: an SQLite file under .ringchat/ in the
// working directory, shared by every node started from that directory.
const DefaultDSN = "sqlite:.ringchat/ringchat.db"

// sessionGuards are MariaDB session settings that keep one stuck process
// from stopping the ring. A node stopped (SIGSTOP) or starved in the middle
// of a critical section holds the token fence's row lock; the server aborts
// its transaction after a second of silence, and the others wait for a lock
// at most a few seconds. A live critical section issues its statements
// within milliseconds (it is bounded far below that).
//
// tx_isolation makes read committed the session's level once, when the
// connection opens (a waiter for the fence row lock sees what the previous
// holder committed); set per transaction instead, it would cost a round
// trip before every one.
var sessionGuards = map[string]string{
	"idle_write_transaction_timeout": "1",
	"innodb_lock_wait_timeout":       "5",
	"tx_isolation":                   "'READ-COMMITTED'",
}

// ErrBadDSN wraps every DSN parsing error.
var ErrBadDSN = errors.New("store: bad DSN")

// DSN is a parsed data source name.
type DSN struct {
	// Dialect is "mysql" or "sqlite".
	Dialect string
	// Path is the SQLite file (sqlite only).
	Path string
	// MySQL is the driver configuration (mysql only). Its Addr is the
	// first of Hosts.
	MySQL *mysql.Config
	// Hosts are the database servers' addresses (host:port) in the order
	// they are tried (mysql only): one server, or the servers of a Galera
	// cluster.
	Hosts []string
}

// String returns the DSN with any password masked, for logs and errors.
func (d DSN) String() string {
	switch d.Dialect {
	case "sqlite":
		return "sqlite:" + d.Path
	case "mysql":
		user := d.MySQL.User
		if d.MySQL.Passwd != "" {
			user += ":xxxxx"
		}
		if user != "" {
			user += "@"
		}
		hosts := strings.Join(d.Hosts, ",")
		if hosts == "" {
			hosts = d.MySQL.Addr
		}
		s := "mysql://" + user + hosts + "/" + d.MySQL.DBName
		if d.MySQL.TLSConfig != "" && d.MySQL.TLSConfig != "false" {
			s += "?tls=" + d.MySQL.TLSConfig
		}
		return s
	}
	return "(invalid dsn)"
}

// ParseDSN accepts
//
//	mysql://user:pass@host:port/db[?param=value...]
//	user:pass@tcp(host:port)/db[?param=value...]   (the driver's own form)
//	sqlite:PATH  (also sqlite://PATH and sqlite3:PATH)
//
// A MariaDB DSN may name several servers (a Galera cluster), separated by
// commas: mysql://user@h1:3306,h2:3306,h3:3306/db or
// user@tcp(h1:3306,h2:3306)/db. They are tried in that order. An empty
// string means DefaultDSN.
func ParseDSN(s string) (DSN, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = DefaultDSN
	}
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "sqlite://"):
		return parseSQLite(s[len("sqlite://"):])
	case strings.HasPrefix(lower, "sqlite3:"):
		return parseSQLite(s[len("sqlite3:"):])
	case strings.HasPrefix(lower, "sqlite:"):
		return parseSQLite(s[len("sqlite:"):])
	case strings.HasPrefix(lower, "mysql://"), strings.HasPrefix(lower, "mariadb://"):
		return parseMySQLURL(s)
	case strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") || strings.HasPrefix(s, "tcp(") || strings.HasPrefix(s, "unix("):
		return parseDriverDSN(s)
	}
	return DSN{}, fmt.Errorf("%w: %q is not mysql://user:pass@host:port/db, user:pass@tcp(host:port)/db or sqlite:PATH", ErrBadDSN, redact(s))
}

func parseSQLite(path string) (DSN, error) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		return DSN{}, fmt.Errorf("%w: sqlite DSN takes no parameters (got %q)", ErrBadDSN, path[i:])
	}
	if path == "" {
		return DSN{}, fmt.Errorf("%w: sqlite DSN needs a file path, as in sqlite:.ringchat/ringchat.db", ErrBadDSN)
	}
	if path == ":memory:" {
		return DSN{}, fmt.Errorf("%w: an in-memory SQLite store cannot be shared by nodes; give a file path", ErrBadDSN)
	}
	return DSN{Dialect: "sqlite", Path: filepath.Clean(path)}, nil
}

// parseDriverDSN parses the driver's form, with a list of servers in
// tcp(...) if there are several.
func parseDriverDSN(s string) (DSN, error) {
	s, hosts, err := firstHost(s)
	if err != nil {
		return DSN{}, err
	}
	cfg, err := mysql.ParseDSN(s)
	if err != nil {
		return DSN{}, fmt.Errorf("%w: %v", ErrBadDSN, tlsHint(err))
	}
	return finishMySQL(cfg, s, hosts)
}

// hostSpan returns where a MariaDB DSN's server list lies in its text:
// inside tcp(...) in the driver's form, between the user and the path in
// the URL form; ok is false if it names none.
func hostSpan(s string) (start, end int, ok bool) {
	if lower := strings.ToLower(s); strings.HasPrefix(lower, "mysql://") || strings.HasPrefix(lower, "mariadb://") {
		start, end = strings.Index(s, "://")+3, len(s)
		if i := strings.IndexAny(s[start:], "/?"); i >= 0 {
			end = start + i
		}
		start += strings.LastIndexByte(s[start:end], '@') + 1
		return start, end, true
	}
	i := strings.Index(s, "tcp(")
	if i < 0 {
		return 0, 0, false
	}
	j := strings.IndexByte(s[i:], ')')
	if j < 0 {
		return 0, 0, false
	}
	return i + len("tcp("), i + j, true
}

// firstHost returns a DSN naming several servers with only the first in
// its text (the driver and net/url take one), and the list; a DSN naming
// one comes back as it is, with no list.
func firstHost(s string) (string, []string, error) {
	start, end, ok := hostSpan(s)
	if !ok || !strings.Contains(s[start:end], ",") {
		return s, nil, nil
	}
	hosts, err := splitHosts(s[start:end], s)
	if err != nil {
		return "", nil, err
	}
	return s[:start] + hosts[0] + s[end:], hosts, nil
}

// splitHosts parses a comma-separated list of host[:port] (port 3306 if
// none; IPv6 hosts in brackets), as host:port addresses, no two alike.
func splitHosts(list, dsn string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, fmt.Errorf("%w: an empty server in the list %q of %s", ErrBadDSN, list, redact(dsn))
		}
		u, err := url.Parse("mysql://" + h)
		if err != nil || u.Hostname() == "" || u.User != nil || u.Path != "" {
			return nil, fmt.Errorf("%w: server %q in %s is not host:port", ErrBadDSN, h, redact(dsn))
		}
		port := u.Port()
		if port == "" {
			port = "3306"
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%w: port %q out of range 1-65535", ErrBadDSN, port)
		}
		addr := net.JoinHostPort(u.Hostname(), port)
		if slices.Contains(out, addr) {
			return nil, fmt.Errorf("%w: server %s named twice in %s", ErrBadDSN, addr, redact(dsn))
		}
		out = append(out, addr)
	}
	return out, nil
}

// RotateHosts returns dsn with its list of servers rotated to start at the
// k-th (mod their number), the rest in order after it: nodes of one ring
// given different k spread over a cluster's servers. A DSN naming one
// server (or not MariaDB) comes back as it is.
func RotateHosts(dsn string, k int) string {
	d, err := ParseDSN(dsn)
	start, end, ok := hostSpan(dsn)
	if err != nil || len(d.Hosts) < 2 || !ok {
		return dsn
	}
	n := len(d.Hosts)
	rot := append(slices.Clone(d.Hosts[k%n:]), d.Hosts[:k%n]...)
	return dsn[:start] + strings.Join(rot, ",") + dsn[end:]
}

func parseMySQLURL(s string) (DSN, error) {
	s, hosts, err := firstHost(s)
	if err != nil {
		return DSN{}, err
	}
	return parseMySQLURLOne(s, hosts)
}

func parseMySQLURLOne(s string, hosts []string) (DSN, error) {
	u, err := url.Parse(s)
	if err != nil {
		return DSN{}, fmt.Errorf("%w: %v", ErrBadDSN, redactErr(err, s))
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return DSN{}, fmt.Errorf("%w: %s has no host", ErrBadDSN, redact(s))
	}
	if port == "" {
		port = "3306"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return DSN{}, fmt.Errorf("%w: port %q out of range 1-65535", ErrBadDSN, port)
	}
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(host, port)
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if strings.Contains(cfg.DBName, "/") {
		return DSN{}, fmt.Errorf("%w: database name %q contains '/'", ErrBadDSN, cfg.DBName)
	}
	// Reuse the driver's parameter handling for the query string.
	if q := u.RawQuery; q != "" {
		// With the real address, so that a TLS configuration's server
		// name is the DSN's host, not the driver's default 127.0.0.1.
		extra, err := mysql.ParseDSN("tcp(" + cfg.Addr + ")/?" + q)
		if err != nil {
			return DSN{}, fmt.Errorf("%w: %v", ErrBadDSN, tlsHint(err))
		}
		extra.User, extra.Passwd, extra.Net, extra.Addr, extra.DBName = cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName
		cfg = extra
	}
	return finishMySQL(cfg, u.RawQuery, hosts)
}

// finishMySQL completes a parsed MySQL DSN with the store's defaults; raw
// is the text the parameters came from, hosts the servers if several.
func finishMySQL(cfg *mysql.Config, raw string, hosts []string) (DSN, error) {
	if cfg.DBName == "" {
		return DSN{}, fmt.Errorf("%w: mysql DSN needs a database name, as in mysql://root@127.0.0.1:3306/ringchat", ErrBadDSN)
	}
	switch {
	case cfg.Timeout != 0:
	case len(hosts) > 1:
		// With another server to try, one that does not answer is
		// passed by within a second.
		cfg.Timeout = time.Second
	default:
		cfg.Timeout = 5 * time.Second // an unreachable server fails fast, not after the OS default
	}
	if hosts == nil {
		hosts = []string{cfg.Addr}
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second // a hung server does not hang a node forever
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if !strings.Contains(raw, "interpolateParams=") {
		// A statement's arguments go in its text: one round trip a
		// statement, where a prepared statement takes two (and a third
		// message to close it). The driver refuses to interpolate for the
		// character sets where that would be unsafe.
		cfg.InterpolateParams = true
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	for k, v := range sessionGuards {
		if _, ok := cfg.Params[k]; !ok {
			cfg.Params[k] = v
		}
	}
	return DSN{Dialect: "mysql", MySQL: cfg, Hosts: hosts}, nil
}

// TLSCustom is the name RegisterTLSCA registers by default (ringnode
// --db-ca): a DSN selects it with tls=custom.
const TLSCustom = "custom"

// RegisterTLSCA registers, under name, a TLS configuration for MariaDB
// that trusts only the CA certificates in the PEM file caFile and checks
// that the server's certificate names the DSN's host. A DSN then selects
// it with the parameter tls=NAME. It must be called before ParseDSN of
// such a DSN (the driver looks the name up while parsing). The names
// true, false, skip-verify and preferred are the driver's own: tls=true
// verifies against the system's roots, skip-verify encrypts without
// verifying, preferred falls back to plain text (do not use either over
// an untrusted network).
func RegisterTLSCA(name, caFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("store: MariaDB CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("store: MariaDB CA %s: no PEM certificate in the file", caFile)
	}
	if err := mysql.RegisterTLSConfig(name, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}); err != nil {
		return fmt.Errorf("store: MariaDB TLS config %q: %w", name, err)
	}
	return nil
}

// tlsHint adds what to do to the driver's error for an unknown tls name.
func tlsHint(err error) error {
	if strings.Contains(err.Error(), "unknown config name") {
		return fmt.Errorf("%v (tls=true verifies against the system's roots; tls=%s needs --db-ca FILE)", err, TLSCustom)
	}
	return err
}

// redact masks the password in a DSN-looking string for error messages.
func redact(s string) string {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s
	}
	head := s[:at]
	start := 0
	if i := strings.Index(head, "://"); i >= 0 {
		start = i + 3
	}
	if c := strings.IndexByte(head[start:], ':'); c >= 0 {
		return head[:start+c+1] + "xxxxx" + s[at:]
	}
	return s
}

func redactErr(err error, s string) string {
	msg := err.Error()
	return strings.ReplaceAll(msg, s, redact(s))
}
