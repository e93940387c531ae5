//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// startExporter serves, on the node, the gauge e2e_unhealthy at the value unhealthy holds:
// the exporter the test's Prometheus scrapes.
func startExporter(t *testing.T, unhealthy *atomic.Int32) string {
	t.Helper()
	l := listenOnNode(t)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE e2e_unhealthy gauge\ne2e_unhealthy %d\n", unhealthy.Load())
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// startPrometheus runs ./bin/prometheus (hack/tools/prometheus pins it) on the node, in the
// cluster's network, scraping target every second, and returns its URL, which the
// manager's Pod reaches.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n- job_name: e2e\n  static_configs:\n  - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port of the node: taken, then given to Prometheus.
	l := listenOnNode(t)
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "prometheus"),
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	// Started from a thread in the cluster's network namespace, Prometheus lives there.
	if err := inClusterNetwork(cmd.Start); err != nil {
		cancel()
		t.Fatalf("failed to start prometheus: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	})
	url := "http://" + addr
	NewWithT(t).Eventually(func() error {
		resp, err := clusterHTTP.Get(url + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("prometheus: HTTP %d", resp.StatusCode)
		}
		return nil
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "prometheus is ready")
	return url
}

// testRolloutMetricGate: a StackRollout whose metric gate queries a real Prometheus on the
// node, scraping an exporter the test controls. While the exporter reports healthy, a new
// version passes ring 0's gate and reaches ring 1; once it reports unhealthy, the next
// version halts after ring 0 (MetricGateFailed) and ring 1 keeps the version it has. A
// second rollout whose gate names a server outside the install's allow-list
// (rollouts.metricGateURLs) stalls with MetricGateURLNotAllowed, and that server gets no
// request.
func testRolloutMetricGate(t *testing.T, jc *jobCluster) {
	c := jc.c
	const ns = "e2e-rollout-metrics"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	unhealthy, prometheus := jc.unhealthy, jc.prometheus
	testMetricGateURLNotAllowed(t, c, ns)

	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+"---\n"+rolloutProgramYAML("v1")+ringStacksYAML(map[string]string{"r0": "0", "r1": "1"})))
	waitVersions := versionsWaiter(t, c, ns)
	waitVersions("v1 deployed", map[string]string{"r0": "v1", "r1": "v1"})

	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, fmt.Sprintf(`apiVersion: stackwright.dev/v1alpha1
kind: StackRollout
metadata:
  name: fleet
spec:
  selector:
    matchLabels:
      app: fleet
  waves:
    byLabel:
      key: ring
      values: ["0", "1"]
  gates:
    metrics:
    - name: healthy
      prometheus:
        url: %s
      query: max(e2e_unhealthy{job="e2e"})
      successCondition: "< 1"
      interval: 2s
      successes: 2
      failures: 2
`, prometheus)))
	ro := &v1alpha1.StackRollout{}
	getRO := func(g Gomega) *v1alpha1.StackRollout {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "fleet"}, ro)).To(Succeed())
		return ro
	}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(getRO(g).Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).NotTo(BeNil())
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, rolloutProgramYAML("v2")))
	waitVersions("v2 passes ring 0's metric gate and reaches ring 1", map[string]string{"r0": "v2", "r1": "v2"})
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(getRO(g).Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Waves).NotTo(BeEmpty())
		g.Expect(ro.Status.Waves[0].Metrics).To(ConsistOf(And(HaveField("Name", "healthy"), HaveField("Successes", BeNumerically(">=", 2)), HaveField("Value", "0"))))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "ring 0's samples are kept\n%s", describeNamespace(ns))

	unhealthy.Store(1)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, rolloutProgramYAML("v3")))
	waitVersions("v3 reaches ring 0", map[string]string{"r0": "v3"})
	NewWithT(t).Eventually(func(g Gomega) {
		getRO(g)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		h := meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(h).NotTo(BeNil())
		g.Expect(h.Reason).To(Equal(v1alpha1.ReasonMetricGateFailed))
		g.Expect(h.Message).To(ContainSubstring("metric gate healthy failed 2 time(s) in a row"))
		g.Expect(h.Message).To(ContainSubstring("last value: 1"))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the unhealthy metric halts the rollout\n%s", describeNamespace(ns))
	st := &pulumiv1.Stack{}
	NewWithT(t).Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "r1"}, st)).To(Succeed())
	NewWithT(t).Expect(strings.Trim(string(st.Status.Outputs["version"].Raw), `"`)).To(Equal("v2"), "ring 1 keeps v2")
	out := run(t, "kubectl-stackwright", "-n", ns, "rollout", "status", "fleet")
	NewWithT(t).Expect(out).To(ContainSubstring("MetricGateFailed"))
}

// testMetricGateURLNotAllowed applies, in ns, a rollout whose metric gate names a server on
// the node that the install does not allow: the rollout stalls naming the URL and the flag,
// and the server is sent nothing.
func testMetricGateURLNotAllowed(t *testing.T, c client.Client, ns string) {
	var asked atomic.Int32
	l := listenOnNode(t)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked.Add(1) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	refused := "http://" + l.Addr().String()
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, fmt.Sprintf(`apiVersion: stackwright.dev/v1alpha1
kind: StackRollout
metadata:
  name: refused
spec:
  selector:
    matchLabels:
      app: nothing
  waves:
    byLabel:
      key: ring
      values: ["0"]
  gates:
    metrics:
    - name: elsewhere
      prometheus:
        url: %s
      query: up
      successCondition: "< 1"
      interval: 1s
`, refused)))
	NewWithT(t).Eventually(func(g Gomega) {
		ro := &v1alpha1.StackRollout{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "refused"}, ro)).To(Succeed())
		s := meta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(s).NotTo(BeNil())
		g.Expect(s.Reason).To(Equal(v1alpha1.ReasonMetricGateURLNotAllowed))
		g.Expect(s.Message).To(ContainSubstring("metric gate elsewhere may not query " + refused))
		g.Expect(s.Message).To(ContainSubstring("--metric-gate-urls"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "a gate outside the allow-list stalls its rollout\n%s", describeNamespace(ns))
	if n := asked.Load(); n != 0 {
		t.Errorf("the server outside the allow-list got %d request(s)", n)
	}
	run(t, "kubectl", "delete", "-n", ns, "stackrollout", "refused")
}
