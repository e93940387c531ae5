package job

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"

	"github.com/stackwright/stackwright/internal/tlscert"
)

// loadOrCreateCert returns the runner API's serving certificate, kept in dir so that it
// survives manager restarts: runners started by an earlier manager pin it. Runners do not
// check names (they reach the manager by a Service's cluster IP); they accept exactly this
// certificate, which they get through their work Secret.
func loadOrCreateCert(dir string) (tls.Certificate, []byte, error) {
	return tlscert.LoadOrCreate(dir, "runner-api", []string{"stackwright-runner-api"}, nil)
}

// pinnedTLS is the runner's client configuration: it trusts exactly the certificate the
// manager put in its work Secret.
func pinnedTLS(certPEM []byte) (*tls.Config, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("failed to read manager certificate: no PEM block")
	}
	want := block.Bytes
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Names are not checked: the certificate itself is pinned below.
		InsecureSkipVerify: true, //nolint:gosec // replaced by the exact-certificate check
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || string(raw[0]) != string(want) {
				return errors.New("manager certificate does not match the pinned one")
			}
			return nil
		},
	}, nil
}
