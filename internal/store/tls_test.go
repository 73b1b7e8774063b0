package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/ringchat/ringchat/internal/store"
	"github.com/ringchat/ringchat/internal/testutil"
)

// A DSN names a TLS configuration registered from a CA file; an unknown
// name is a clear error.
func TestMariaDBTLSConfig(t *testing.T) {
	certs := testutil.NewCerts(t)
	if err := store.RegisterTLSCA("test-ca", certs.CAFile); err != nil {
		t.Fatal(err)
	}
	d, err := store.ParseDSN("mysql://ring:secret@db.example:3306/ringchat?tls=test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if d.MySQL.TLS == nil || d.MySQL.TLS.RootCAs == nil || !d.MySQL.TLS.RootCAs.Equal(certs.Pool) {
		t.Fatalf("tls=test-ca gave %+v, want the CA's pool", d.MySQL.TLS)
	}
	if d.MySQL.TLS.ServerName != "db.example" || d.MySQL.TLS.InsecureSkipVerify {
		t.Errorf("server name %q, skip verify %v: the server's certificate must be checked against the DSN's host",
			d.MySQL.TLS.ServerName, d.MySQL.TLS.InsecureSkipVerify)
	}
	if got := d.String(); got != "mysql://ring:xxxxx@db.example:3306/ringchat?tls=test-ca" {
		t.Errorf("String() = %q", got)
	}

	_, err = store.ParseDSN("ring@tcp(db.example:3306)/ringchat?tls=nosuch")
	if err == nil || !strings.Contains(err.Error(), "--db-ca") {
		t.Errorf("unknown tls name: %v, want a hint at --db-ca", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.RegisterTLSCA("junk", junk); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("RegisterTLSCA(junk) = %v", err)
	}
}

// tls=true is honoured: against a server without TLS the connection fails
// instead of falling back to plain text.
func TestMariaDBTLSRequired(t *testing.T) {
	dsn := testutil.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plain, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var haveSSL string
	if err := plain.QueryRowContext(ctx, "SELECT @@have_ssl").Scan(&haveSSL); err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig = "true"
	st, err := store.Open(ctx, cfg.FormatDSN(), store.Options{})
	if haveSSL == "YES" {
		t.Skipf("this MariaDB server has TLS on (have_ssl %s): nothing to refuse", haveSSL)
	}
	if err == nil {
		st.Close()
		t.Fatal("tls=true connected to a server without TLS")
	}
	if !strings.Contains(err.Error(), "TLS") {
		t.Errorf("error %q does not say TLS", err)
	}
}
