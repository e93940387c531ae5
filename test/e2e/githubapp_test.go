//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/cluster"
	"github.com/stackwright/stackwright/internal/testing/githubapi"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// nodeCA is a certificate authority of the test's own that signs the certificate of the
// HTTPS servers the test runs on the node's IP. The manager of TestInstall_JobExecutor
// trusts it the way docs/operations.md ("Git hosts with a private CA") tells a platform
// team to trust its private CA: a ConfigMap mounted through the chart's extraVolumes, its
// directory named by SSL_CERT_DIR (nodeCAValues). httptest's own certificate names only
// localhost, which the manager's Pod is not.
type nodeCA struct {
	certPEM []byte
	// roots trusts the CA alone, for the test's own requests.
	roots *x509.CertPool
	// server serves a certificate for the node's IP, signed by the CA.
	server *tls.Config
}

// nodeCAConfigMap is the ConfigMap of the manager's namespace holding the CA certificate.
const nodeCAConfigMap = "e2e-node-ca"

// nodeCAValues are the Helm values that mount nodeCAConfigMap into the manager. Listing
// /etc/ssl/certs keeps the image's public roots, as the docs advise (Go reads the image's
// bundle file there whatever SSL_CERT_DIR says); adding a CA takes no trust from the
// other tests' servers.
const nodeCAValues = `extraVolumes:
- name: node-ca
  configMap: {name: ` + nodeCAConfigMap + `}
extraVolumeMounts:
- {name: node-ca, mountPath: /etc/stackwright/ca, readOnly: true}
extraEnv:
- {name: SSL_CERT_DIR, value: /etc/ssl/certs:/etc/stackwright/ca}
`

// newNodeCA makes a CA and a server certificate it signs for cluster.NodeIP, valid for a
// day either side of now (the node and the test share a clock; the margin is for nothing
// but a suspended machine).
func newNodeCA(t *testing.T) *nodeCA {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("failed to generate the CA key: %v", err)
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "stackwright e2e node CA"},
		NotBefore:             now.Add(-24 * time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("failed to create the CA certificate: %v", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("failed to parse the CA certificate: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("failed to generate the server key: %v", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cluster.NodeIP},
		IPAddresses:  []net.IP{net.ParseIP(cluster.NodeIP)},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("failed to create the server certificate: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	return &nodeCA{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		roots:   roots,
		server: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		},
	}
}

// publish writes the CA certificate into nodeCAConfigMap, creating the manager's namespace
// first: the manager's Pod cannot start without the ConfigMap, and helm install
// (--create-namespace) would create the namespace only with the release. Both may be left
// from an interrupted run.
func (ca *nodeCA) publish(t *testing.T, c client.Client) {
	t.Helper()
	createNamespace(t, c, systemNamespace)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: nodeCAConfigMap, Namespace: systemNamespace},
		Data:       map[string]string{"ca.crt": string(ca.certPEM)},
	}
	err := c.Create(context.Background(), cm)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(context.Background(), cm)
	}
	if err != nil {
		t.Fatalf("failed to write ConfigMap %s/%s: %v", systemNamespace, nodeCAConfigMap, err)
	}
}

