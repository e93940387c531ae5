package manager_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestManager_Metrics_SeriesAfterAnUpdate scrapes the /metrics endpoint of a real manager
// after one Stack reached Ready and checks Stackwright's series describe that update.
func TestManager_Metrics_SeriesAfterAnUpdate(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	opts := testOptions(t)
	opts.MetricsAddr = freeAddr(t)
	opts.WatchNamespaces = []string{ns}
	startManager(t, env.Config, opts)
	token := scraperToken(t, ns, "prometheus", true)
	waitReady(t, createHello(t, ns, "hello", nil), "the Stack never became Ready")

	want := []string{
		`stackwright_updates_total{namespace="` + ns + `",operation="up",result="succeeded"} 1`,
		`stackwright_update_duration_seconds_count{namespace="` + ns + `",operation="up",result="succeeded"} 1`,
		`stackwright_stacks{namespace="` + ns + `",state="ready"} 1`,
		`stackwright_stacks{namespace="` + ns + `",state="stalled"} 0`,
		`stackwright_stack_last_success_timestamp_seconds{namespace="` + ns + `",stack="hello"} `,
		`stackwright_executor_running_updates{executor="local"} `,
		`stackwright_executor_queued_updates{executor="local"} `,
		`stackwright_engine_cpu_seconds_count{operation="up"} `,
		`stackwright_source_resolve_duration_seconds_count{kind="Program"} `,
	}
	g.Eventually(func(g Gomega) {
		code, body, err := scrape(opts.MetricsAddr, token)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK), body)
		for _, series := range want {
			g.Expect(hasLine(body, series)).To(BeTrue(), "no line starting with %s in:\n%s", series, stackwrightLines(body))
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// TestManager_Metrics_RefusesUnauthorisedScrapes checks the metrics endpoint's default:
// HTTPS, and only for a token the API server authenticates and authorises to get /metrics.
func TestManager_Metrics_RefusesUnauthorisedScrapes(t *testing.T) {
	ns := env.Namespace(t)
	opts := testOptions(t)
	opts.MetricsAddr = freeAddr(t)
	opts.WatchNamespaces = []string{ns}
	startManager(t, env.Config, opts)
	allowed, denied := scraperToken(t, ns, "prometheus", true), scraperToken(t, ns, "tenant", false)

	tests := []struct {
		name  string
		token string
		want  int
	}{
		{name: "noTokenIsUnauthorized", want: http.StatusUnauthorized},
		// controller-runtime's filter answers 500 when the TokenReview itself fails, as it
		// does for a string that is no token at all.
		{name: "forgedTokenIsRefused", token: "not-a-token", want: http.StatusInternalServerError},
		{name: "tokenWithoutTheRoleIsForbidden", token: denied, want: http.StatusForbidden},
		{name: "tokenWithTheRoleScrapes", token: allowed, want: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) {
				code, body, err := scrape(opts.MetricsAddr, tc.token)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(code).To(Equal(tc.want), body)
				if tc.want != http.StatusOK {
					g.Expect(body).NotTo(ContainSubstring("stackwright_"))
				}
			}).WithTimeout(30 * time.Second).Should(Succeed())
		})
	}

	// Plain HTTP gets no metrics either.
	resp, err := http.Get("http://" + opts.MetricsAddr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		NewWithT(t).Expect(string(body)).NotTo(ContainSubstring("stackwright_"), "metrics served over plain HTTP")
	}
}

// scraperToken returns a token of a new ServiceAccount of ns, bound (when allowed) to a
// ClusterRole that may get /metrics, as a Prometheus would be.
func scraperToken(t *testing.T, ns, name string, allowed bool) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	if allowed {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		g.Expect(env.Client.Create(ctx, role)).To(Succeed())
		g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
		t.Cleanup(func() {
			_ = env.Client.Delete(ctx, binding)
			_ = env.Client.Delete(ctx, role)
		})
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// scrape GETs /metrics over HTTPS (the certificate is the manager's self-signed one) with
// token, when given, as a bearer token.
func scrape(addr, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the manager's certificate is self-signed
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func hasLine(text, prefix string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func stackwrightLines(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "stackwright_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// freeAddr is a loopback address with a port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
