package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// ServiceAccountDirEnvVar overrides where the Pod's ServiceAccount credentials are read
// from (tests); a Pod has them at the default.
const ServiceAccountDirEnvVar = "STACKWRIGHT_TESTING_SERVICEACCOUNT_DIR"

const defaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// TokenEnvVar and CAEnvVar give the provider explicit credentials, a bearer token and the
// API server's CA (PEM), the way a cloud provider takes its own from the Stack's
// environment; resources then name their namespace. Without them it uses its Pod's
// ServiceAccount.
const (
	TokenEnvVar = "STACKWRIGHT_TESTING_KUBE_TOKEN"
	CAEnvVar    = "STACKWRIGHT_TESTING_KUBE_CA"
)

// kubeAPI is the API server as a Pod sees it: its address from the environment the kubelet
// sets, its CA, and the Pod's ServiceAccount token.
type kubeAPI struct {
	base      string
	token     string
	namespace string
	client    *http.Client
}

func newKubeAPI() (*kubeAPI, error) {
	dir := os.Getenv(ServiceAccountDirEnvVar)
	if dir == "" {
		dir = defaultServiceAccountDir
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("no in-cluster credentials: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a Pod?)")
	}
	token, ns, ca := []byte(os.Getenv(TokenEnvVar)), []byte(nil), []byte(os.Getenv(CAEnvVar))
	if len(token) == 0 {
		var err error
		if token, err = os.ReadFile(filepath.Join(dir, "token")); err != nil {
			return nil, fmt.Errorf("no in-cluster credentials: %w", err)
		}
		if ns, err = os.ReadFile(filepath.Join(dir, "namespace")); err != nil {
			return nil, fmt.Errorf("no in-cluster credentials: %w", err)
		}
		if ca, err = os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil {
			return nil, fmt.Errorf("no in-cluster credentials: %w", err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no in-cluster credentials: no CA certificate (%s/ca.crt, or $%s with $%s)", dir, CAEnvVar, TokenEnvVar)
	}
	return &kubeAPI{
		base:      "https://" + net.JoinHostPort(host, port),
		token:     strings.TrimSpace(string(token)),
		namespace: strings.TrimSpace(string(ns)),
		client:    &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
	}, nil
}

// do sends body as JSON (a merge patch for PATCH) and decodes the answer into out. An
// error answer becomes an error with the API server's reason and message, e.g.
// "Forbidden: configmaps is forbidden: User ... cannot create resource ...".
func (k *kubeAPI) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var status struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &status) == nil && status.Reason != "" {
			return fmt.Errorf("%s: %s", status.Reason, status.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
