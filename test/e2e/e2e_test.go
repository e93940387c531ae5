//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
	"github.com/stackwright/stackwright/internal/testing/repo"
	"github.com/stackwright/stackwright/internal/testing/s3tenants"
)

func TestMain(m *testing.M) {
	// The clients' own logging adds nothing to a test failure.
	ctrllog.SetLogger(logr.Discard())
	r, err := repo.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root = r
	if os.Getenv("KUBECONFIG") == "" {
		fmt.Fprintln(os.Stderr, "KUBECONFIG is not set: run the end-to-end tests with `make e2e`")
		os.Exit(1)
	}
	code := m.Run()
	// Helm leaves the CRDs it installed; the next run starts from a cluster without them.
	if out, err := runErr("kubectl", "delete", "--ignore-not-found", "-f", "config/crd/bases"); err != nil {
		fmt.Fprintf(os.Stderr, "failed to delete CRDs: %v\n%s", err, out)
	}
	os.Exit(code)
}

func newClient(t *testing.T) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatalf("failed to load kubeconfig: %v", err)
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("failed to create client: %v", err)
	}
	return c
}

// testLocalExecutorKeepsToItsNamespacesState: with the local executor the manager fills
// in a passphrase for file:// backends on its volume, so a Stack naming another
// namespace's state directory would open that namespace's stacks. It stalls instead,
// naming the path, and no Update is ever created for it.
func testLocalExecutorKeepsToItsNamespacesState(t *testing.T, c client.Client, ns string) {
	t.Helper()
	g := NewWithT(t)
	backend := "file:///var/lib/stackwright/state/e2e-victim"
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: thief
spec:
  stack: e2e
  programRef:
    name: files
  backend: `+backend+`
`))
	g.Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "thief"}, &st)).To(Succeed())
		stalled := meta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(pulumiv1.ReasonSpecInvalid))
		g.Expect(stalled.Message).To(ContainSubstring("backend " + backend + " is outside this namespace's state directory"))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	var list v1alpha1.UpdateList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: "thief"})).To(Succeed())
	g.Expect(list.Items).To(BeEmpty(), "an Update ran against another namespace's state")
	run(t, "kubectl", "delete", "-n", ns, "stack/thief", "--timeout=2m")
}

// TestInstall_Namespaced_IgnoresOtherNamespacesAndUpgradesInPlace installs the chart with
// the local executor, scoped to one namespace, and checks that the manager reconciles
// Stacks there, cannot even read Stacks elsewhere and leaves them alone, keeps a Stack to
// its namespace's state; then upgrades the release with changed values and checks the
// Stack stays Ready with nothing re-applied. (The install from deploy/install.yaml, a
// manager Pod's replacement and the upgrade between releases are TestInstall_FromRegistry's.)
func TestInstall_Namespaced_IgnoresOtherNamespacesAndUpgradesInPlace(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t)
	const watched, other = "e2e-tenant", "e2e-outside"
	createNamespace(t, c, watched)
	createNamespace(t, c, other)
	t.Cleanup(func() { deleteNamespace(t, c, other) })
	t.Cleanup(func() { deleteNamespace(t, c, watched) })
	// The local executor in a cluster: engine runs in the manager Pod, state on its volume,
	// for the one namespace it may serve.
	values := []string{"--set", "executor=local", "--set", "watchNamespaces={" + watched + "}"}
	helmInstall(t, "install", values...)
	pod := waitManager(t, c)
	assertRestricted(t, pod)

	sa := "system:serviceaccount:" + systemNamespace + ":stackwright-manager"
	for _, check := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "stacks.pulumi.com", "-n", watched}, "yes"},
		{[]string{"list", "stacks.pulumi.com", "-n", other}, "no"},
		{[]string{"list", "stacks.pulumi.com", "--all-namespaces"}, "no"},
		{[]string{"get", "secrets", "-n", other}, "no"},
	} {
		out, _ := runErr("kubectl", append([]string{"auth", "can-i", "--as=" + sa}, check.args...)...)
		g.Expect(strings.TrimSpace(out)).To(Equal(check.want), "can-i %v", check.args)
	}

	applyStack(t, watched)
	applyStack(t, other)
	waitStackReady(g, c, watched, "files")
	var outside pulumiv1.Stack
	g.Consistently(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: other, Name: "files"}, &outside)).To(Succeed())
		g.Expect(outside.Finalizers).To(BeEmpty())
		g.Expect(outside.Status.Conditions).To(BeEmpty())
	}).WithTimeout(15*time.Second).WithPolling(time.Second).Should(Succeed(), "a Stack outside the watched namespaces was touched")
	testLocalExecutorKeepsToItsNamespacesState(t, c, watched)

	before := updates(g, c, watched)
	helmInstall(t, "upgrade", append(values, "--set", "maxConcurrentUpdates=3", "--set", "logLevel=debug")...)
	next := waitManager(t, c)
	g.Expect(next.Name).NotTo(Equal(pod.Name), "the upgrade changed the Pod template")
	g.Expect(strings.Join(next.Spec.Containers[0].Args, " ")).To(ContainSubstring("--max-concurrent-updates=3"))
	assertSettled(t, c, watched, "files", before)
	run(t, "kubectl", "delete", "-n", watched, "stack/files", "--timeout=5m")
}

// helmInstall installs or upgrades the chart as release "stackwright" and uninstalls it
// (and the CRDs, which Helm leaves) when the test ends.
func helmInstall(t *testing.T, verb string, args ...string) {
	t.Helper()
	base := []string{verb, "stackwright", "charts/stackwright", "-n", systemNamespace, "--wait", "--timeout=5m"}
	if verb == "install" {
		// An earlier test's install may still be going: its namespace, terminating, would
		// take the new install's objects with it.
		NewWithT(t).Eventually(func() string {
			phase, err := runErr("kubectl", "get", "namespace", systemNamespace, "--ignore-not-found", "-o", "jsonpath={.status.phase}")
			if err != nil {
				return "unknown: " + err.Error()
			}
			return strings.TrimSpace(phase)
		}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(BeElementOf("", string(corev1.NamespaceActive)), "namespace %s is still terminating", systemNamespace)
		base = append(base, "--create-namespace")
		t.Cleanup(func() {
			if out, err := runErr("helm", "uninstall", "stackwright", "-n", systemNamespace, "--wait", "--timeout=5m"); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, out)
			}
			_, _ = runErr("kubectl", "delete", "namespace", systemNamespace, "--ignore-not-found", "--timeout=3m")
		})
	}
	base = append(base, testingValues...)
	run(t, "helm", append(base, args...)...)
}

// assertSettled checks for 10 s that the Stack stays Ready and no Update is created. Its
// callers wait for the new manager to hold the leader Lease first (waitManager), and a new
// leader reconciles every Stack within a second or two of that: 10 s covers it.
func assertSettled(t *testing.T, c client.Client, ns, name string, before []string) {
	t.Helper()
	NewWithT(t).Consistently(func(g Gomega) {
		var stack pulumiv1.Stack
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &stack)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(stack.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue())
		g.Expect(updates(g, c, ns)).To(ConsistOf(before), "a new Update was created")
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// assertRestricted checks the manager Pod against the restricted Pod Security profile
// and that it really runs as a non-root user with a read-only root filesystem.
func assertRestricted(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	g := NewWithT(t)
	psc := pod.Spec.SecurityContext
	g.Expect(psc).NotTo(BeNil())
	g.Expect(psc.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(psc.SeccompProfile).NotTo(BeNil())
	g.Expect(psc.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	for _, ctr := range pod.Spec.Containers {
		sc := ctr.SecurityContext
		g.Expect(sc).NotTo(BeNil(), ctr.Name)
		g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), ctr.Name)
		g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), ctr.Name)
		g.Expect(sc.Capabilities).NotTo(BeNil(), ctr.Name)
		g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), ctr.Name)
	}
	// The kubelet reports the identity the container really got.
	for _, st := range pod.Status.ContainerStatuses {
		if st.User != nil && st.User.Linux != nil {
			g.Expect(st.User.Linux.UID).NotTo(BeZero(), st.Name)
		}
	}
	// Admission agrees: a namespace enforcing "restricted" admits the same Pod spec.
	ns := "e2e-psa-" + fmt.Sprint(time.Now().Unix())
	c := newClient(t)
	g.Expect(c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}})).To(Succeed())
	defer func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) }()
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Spec: *pod.Spec.DeepCopy()}
	probe.Spec.NodeName, probe.Spec.Volumes = "", nil
	probe.Spec.ServiceAccountName, probe.Spec.DeprecatedServiceAccount = "default", ""
	for i := range probe.Spec.Containers {
		probe.Spec.Containers[i].VolumeMounts = nil
	}
	err := c.Create(context.Background(), probe, client.DryRunAll)
	g.Expect(err).NotTo(HaveOccurred(), "the restricted profile refuses the manager Pod")
}

// testRunnerPodPerUpdate: a Stack runs in short-lived runner Pods in its own namespace,
// which enforces the restricted Pod Security profile, as its own ServiceAccount, with its state on a volume
// of that namespace; deleting it destroys its files through another runner.
func testRunnerPodPerUpdate(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c

	const ns = "e2e-job"
	g.Expect(c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}})).To(Succeed())
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	run(t, "kubectl", "apply", "-n", ns, "-f", "config/samples/pulumi_v1_program_files.yaml")
	manifest := `apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
` + stateClaimYAML + `---
apiVersion: v1
kind: Secret
metadata:
  name: files-passphrase
stringData:
  passphrase: e2e-only
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: files
spec:
  stack: e2e
  programRef:
    name: files
  backend: file:///state/backend
  serviceAccountName: deployer
  envRefs:
    PULUMI_CONFIG_PASSPHRASE:
      type: Secret
      secret:
        name: files-passphrase
        key: passphrase
    STACKWRIGHT_TESTING_ROOT:
      type: Literal
      literal:
        value: /state/files
  config:
    message: Hello from a runner Pod
  destroyOnFinalize: true
` + stateMountYAML
	path := filepath.Join(t.TempDir(), "stack.yaml")
	g.Expect(os.WriteFile(path, []byte(manifest), 0o600)).To(Succeed())
	run(t, "kubectl", "apply", "-n", ns, "-f", path)
	NewWithT(t).Eventually(func(g Gomega) { waitStackReadyOnce(g, c, ns, "files") }).
		WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "Stack not Ready\n%s", describeNamespace(ns))

	// One runner Pod per Update, as the Stack's ServiceAccount, none left running.
	ups := updates(g, c, ns)
	g.Expect(ups).To(HaveLen(1))
	var pods corev1.PodList
	g.Expect(c.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1), "runner Pods")
	g.Expect(pods.Items[0].Spec.ServiceAccountName).To(Equal("deployer"))
	NewWithT(t).Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(&pods.Items[0]), &p)).To(Succeed())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
	}).WithTimeout(time.Minute).Should(Succeed(), "the runner Pod did not finish")

	files := filepath.Join(claimHostPath(g, c, ns, "state"), "files")
	greeting, err := os.ReadFile(filepath.Join(files, "greeting.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(greeting)).To(Equal("Hello from a runner Pod"))

	run(t, "kubectl", "delete", "-n", ns, "stack/files", "--timeout=5m")
	_, err = os.Stat(filepath.Join(files, "greeting.txt"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "destroy left greeting.txt behind")
}

// testKilledRunnerIsRetried kills a runner Pod in the middle of an up:
// the Update ends Failed with RunnerLost, the next runner removes the lock the dead one
// left in the S3 backend (a versitygw server in the cluster), and the Stack converges
// without re-creating what the first run had created.
func testKilledRunnerIsRetried(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c

	const ns = "e2e-job-kill"
	s3 := jc.s3
	backend := s3.bucket(t, "state", "")
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	manifest := stateClaimYAML + "---\n" + s3CredentialsYAML + `---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: slow
program:
  resources:
    before:
      type: stackwright-testing:index:File
      properties:
        path: before.txt
        content: created before the runner died
    nap:
      type: stackwright-testing:index:Sleep
      properties:
        seconds: 30
      options:
        dependsOn:
        - ${before}
    after:
      type: stackwright-testing:index:File
      properties:
        path: after.txt
        content: created after the nap
      options:
        dependsOn:
        - ${nap}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: slow
spec:
  stack: e2e
  programRef:
    name: slow
  backend: ` + backend + `
  envRefs:
` + s3EnvRefsYAML + `    STACKWRIGHT_TESTING_ROOT:
      type: Literal
      literal:
        value: /state/files
` + stateMountYAML
	path := filepath.Join(t.TempDir(), "stack.yaml")
	g.Expect(os.WriteFile(path, []byte(manifest), 0o600)).To(Succeed())
	run(t, "kubectl", "apply", "-n", ns, "-f", path)

	// Once the first file exists, the runner is in the middle of the nap.
	var files string
	NewWithT(t).Eventually(func(g Gomega) {
		files = filepath.Join(claimHostPath(g, c, ns, "state"), "files")
		_, err := os.Stat(filepath.Join(files, "before.txt"))
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the first run never started\n%s", describeNamespace(ns))
	// SIGKILL, as the OOM killer or a node's loss would: no chance to release the lock.
	// (Deleting the Pod would send SIGTERM, and the runner would cancel cleanly.) Twice in
	// a row: each lost run ends the same way, and counts as a failed run.
	var lost, deadLocks []string
	for attempt := 1; attempt <= 2; attempt++ {
		NewWithT(t).Eventually(func(g Gomega) {
			var list v1alpha1.UpdateList
			g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(attempt))
			// The second run has no new file to show that it is in its nap. It is killed
			// once it holds a lock of its own: it first removes the dead run's lock and then
			// starts its up again, and a kill in between would leave no lock to heal.
			if attempt == 2 {
				g.Expect(slices.ContainsFunc(s3.objects("state", ".pulumi/locks"), func(k string) bool {
					return !slices.Contains(deadLocks, k)
				})).To(BeTrue(), "the second run holds no lock of its own yet")
			}
			var running []string
			for _, u := range list.Items {
				if u.Status.Phase == v1alpha1.UpdatePhaseRunning && !slices.Contains(lost, u.Name) {
					running = append(running, u.Name)
				}
			}
			g.Expect(running).To(HaveLen(1))
			g.Expect(killRunners("slow-")).To(Equal(1), "runner processes killed")
			lost = append(lost, running[0])
			deadLocks = s3.objects("state", ".pulumi/locks")
		}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "run %d never started\n%s", attempt, describeNamespace(ns))
		NewWithT(t).Eventually(func(g Gomega) {
			var u v1alpha1.Update
			g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: lost[attempt-1]}, &u)).To(Succeed())
			g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
			g.Expect(u.Status.Result).To(Equal(v1alpha1.UpdateResultFailed))
			cond := meta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ReasonRunnerLost), cond.Message)
		}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the killed runner's Update did not end RunnerLost\n%s", describeNamespace(ns))
	}
	g.Expect(scrapeManager(t, "kill")).To(ContainSubstring(`stackwright_updates_total{namespace="` + ns + `",operation="up",result="failed"} 2`))

	NewWithT(t).Eventually(func(g Gomega) { waitStackReadyOnce(g, c, ns, "slow") }).
		WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "Stack did not converge after the lost runner\n%s", describeNamespace(ns))
	var list v1alpha1.UpdateList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var last *v1alpha1.Update
	for i := range list.Items {
		if u := &list.Items[i]; u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
			last = u
		}
	}
	g.Expect(last).NotTo(BeNil())
	g.Expect(last.Status.Message).To(ContainSubstring("stale lock(s) held by run(s) that are gone"), "the retry did not heal the dead runner's lock")
	// "before" was created by the killed run and is in the state: the retry keeps it.
	g.Expect(last.Status.Changes["create"]).To(BeNumerically("<=", 2), "changes %v: the retry re-created what the first run had made", last.Status.Changes)
	for _, f := range []string{"before.txt", "after.txt"} {
		_, err := os.Stat(filepath.Join(files, f))
		g.Expect(err).NotTo(HaveOccurred(), f)
	}
	// The state is in the S3 server, and no lock is left there.
	g.Expect(s3.objects("state", ".pulumi/stacks")).NotTo(BeEmpty(), "no stack state in the S3 backend")
	g.Expect(s3.objects("state", ".pulumi/locks")).To(BeEmpty(), "locks left in the S3 backend")
}

// testStacksActAsTheirServiceAccount runs the same program, which
// creates a ConfigMap with the Pod's in-cluster credentials, in two namespaces: where the
// Stack's ServiceAccount may create ConfigMaps it succeeds; where it may not, the Update
// fails with the API server's Forbidden. Each namespace brings S3 keys of its own that
// reach only its prefix of the default backend's bucket (docs/operations.md): with them,
// neither can read the other's state, whether from the test or from a runner Pod whose
// Stack names the other's prefix as its backend.
func testStacksActAsTheirServiceAccount(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	// The Stacks name no backend: the install's default, one prefix per namespace in a
	// bucket of the in-cluster S3 server, applies.

	keys := map[string]s3tenants.Tenant{}
	for ns, mayWrite := range map[string]bool{"e2e-may-write": true, "e2e-may-not": false} {
		createNamespace(t, c, ns)
		t.Cleanup(func() { deleteNamespace(t, c, ns) })
		if mayWrite {
			run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, configMapWriterYAML))
		}
		keys[ns] = jc.s3.tenantKeys(t, ns)
		applyConfigMapStack(t, ns, tenantCredentialsYAML(keys[ns]), "", "the Stack's own ServiceAccount")
	}

	NewWithT(t).Eventually(func(g Gomega) { waitStackReadyOnce(g, c, "e2e-may-write", "cm") }).
		WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace("e2e-may-write"))
	var cm corev1.ConfigMap
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "e2e-may-write", Name: "made-by-stack"}, &cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("by", "the Stack's own ServiceAccount"))

	NewWithT(t).Eventually(func(g Gomega) {
		var list v1alpha1.UpdateList
		g.Expect(c.List(context.Background(), &list, client.InNamespace("e2e-may-not"))).To(Succeed())
		g.Expect(list.Items).NotTo(BeEmpty())
		u := list.Items[0]
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
		// The provider applies server-side: the API server refuses the patch.
		g.Expect(u.Status.Message).To(ContainSubstring("forbidden"))
		g.Expect(u.Status.Message).To(ContainSubstring(`resource "configmaps"`))
		g.Expect(u.Status.Message).To(ContainSubstring("system:serviceaccount:e2e-may-not:deployer"))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace("e2e-may-not"))
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "e2e-may-not", Name: "made-by-stack"}, &cm)
	g.Expect(err).To(HaveOccurred(), "a Stack without the right created a ConfigMap")
	g.Expect(jc.s3.objects(jc.defaultBucket, "e2e-may-write/.pulumi/stacks")).NotTo(BeEmpty(), "the default backend has no state under the Stack's namespace")
	testTenantKeysReachOnlyTheirPrefix(t, jc, keys)
	// Deleted before their namespaces, so that each destroy runs in a runner Pod as its
	// Stack's ServiceAccount.
	for _, ns := range []string{"e2e-may-write", "e2e-may-not"} {
		run(t, "kubectl", "delete", "-n", ns, "stack/cm", "--timeout=5m")
	}
	err = c.Get(context.Background(), client.ObjectKey{Namespace: "e2e-may-write", Name: "made-by-stack"}, &cm)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "destroyOnFinalize left the ConfigMap behind: %v", err)
}

// testTenantKeysReachOnlyTheirPrefix: once both namespaces have state under their prefixes
// of the default backend's bucket, each one's keys (keys, by namespace) are refused the
// other's state (AccessDenied from the S3 server, asked from the test), which the root's
// keys read; and a Stack in e2e-may-write whose backend is e2e-may-not's prefix fails
// with AccessDenied in its runner Pod.
func testTenantKeysReachOnlyTheirPrefix(t *testing.T, jc *jobCluster, keys map[string]s3tenants.Tenant) {
	g, c := NewWithT(t), jc.c
	ctx := context.Background()
	bucket := jc.defaultBucket
	for _, pair := range [][2]string{{"e2e-may-write", "e2e-may-not"}, {"e2e-may-not", "e2e-may-write"}} {
		own, other := pair[0], pair[1]
		tenant := jc.s3.root.As(keys[own].Access, keys[own].Secret)
		meta := s3tenants.Request{Method: http.MethodGet, Path: "/" + bucket + "/" + other + "/.pulumi/meta.yaml"}
		_, err := jc.s3.root.Do(ctx, meta)
		g.Expect(err).NotTo(HaveOccurred(), "the root's keys cannot read %s's state", other)
		_, err = tenant.Do(ctx, meta)
		g.Expect(s3tenants.Code(err)).To(Equal("AccessDenied"), "%s's keys read %s's state: %v", own, other, err)
		_, err = tenant.List(ctx, bucket, other+"/", "")
		g.Expect(s3tenants.Code(err)).To(Equal("AccessDenied"), "%s's keys listed %s's state: %v", own, other, err)
		_, err = tenant.List(ctx, bucket, "", "")
		g.Expect(s3tenants.Code(err)).To(Equal("AccessDenied"), "%s's keys listed the whole bucket: %v", own, err)
		l, err := tenant.List(ctx, bucket, own+"/", "")
		g.Expect(err).NotTo(HaveOccurred(), "%s's keys cannot list its own state", own)
		g.Expect(l.Keys).To(ContainElement(own + "/.pulumi/meta.yaml"))
	}

	// The same from a runner Pod: e2e-may-write's keys on e2e-may-not's prefix, the stack
	// e2e-may-not's own Stack uses.
	const ns = "e2e-may-write"
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: peek
spec:
  stack: e2e
  programRef:
    name: cm
  serviceAccountName: deployer
  backend: `+jc.s3.bucket(t, bucket, "e2e-may-not")+`
  envRefs:
`+s3EnvRefsYAML))
	NewWithT(t).Eventually(func(g Gomega) {
		var list v1alpha1.UpdateList
		g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		var failed []string
		for _, u := range list.Items {
			if u.Spec.StackName == "peek" && u.Status.Phase == v1alpha1.UpdatePhaseFailed {
				failed = append(failed, u.Status.Message)
			}
		}
		g.Expect(failed).NotTo(BeEmpty())
		g.Expect(failed).To(HaveEach(ContainSubstring("api error AccessDenied")))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "a Stack with e2e-may-write's keys on e2e-may-not's state was not refused\n%s", describeNamespace(ns))
	run(t, "kubectl", "delete", "-n", ns, "stack/peek", "--timeout=5m")
}

// stateClaimYAML is a claim for a Stack's state, and stateMountYAML the end of a Stack
// spec that mounts it at /state in its runner Pods (file:// backends under the Job
// executor live on such a volume).
const (
	stateClaimYAML = `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: state
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
`
	stateMountYAML = `  workspaceTemplate:
    spec:
      podTemplate:
        spec:
          volumes:
          - name: state
            persistentVolumeClaim:
              claimName: state
          containers:
          - name: pulumi
            volumeMounts:
            - name: state
              mountPath: /state
`
)
