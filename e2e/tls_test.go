package e2e

import (
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/testutil"
)

// TestTLSClientPort: two nodes serve their client ports over TLS with a
// certificate made here; two ringchat processes with --tls --ca chat
// through them, and a ringchat without --tls is not let in.
func TestTLSClientPort(t *testing.T) {
	bin, err := testutil.Build("./cmd/ringchat", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certs := testutil.NewCerts(t)
	dsn := testutil.MySQLDSN(t)
	r := testutil.NewRing(t, ringnodeBin, dsn, 1, 2)
	r.Extra = []string{"--tls-cert", certs.CertFile, "--tls-key", certs.KeyFile}
	r.Start(1)
	openWhenMigrated(t, dsn)
	r.Start(2)
	c := &clientRing{r: r, bin: bin, cache: t.TempDir()}

	alice := c.start(t, "--node", c.addr(1), "--user", "alice", "--tls", "--ca", certs.CAFile)
	bob := c.start(t, "--node", c.addr(2), "--user", "bob", "--ca", certs.CAFile) // --ca implies --tls
	alice.waitOut("connected to node 1 (" + c.addr(1) + ") as alice")
	bob.waitOut("connected to node 2 (" + c.addr(2) + ") as bob")
	alice.send("/msg bob hello over TLS")
	bob.waitOut("alice -> you: hello over TLS")
	alice.waitOut("you -> bob: hello over TLS (stored)")
	bob.send("/msg alice and back")
	alice.waitOut("bob -> you: and back")

	// Plain TCP to a TLS port: no login.
	code, out, errOut := c.run(t, "send", "--node", c.addr(1), "--user", "carol", "--timeout", "3s", "--to", "bob", "plain")
	if code != 1 || strings.Contains(out, "stored") {
		t.Errorf("plain client against a TLS port: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// TLS without the CA (the system's roots do not know it): refused.
	code, _, errOut = c.run(t, "send", "--node", c.addr(1), "--user", "carol", "--tls", "--to", "bob", "unverified")
	if code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("TLS client without the CA: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := c.run(t, "send", "--node", c.addr(2), "--user", "carol", "--ca", certs.CAFile, "--to", "bob", "verified"); code != 0 {
		t.Errorf("TLS client with the CA: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bob.waitOut("carol -> you: verified")
}