// listingStatus is the HTTP status a server on the node answers a git ref listing of
// repoURL with, asked as the manager asks it with a GitHub App token.
func (ca *nodeCA) listingStatus(t *testing.T, repoURL, token string) int {
	t.Helper()
	tr := clusterHTTP.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.roots}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, repoURL+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		t.Fatalf("failed to build a listing request: %v", err)
	}
	req.SetBasicAuth(githubapi.Username, token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("failed to list %s: %v", repoURL, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// appTokenTTL is how long the fake GitHub's installation tokens live.
//
// GitHub's live an hour, and the manager replaces a token five minutes before it expires
// (githubapp.DefaultRefreshBefore), so it reuses one only while more than five minutes are
// left. A TTL above that margin would keep this test waiting over five minutes for the
// first token to expire, to see a reuse that the envtest already checks on a fake clock
// (TestResolver_Resolve_GitHubAppTokenRotation). Under the margin the manager mints a
// token for every git session instead, and what is left to show is the case on a
// real clock: a push made once the first token no longer opens the repository is still
// deployed. So the test waits until the app refuses the first token and the server
// refuses a listing with it, and only then pushes. A minute is ample for one session (a
// listing, then a fetch of a few kilobytes) on a loaded node, so the server never has to
// refuse the manager: a refusal would mean it presented a stale token.
const appTokenTTL = time.Minute

// testGitHubAppFollowsBranch: a Stack follows a branch on a GitHub Enterprise-like host on
// the node (git over HTTPS and the app token API under /api/v3, behind a certificate of
// the test's CA, which the manager trusts through the chart's values), authenticating as
// a GitHub App installation. A push made after the first token expired is deployed by
// polling, the manager having minted another; neither the app's private key nor a token
// shows in the Stack's status, its Updates, the namespace's events or the manager's log.
func testGitHubAppFollowsBranch(t *testing.T, jc *jobCluster) {
	c := jc.c
	app := githubapi.NewApp(t, 4242, 777, appTokenTTL, nil)
	repos := t.TempDir()
	repo, first := gitserver.NewRepo(t, repos, "infra", map[string]string{"app/Pulumi.yaml": configMapProgram("first")})
	srv := gitserver.NewHTTPServerWith(t, repos, gitserver.Options{
		Listener:  listenOnNode(t),
		TLS:       true,
		TLSConfig: jc.nodeCA.server,
		Authorize: app.Valid,
		// The API of GitHub Enterprise Server, where the manager derives it from the
		// repository's host and port.
		Handlers: map[string]http.Handler{"/api/v3/": app},
	})
	repoURL := srv.URL + "/infra.git"

	const ns = "e2e-github-app"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
		StringData: map[string]string{"appID": "4242", "installationID": "777", "privateKey": app.PrivateKeyPEM},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatalf("failed to create Secret %s/github-app: %v", ns, err)
	}
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: infra
spec:
  stack: e2e
  projectRepo: `+repoURL+`
  branch: main
  repoDir: app
  gitAuth:
    githubApp:
      appID: {type: Secret, secret: {name: github-app, key: appID}}
      installationID: {type: Secret, secret: {name: github-app, key: installationID}}
      privateKey: {type: Secret, secret: {name: github-app, key: privateKey}}
  resyncFrequencySeconds: 10
  serviceAccountName: deployer
  destroyOnFinalize: true
  envRefs:
`+s3EnvRefsYAML))
	waitCommitDeployed(t, c, ns, "infra", first, "first")

	issued := app.Issued()
	if len(issued) == 0 {
		t.Fatal("the first commit was deployed, yet the app issued no token")
	}
	firstToken := issued[0]
	NewWithT(t).Eventually(func() bool { return app.Valid(githubapi.Username, firstToken) }).
		WithTimeout(appTokenTTL+time.Minute).WithPolling(time.Second).Should(BeFalse(), "the first token never expired")
	if n := srv.Refused(); n != 0 {
		t.Fatalf("the server refused %d requests of the manager's, which presented a stale token", n)
	}
	if got := jc.nodeCA.listingStatus(t, repoURL, firstToken); got != http.StatusUnauthorized {
		t.Fatalf("a listing with the first token: status %d, want %d (expired)", got, http.StatusUnauthorized)
	}

	second := repo.Commit(map[string]string{"app/Pulumi.yaml": configMapProgram("second")})
	pushed := time.Now()
	waitCommitDeployed(t, c, ns, "infra", second, "second")
	t.Logf("a push after the first token expired: deployed %.1f s after it was made, %d tokens minted", time.Since(pushed).Seconds(), len(app.Issued()))
	if n := len(app.Issued()); n < 2 {
		t.Errorf("the app issued %d tokens, want a new one after the first expired", n)
	}
	if n := srv.Refused(); n != 1 {
		t.Errorf("the server refused %d requests, want 1 (the test's own, with the expired token)", n)
	}
	if served, refused := app.Requests(); refused != 0 {
		t.Errorf("the app refused %d of %d token requests", refused, served)
	}

	checkNoAppSecrets(t, c, ns, "infra", app)
	run(t, "kubectl", "delete", "-n", ns, "stack/infra", "--timeout=5m")
}

// checkNoAppSecrets checks that no line of app's private key, and no token it issued
// (each starts with its TokenPrefix), is in what the manager wrote about Stack name of ns
// or logged: the Stack's status, its Updates' status, the namespace's events and the
// manager's whole log.
func checkNoAppSecrets(t *testing.T, c client.Client, ns, name string, app *githubapi.App) {
	t.Helper()
	var needles []string
	for line := range strings.SplitSeq(app.PrivateKeyPEM, "\n") {
		if len(line) > 8 && !strings.HasPrefix(line, "-----") {
			needles = append(needles, line)
		}
	}
	needles = append(needles, app.TokenPrefix)

	var st pulumiv1.Stack
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
		t.Fatalf("failed to get Stack %s/%s: %v", ns, name, err)
	}
	var ups v1alpha1.UpdateList
	if err := c.List(context.Background(), &ups, client.InNamespace(ns)); err != nil {
		t.Fatalf("failed to list Updates of %s: %v", ns, err)
	}
	upStatus := make([]v1alpha1.UpdateStatus, 0, len(ups.Items))
	for _, u := range ups.Items {
		upStatus = append(upStatus, u.Status)
	}
	var events corev1.EventList
	if err := c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatalf("failed to list events of %s: %v", ns, err)
	}
	if len(events.Items) == 0 {
		t.Errorf("namespace %s has no events: the check would see nothing", ns)
	}
	pod := managerPod(NewWithT(t), c)
	// --tail=-1: the whole log since the Pod started, not kubectl's last ten lines.
	logs := run(t, "kubectl", "logs", "-n", systemNamespace, pod.Name, "--tail=-1")
	for _, tc := range []struct {
		what string
		v    any
	}{
		{"the Stack's status", st.Status},
		{"its Updates' status", upStatus},
		{"the namespace's events", events.Items},
		{"the manager's log", logs},
	} {
		text, ok := tc.v.(string)
		if !ok {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatalf("failed to encode %s: %v", tc.what, err)
			}
			text = string(b)
		}
		for _, n := range needles {
			if strings.Contains(text, n) {
				what := "a line of the app's private key"
				if n == app.TokenPrefix {
					what = "an installation token"
				}
				t.Errorf("%s holds %s", tc.what, what)
				break
			}
		}
	}
}
