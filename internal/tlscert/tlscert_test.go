package tlscert

import (
	"bytes"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func TestLoadOrCreate_KeepsOrRenews(t *testing.T) {
	dir := t.TempDir()
	_, first, err := LoadOrCreate(dir, "hook", []string{"hook.ns.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, again, err := LoadOrCreate(dir, "hook", []string{"hook.ns.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("a second load made a new certificate for the same names")
	}
	// Trusted by itself, as a caBundle trusts it, for the name it was made for.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(first)
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "hook.ns.svc", CurrentTime: time.Now()}); err != nil {
		t.Errorf("the certificate does not verify against itself: %v", err)
	}
	_, renewed, err := LoadOrCreate(dir, "hook", []string{"hook.other.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, renewed) {
		t.Fatal("new names kept the old certificate")
	}
	cert, _, err = LoadOrCreate(dir, "hook", []string{"hook.other.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "hook.other.svc"}); err == nil {
		t.Error("the renewed certificate verifies against the old one")
	}
}
