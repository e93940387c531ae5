//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/executor/job"
)

// cloudYAML is the stand-in for a cloud account: ServiceAccount "cloud" may manage the
// ConfigMaps of its namespace, and a Stack that holds its token manages them as a cloud
// provider would manage its resources.
const cloudYAML = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: cloud
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cloud
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cloud
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: cloud
subjects:
- kind: ServiceAccount
  name: cloud
`

// testNamespaceDeletionDestroys: tenant A deletes its namespace, holding a
// destroyOnFinalize Stack whose Program, passphrase, backend keys and cloud credentials
// all live there. The namespace's deletion would take them before the destroy ran; their
// finalizer keeps them until it has, so the destroy happens (the cloud resource is gone),
// in a runner Job in the manager's namespace, as a ServiceAccount without rights. No
// engine runs in the manager: its metric stays 0, and no pulumi process descends from it.
func testNamespaceDeletionDestroys(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	a := newTenant(t, c, "e2e-nsdel")
	const cloud = "e2e-nsdel-cloud"
	createNamespace(t, c, cloud)
	t.Cleanup(func() { deleteNamespace(t, c, cloud) })
	run(t, "kubectl", "apply", "-n", cloud, "-f", writeManifest(t, cloudYAML))
	token := strings.TrimSpace(run(t, "kubectl", "create", "token", "cloud", "-n", cloud, "--duration=1h"))
	var rootCA corev1.ConfigMap
	g.Eventually(func() error {
		return c.Get(context.Background(), client.ObjectKey{Namespace: cloud, Name: "kube-root-ca.crt"}, &rootCA)
	}).WithTimeout(time.Minute).Should(Succeed())
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	// The cloud account's endpoint, as a program outside the cluster would be given it.
	apiServer := serviceIP(t, c, "default", "kubernetes")
	a.apply(t, s3CredentialsYAML+`---
apiVersion: v1
kind: Secret
metadata:
  name: cloud
data:
  token: `+b64(token)+`
  ca: `+b64(rootCA.Data["ca.crt"])+`
---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: nsdel
program:
  configuration:
    token:
      type: String
    ca:
      type: String
  resources:
    cloud:
      type: pulumi:providers:kubernetes
      properties:
        kubeconfig:
          fn::toJSON:
            apiVersion: v1
            kind: Config
            clusters:
            - name: cloud
              cluster:
                server: https://`+apiServer+`
                certificate-authority-data:
                  fn::toBase64: ${ca}
            users:
            - name: cloud
              user:
                token: ${token}
            contexts:
            - name: cloud
              context: {cluster: cloud, user: cloud, namespace: `+cloud+`}
            current-context: cloud
    made:
      type: kubernetes:core/v1:ConfigMap
      properties:
        metadata:
          name: nsdel-resource
          namespace: `+cloud+`
        data:
          by: tenant-a
      options:
        provider: ${cloud}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: nsdel
spec:
  stack: nsdel
  programRef:
    name: nsdel
  destroyOnFinalize: true
  # The tenant's own image, sizing and environment for its runner Pods: none of it may
  # follow the destroy into the manager's namespace.
  workspaceTemplate:
    spec:
      image: `+bakedImage+`
      resources:
        requests: {memory: 300Mi}
      env:
      - {name: TENANT_CHOSEN, value: "1"}
  secretsRef:
    token:
      type: Secret
      secret:
        name: cloud
        key: token
    ca:
      type: Secret
      secret:
        name: cloud
        key: ca
  envRefs:
