//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// seedProgram is the seeds' first example with an image the node has: a Deployment and a
// Service through the real Kubernetes provider, which finds its credentials the way a
// program run by PKO does: the runner Pod's own ServiceAccount, in-cluster (no kubeconfig
// is given). The web server is versitygw, which answers any request (403 without S3
// credentials); nothing can pull nginx here.
func seedProgram(replicas int) string {
	return fmt.Sprintf(`name: seed-nginx
runtime: yaml
config:
  namespace:
    type: string
resources:
  web:
    type: kubernetes:apps/v1:Deployment
    properties:
      metadata:
        name: web
        namespace: ${namespace}
      spec:
        replicas: %d
        selector:
          matchLabels: {app: web}
        template:
          metadata:
            labels: {app: web}
          spec:
            containers:
            - name: web
              image: %s
              imagePullPolicy: Never
              args: ["--port", ":8080", "--access", "seed", "--secret", "seed-secret", "posix", "--nometa", "/data"]
              ports:
              - containerPort: 8080
              readinessProbe:
                tcpSocket: {port: 8080}
                periodSeconds: 1
              volumeMounts:
              - {name: data, mountPath: /data}
            volumes:
            - name: data
              emptyDir: {}
  svc:
    type: kubernetes:core/v1:Service
    properties:
      metadata:
        name: web
        namespace: ${namespace}
      spec:
        selector: {app: web}
        ports:
        - port: 80
          targetPort: 8080
outputs:
  clusterIP: ${svc.spec.clusterIP}
`, replicas, s3Image)
}

// seedRBACYAML: deployer may manage Deployments and Services in its namespace and read
// what the provider's await logic watches. A Deployment's awaiter watches its ReplicaSets,
// Pods and the namespace's PersistentVolumeClaims, and without the right to list one of
// them it waits for its whole timeout (found here: ten minutes, the Deployment long
// available); a Service's watches Endpoints and EndpointSlices. intruder has no Role.
const seedRBACYAML = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: intruder
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: deployer
rules:
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods", "persistentvolumeclaims", "endpoints", "events"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: deployer
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: deployer
subjects:
- kind: ServiceAccount
  name: deployer
`

// seedStackYAML follows the branch of repo in ns as sa, with state in backend, and checks
// for drift every minute.
func seedStackYAML(name, repoURL, ns, sa, backend string) string {
	return gitStackYAML(name, repoURL, ns, sa, backend, `  driftDetection:
    schedules:
    - cron: "* * * * *"
`)
}

// gitStackYAML is a Stack following the main branch of repoURL in ns as sa, polling every
// 10 s, with state in backend reached with the S3 server's keys and the namespace as its
// config; extra is added to its spec.
func gitStackYAML(name, repoURL, ns, sa, backend, extra string) string {
	return s3CredentialsYAML + `---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: ` + name + `
spec:
  stack: ` + name + `
  projectRepo: ` + repoURL + `
  branch: main
  resyncFrequencySeconds: 10
  serviceAccountName: ` + sa + `
  destroyOnFinalize: true
  backend: ` + backend + `
  config:
    namespace: ` + ns + `
