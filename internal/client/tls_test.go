package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

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

// TestDialV2StopsWhenNoCertificateVerifies: a certificate that does not
// verify on every node in a row ends DialV2 at once with the TLS error
// (waiting cannot help), well before its context's deadline, which would
// otherwise end it with whatever attempt was under way.
func TestDialV2StopsWhenNoCertificateVerifies(t *testing.T) {
	certs := testutil.NewCerts(t)
	addrs := []string{tlsEcho(t, certs.Cert), tlsEcho(t, certs.Cert)}
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	_, err := DialV2(ctx, addrs, "carol", "", Options{TLS: &tls.Config{RootCAs: x509.NewCertPool()}, KeepAlive: -1})
	var ue x509.UnknownAuthorityError
	if !errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("DialV2 with no node's certificate verifying: %v (context: %v), want the unknown-authority error at once", err, ctx.Err())
	}
}

// TestDialV2PassesAnUntrustedNode: a node whose certificate does not
// verify is passed over for the next one, whose certificate does.
func TestDialV2PassesAnUntrustedNode(t *testing.T) {
	good, bad := testutil.NewCerts(t), testutil.NewCerts(t)
	addrs := []string{tlsEcho(t, bad.Cert), tlsEcho(t, good.Cert)}
	ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
	defer cancel()
	c, err := DialV2(ctx, addrs, "carol", "", Options{TLS: &tls.Config{RootCAs: good.Pool}, KeepAlive: -1})
	if err == nil {
		c.Close()
		return
	}
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		t.Fatalf("DialV2 stopped at the untrusted node: %v", err)
	}
}
