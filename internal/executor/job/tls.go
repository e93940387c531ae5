package job

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// loadOrCreateCert returns the runner API's serving certificate, kept in dir so that it
// survives manager restarts: runners started by an earlier manager pin it. Runners do not
// check names (they reach the manager by a Service's cluster IP); they accept exactly this
// certificate, which they get through their work Secret.
func loadOrCreateCert(dir string) (tls.Certificate, []byte, error) {
	certPath, keyPath := filepath.Join(dir, "runner-api.crt"), filepath.Join(dir, "runner-api.key")
	certPEM, err := os.ReadFile(certPath)
	if err == nil {
		keyPEM, kerr := os.ReadFile(keyPath)
		if kerr != nil {
			return tls.Certificate{}, nil, fmt.Errorf("failed to read runner API key: %w", kerr)
		}
		cert, cerr := tls.X509KeyPair(certPEM, keyPEM)
		if cerr != nil {
			return tls.Certificate{}, nil, fmt.Errorf("failed to load runner API certificate: %w", cerr)
		}
		return cert, certPEM, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, nil, fmt.Errorf("failed to read runner API certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("failed to generate runner API key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("failed to generate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "stackwright-runner-api"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"stackwright-runner-api"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("failed to sign runner API certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("failed to encode runner API key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("failed to create %s: %w", dir, err)
	}
	// The key first: a certificate without its key would be loaded and fail forever.
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
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