` + extra + `  envRefs:
` + s3EnvRefsYAML
}

// testSeedNginx is the seeds' in-cluster NGINX on the release images: the runner Pod gets
// the Kubernetes provider from the release's plugins image (mounted from the node's image
// store), creates the objects with its ServiceAccount's in-cluster credentials, and the
// provider's await logic sees the rollout through. A change by hand is reported by the
// drift check, deleting the Stack removes what it made, and a ServiceAccount without the
// rights gets the API server's Forbidden on the Stack and its Update.
func testSeedNginx(t *testing.T, c client.Client, ns, backend, pluginsRef string) {
	ctx := context.Background()
	repos := t.TempDir()
	gitserver.NewRepo(t, repos, "seed", map[string]string{"Pulumi.yaml": seedProgram(1)})
	srv := gitserver.NewHTTPServerOn(t, listenOnNode(t), repos, nil)
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, seedRBACYAML))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, seedStackYAML("seed", srv.URL+"/seed.git", ns, "deployer", backend)))

	var ip string
	NewWithT(t).Eventually(func(g Gomega) {
		st := waitStackReadyOnce(g, c, ns, "seed")
		g.Expect(json.Unmarshal(st.Status.Outputs["clusterIP"].Raw, &ip)).To(Succeed())
		var d appsv1.Deployment
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		// The provider awaited the rollout: the Stack is Ready only once the Pod is.
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	// What the runner Pods' ephemeral-storage limits are sized from (docs/operations.md).
	peak, pods := runnerScratchUsed(t, c, ns)
	t.Logf("runner scratch directories at the end of their runs: at most %d bytes over %d runner Pods", peak, pods)
	var svc corev1.Service
	NewWithT(t).Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &svc)).To(Succeed())
	NewWithT(t).Expect(ip).To(Equal(svc.Spec.ClusterIP), "the output is the Service's cluster IP")
	NewWithT(t).Eventually(func(g Gomega) {
		resp, err := clusterHTTP.Get("http://" + ip + "/")
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		// versitygw refuses an anonymous request in S3's words: the Service reached it.
		g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
		g.Expect(string(body)).To(ContainSubstring("AccessDenied"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	assertRunnerMountedPlugins(t, c, ns, pluginsRef)

	// The objects as the program made them are no drift; a change by hand is, and the
	// next scheduled check after it reports it.
	driftCheck := func(want metav1.ConditionStatus, after time.Time) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			var st pulumiv1.Stack
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "seed"}, &st)).To(Succeed())
			g.Expect(st.Status.DriftDetection).NotTo(BeNil())
			g.Expect(st.Status.DriftDetection.LastCheck).NotTo(BeNil())
			g.Expect(st.Status.DriftDetection.LastCheck.Time).To(BeTemporally(">", after))
			cond := apimeta.FindStatusCondition(st.Status.Conditions, "DriftDetected")
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(want), cond.Message)
		}).WithTimeout(4*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	}
	driftCheck(metav1.ConditionFalse, time.Time{})
	// Checks finish on whole seconds; the next one to count starts after this one.
	scaled := time.Now().Add(time.Second)
	run(t, "kubectl", "scale", "-n", ns, "deployment/web", "--replicas=2")
	driftCheck(metav1.ConditionTrue, scaled)

	// Deleting the Stack destroys both objects (the provider deletes in the foreground:
	// the node's garbage collector finishes it) and then the Stack goes.
	run(t, "kubectl", "delete", "-n", ns, "stack/seed", "--timeout=5m")
	NewWithT(t).Eventually(func(g Gomega) {
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T web still exists (%v)", obj, err)
		}
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))

	// Without the rights: the API server's Forbidden, on the Stack and on its Update.
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, seedStackYAML("seed-intruder", srv.URL+"/seed.git", ns, "intruder", backend)))
	NewWithT(t).Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "seed-intruder"}, &st)).To(Succeed())
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.State).To(Equal(pulumiv1.UpdateStateFailed))
		g.Expect(st.Status.LastUpdate.Message).To(ContainSubstring("forbidden"))
		g.Expect(st.Status.LastUpdate.Message).To(ContainSubstring(`"system:serviceaccount:` + ns + `:intruder"`))
		var u v1alpha1.Update
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Status.LastUpdate.Name}, &u)).To(Succeed())
		g.Expect(u.Status.Message).To(ContainSubstring("forbidden"))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	// Nothing was made, so its deletion has nothing to destroy.
	run(t, "kubectl", "delete", "-n", ns, "stack/seed-intruder", "--timeout=5m")

	// A provider no bundle holds (the release ships the Kubernetes provider only), with no
	// egress: the Stack stalls at once, naming it.
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+`---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: needs-random
program:
  resources:
    pet:
      type: random:index:RandomPet
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: needs-random
spec:
  stack: needs-random
  programRef:
    name: needs-random
  backend: `+backend+`
  envRefs:
`+s3EnvRefsYAML))
	NewWithT(t).Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "needs-random"}, &st)).To(Succeed())
		cond := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(pulumiv1.ReasonMissingPlugin))
		g.Expect(cond.Message).To(ContainSubstring("the engine has no plugin pulumi-resource-random"))
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.Name).To(HaveSuffix("-1"), "the failure was retried")
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	run(t, "kubectl", "delete", "-n", ns, "stack/needs-random", "--timeout=5m")
}

// assertRunnerMountedPlugins checks that a runner Pod of ns mounted the plugins image ref
// as an image volume.
func assertRunnerMountedPlugins(t *testing.T, c client.Client, ns, ref string) {
	t.Helper()
	var pods corev1.PodList
	NewWithT(t).Expect(c.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	var seen []string
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.Image != nil {
				seen = append(seen, v.Image.Reference)
			}
		}
	}
	NewWithT(t).Expect(seen).To(ContainElement(ref), "runner Pods' image volumes: %s", strings.Join(seen, ", "))
}

// runnerScratchUsed is the most any runner Pod of ns that is still there says its scratch
// directory held at the end of its run (the runner's "scratch used" log line).
func runnerScratchUsed(t *testing.T, c client.Client, ns string) (peak int64, pods int) {
	t.Helper()
	var list corev1.PodList
	NewWithT(t).Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	for _, p := range list.Items {
		if p.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedBy {
			continue
		}
		out, err := runErr("kubectl", "logs", "-n", ns, p.Name, "-c", "runner")
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(out, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), job.ScratchUsedPrefix); ok {
				var n int64
				if _, err := fmt.Sscanf(rest, "%d bytes", &n); err == nil {
					peak, pods = max(peak, n), pods+1
				}
			}
		}
	}
	return peak, pods
}
