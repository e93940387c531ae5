package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certSpec is one certificate the cluster needs, signed by the cluster CA.
type certSpec struct {
	name   string // file stem under pki/
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []net.IP
}

// certificates lists every identity of the one-node cluster: the API server's serving
// certificate, the client certificates each component authenticates with (their CN and
// O are the user and groups the built-in RBAC roles are bound to), and the kubelet's
// serving certificate.
func (l layout) certificates(node string) []certSpec {
	apiIPs := []net.IP{net.ParseIP(NodeIP), net.ParseIP(APIServiceIP), net.ParseIP("127.0.0.1")}
	return []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true, ips: apiIPs, dns: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		}},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "admin", cn: "stackwright-cluster-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		{name: "kube-proxy", cn: "system:kube-proxy", client: true},
		{name: "kubelet", cn: "system:node:" + node, orgs: []string{"system:nodes"}, client: true},
		{name: "kubelet-serving", cn: "system:node:" + node, orgs: []string{"system:nodes"}, server: true,
			ips: []net.IP{net.ParseIP(NodeIP)}, dns: []string{node, "localhost"}},
	}
}

// ensurePKI creates the CA, the certificates and the service-account signing key once;
// a restarted cluster keeps them, so tokens and kubeconfigs handed out stay valid.
func (l layout) ensurePKI(node string) error {
	if err := os.MkdirAll(l.pki(), 0o700); err != nil {
		return fmt.Errorf("failed to create pki directory: %w", err)
	}
	caCert, caKey, err := l.ensureCA()
	if err != nil {
		return err
	}
	for _, spec := range l.certificates(node) {
		if exists(l.pkiFile(spec.name + ".crt")) {
			continue
		}
		if err := writeCert(l.pki(), spec, caCert, caKey); err != nil {
			return fmt.Errorf("failed to create %s certificate: %w", spec.name, err)
		}
	}
	if exists(l.pkiFile("sa.key")) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("failed to generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("failed to encode service-account key: %w", err)
	}
	if err := writePEM(l.pkiFile("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	return writePEM(l.pkiFile("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
}

func (l layout) ensureCA() (*x509.Certificate, crypto.Signer, error) {
	if exists(l.pkiFile("ca.crt")) {
		return readCA(l.pkiFile("ca.crt"), l.pkiFile("ca.key"))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "stackwright-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to sign CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to encode CA key: %w", err)
	}
	if err := writePEM(l.pkiFile("ca.key"), "EC PRIVATE KEY", keyDER); err != nil {
		return nil, nil, err
	}
	if err := writePEM(l.pkiFile("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func readCA(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certDER, err := readPEM(certPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse CA certificate: %w", err)
	}
	keyDER, err := readPEM(keyPath)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse CA key: %w", err)
	}
	return cert, key, nil
}

func writeCert(dir string, spec certSpec, ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, spec.name+".key"), "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, spec.name+".crt"), "CERTIFICATE", der)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func writePEM(path, typ string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

func readPEM(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("failed to decode %s: no PEM block", path)
	}
	return block.Bytes, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
