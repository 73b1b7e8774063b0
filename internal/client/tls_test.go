package client

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/ringchat/ringchat/internal/testutil"
)

// tlsEcho is a TLS server that answers every LOGIN line with its echo.
func tlsEcho(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				sc := bufio.NewScanner(nc)
				for sc.Scan() {
					if strings.Contains(sc.Text(), `"LOGIN"`) {
						_, _ = nc.Write(append(sc.Bytes(), '\n'))
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestDialTLS(t *testing.T) {
	certs := testutil.NewCerts(t)
	addr := tlsEcho(t, certs.Cert)
	ctx := testCtx(t)

	c, err := Dial(ctx, addr, Options{TLS: &tls.Config{RootCAs: certs.Pool}, KeepAlive: -1})
	if err != nil {
		t.Fatalf("Dial with the CA: %v", err)
	}
	defer c.Close()
	if err := c.Login(ctx, "alice"); err != nil {
		t.Fatalf("Login over TLS: %v", err)
	}

	// A server whose certificate the client does not trust is refused at
	// dialing, naming TLS.
	_, err = Dial(ctx, addr, Options{TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
	var ue x509.UnknownAuthorityError
	if err == nil || !strings.Contains(err.Error(), "TLS to "+addr) || !errors.As(err, &ue) {
		t.Errorf("Dial without the CA: %v, want an unknown-authority TLS error", err)
	}
}