`+s3EnvRefsYAML)
	g.Eventually(func(g Gomega) { waitStackReadyOnce(g, c, a.ns, "nsdel") }).
		WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(a.ns))
	resource := &corev1.ConfigMap{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: cloud, Name: "nsdel-resource"}, resource)).To(Succeed())
	for _, name := range []string{"pass", "s3-credentials", "cloud"} {
		g.Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: name}, &s)).To(Succeed())
			g.Expect(s.Finalizers).To(ContainElement(pulumiv1.InputsFinalizer))
		}).WithTimeout(time.Minute).Should(Succeed(), "Secret %s is not protected", name)
	}

	run(t, "kubectl", "delete", "namespace", a.ns, "--wait=false")
	g.Eventually(func(g Gomega) {
		g.Expect(pulumiUnderManager()).To(BeEmpty(), "a pulumi process runs under the manager")
		err := c.Get(context.Background(), client.ObjectKey{Namespace: cloud, Name: "nsdel-resource"}, resource)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the cloud resource is still there: %v", err)
		err = c.Get(context.Background(), client.ObjectKey{Name: a.ns}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the namespace is still there: %v", err)
	}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "\n%s", describeNamespace(systemNamespace))

	var engineRuns []string
	for _, line := range strings.Split(scrapeManager(t, "nsdel"), "\n") {
		if strings.HasPrefix(line, "stackwright_manager_engine_runs_total{") {
			engineRuns = append(engineRuns, line)
		}
		g.Expect(line).NotTo(HavePrefix(`stackwright_stack_resources_kept_total{namespace="`+a.ns+`"}`), "the Stack was released without its destroy")
	}
	g.Expect(engineRuns).To(ContainElement(`stackwright_manager_engine_runs_total{operation="destroy"} 0`))
	g.Expect(engineRuns).To(HaveEach(HaveSuffix(" 0")), "an engine ran in the manager")
	var jobs batchv1.JobList
	g.Expect(c.List(context.Background(), &jobs, client.InNamespace(systemNamespace), client.MatchingLabels{job.LabelDetached: "true"})).To(Succeed())
	var ran []batchv1.Job
	for _, j := range jobs.Items {
		if strings.Contains(j.Annotations["stackwright.dev/detached-update"], `"namespace":"`+a.ns+`"`) {
			ran = append(ran, j)
		}
	}
	g.Expect(ran).NotTo(BeEmpty(), "no detached runner Job ran the destroy")
	pod := ran[len(ran)-1].Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal("stackwright-detached-runner"))
	g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
	// The runner image with the platform's resources, and nothing of the tenant's template.
	g.Expect(pod.InitContainers).To(BeEmpty(), "a bootstrap init container: the tenant's image ran")
	runner := pod.Containers[0]
	g.Expect(runner.Image).NotTo(Equal(bakedImage))
	g.Expect(runner.Resources.Requests.Memory().String()).To(Equal("256Mi"))
	for _, e := range runner.Env {
		g.Expect(e.Name).NotTo(Equal("TENANT_CHOSEN"))
	}
}

// scrapeManager reads the manager's metrics as a scraper bound to the metrics-reader
// ClusterRole would, over HTTPS to its Service's cluster IP (the test runs on the node).
// Each caller names its scraper.
func scrapeManager(t *testing.T, name string) string {
	t.Helper()
	return managerScraper(t, name)(t)
}

// managerScraper makes the scraper name (a ServiceAccount bound to the metrics-reader
// ClusterRole, removed when the test ends) and returns a reader of the manager's metrics
// through it: it reads the Service's address and a fresh token on each call, so it goes on
// working across the manager's and the node's restarts.
func managerScraper(t *testing.T, name string) func(t *testing.T) string {
	t.Helper()
	scraper := "e2e-scraper-" + name
	// A killed run leaves its binding behind.
	_, _ = runErr("kubectl", "delete", "clusterrolebinding", scraper, "--ignore-not-found")
	run(t, "kubectl", "create", "serviceaccount", scraper, "-n", systemNamespace)
	run(t, "kubectl", "create", "clusterrolebinding", scraper, "--clusterrole=stackwright-metrics-reader", "--serviceaccount="+systemNamespace+":"+scraper)
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "clusterrolebinding", scraper, "--ignore-not-found")
		_, _ = runErr("kubectl", "delete", "serviceaccount", scraper, "-n", systemNamespace, "--ignore-not-found")
	})
	// The manager's certificate is self-signed: what is checked here is who may read.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	return func(t *testing.T) string {
		t.Helper()
		token := strings.TrimSpace(run(t, "kubectl", "create", "token", scraper, "-n", systemNamespace))
		ip := strings.TrimSpace(run(t, "kubectl", "get", "service", "stackwright-metrics", "-n", systemNamespace, "-o", "jsonpath={.spec.clusterIP}"))
		port := strings.TrimSpace(run(t, "kubectl", "get", "service", "stackwright-metrics", "-n", systemNamespace, "-o", "jsonpath={.spec.ports[0].port}"))
		var body string
		NewWithT(t).Eventually(func(g Gomega) {
			req, err := http.NewRequest(http.MethodGet, "https://"+ip+":"+port+"/metrics", nil)
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			// The binding may take a moment to reach the authorizer.
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", b)
			body = string(b)
		}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		return body
	}
}

// pulumiUnderManager lists the pulumi processes on this node (the test runs on the node)
// that descend from a manager process (the one with the runner API Service flag).
func pulumiUnderManager() []int {
	parent := map[int]int{}
	var managers, engines []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		dir := filepath.Dir(p)
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		if ppid, ok := parentPID(p); ok {
			parent[pid] = ppid
		}
		cmd, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		switch {
		case strings.Contains(string(cmd), "--runner-api-service="):
			managers = append(managers, pid)
		case strings.HasPrefix(filepath.Base(args[0]), "pulumi"):
			engines = append(engines, pid)
		}
	}
	var under []int
	for _, e := range engines {
		for p, hops := parent[e], 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if slices.Contains(managers, p) {
				under = append(under, e)
				break
			}
		}
	}
	return under
}

// parentPID reads the parent's PID from /proc/<pid>/stat, whose second field (the command
// name, in parentheses) may hold spaces.
func parentPID(statPath string) (int, bool) {
	f, err := os.Open(statPath)
	if err != nil {
		return 0, false
	}
	defer func() { _ = f.Close() }()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return 0, false
	}
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, false
	}
	var state string
	var ppid int
	if _, err := fmt.Sscanf(line[i+1:], " %s %d", &state, &ppid); err != nil {
		return 0, false
	}
	return ppid, true
}
