//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

const (
	systemNamespace = "stackwright-system"
	managerLabel    = "app.kubernetes.io/name=stackwright"
	// filesRoot is where the test Stacks' File resources go: on the manager's data volume,
	// whose host directory the test reads to see what the engine really did.
	filesRoot = "/var/lib/stackwright/e2e-files"
)

// root is the repository root; the tests run binaries from its ./bin.
var root string

// run runs a command from ./bin against the cluster and fails the test on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(name string, args ...string) (string, error) {
	return execErr("", filepath.Join(root, "bin", name), args...)
}

// runStdin is run with stdin as the command's standard input, as a runbook feeds
// `kubectl apply -f -`.
func runStdin(t *testing.T, stdin, name string, args ...string) string {
	t.Helper()
	out, err := execErr(stdin, filepath.Join(root, "bin", name), args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// execErr runs the program at path from the repository root, with stdin as its standard
// input, and returns its output, stdout and stderr together.
func execErr(stdin, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// applyStack applies the "files" Program and a Stack running it in ns, with its files
// written below filesRoot/ns.
func applyStack(t *testing.T, ns string) {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: files-passphrase
  namespace: %[1]s
stringData:
  passphrase: e2e-only
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: files
  namespace: %[1]s
spec:
  stack: e2e
  programRef:
    name: files
  envRefs:
    PULUMI_CONFIG_PASSPHRASE:
      type: Secret
      secret:
        name: files-passphrase
        key: passphrase
    STACKWRIGHT_TESTING_ROOT:
      type: Literal
      literal:
        value: %[2]s/%[1]s
  config:
    message: Hello from the cluster
  destroyOnFinalize: true
`, ns, filesRoot)
	path := filepath.Join(t.TempDir(), "stack.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "kubectl", "apply", "-n", ns, "-f", "config/samples/pulumi_v1_program_files.yaml")
	run(t, "kubectl", "apply", "-f", path)
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("failed to create namespace %s: %v", name, err)
	}
}

func deleteNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("failed to delete namespace %s: %v", name, err)
		return
	}
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(ns), ns))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(BeTrue(), "namespace %s not deleted", name)
}

// waitStackReadyOnce checks Ready=True at the Stack's current generation and returns the
// Stack.
func waitStackReadyOnce(g Gomega, c client.Client, ns, name string) *pulumiv1.Stack {
	var stack pulumiv1.Stack
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &stack)).To(Succeed())
	ready := meta.FindStatusCondition(stack.Status.Conditions, pulumiv1.ConditionReady)
	g.Expect(ready).NotTo(BeNil(), "no Ready condition yet")
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s: %s", ready.Reason, ready.Message)
	g.Expect(ready.ObservedGeneration).To(Equal(stack.Generation))
	return &stack
}

// describeNamespace is what a failure in a tenant namespace needs to be acted on.
func describeNamespace(ns string) string {
	// A bare "updates" is auto.pulumi.com's once both CRDs are installed: the API server
	// lists CRD groups by name, and kubectl takes the first. The one-off requests are asked
	// for on their own: an install without their CRD would fail the whole listing.
	out, _ := runErr("kubectl", "-n", ns, "get", "stacks,updates.stackwright.dev,jobs,pods,pvc", "-o", "wide")
	requests, _ := runErr("kubectl", "-n", ns, "get", "updates.auto.pulumi.com", "-o", "wide")
	pods, _ := runErr("kubectl", "-n", ns, "logs", "-l", "app.kubernetes.io/name=stackwright-runner", "--tail=40", "--prefix")
	return out + requests + "\n--- runner logs ---\n" + pods + "\n" + describeManager()
}

// waitStackReady waits for Ready=True at the Stack's current generation.
func waitStackReady(g Gomega, c client.Client, ns, name string) *pulumiv1.Stack {
	var stack pulumiv1.Stack
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &stack)).To(Succeed())
		ready := meta.FindStatusCondition(stack.Status.Conditions, pulumiv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil(), "no Ready condition yet")
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s: %s", ready.Reason, ready.Message)
		g.Expect(ready.ObservedGeneration).To(Equal(stack.Generation))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "Stack %s/%s not Ready", ns, name)
	return &stack
}

func updates(g Gomega, c client.Client, ns string) []string {
	var list v1alpha1.UpdateList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	names := make([]string, 0, len(list.Items))
	for _, u := range list.Items {
		names = append(names, u.Name)
	}
	return names
}

// managerPod returns the running manager Pod.
func managerPod(g Gomega, c client.Client) *corev1.Pod {
	sel, err := metav1.ParseToLabelSelector(managerLabel)
	g.Expect(err).NotTo(HaveOccurred())
	s, err := metav1.LabelSelectorAsSelector(sel)
	g.Expect(err).NotTo(HaveOccurred())
	var pods corev1.PodList
	g.Expect(c.List(context.Background(), &pods, client.InNamespace(systemNamespace), client.MatchingLabelsSelector{Selector: s})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	g.Expect(live).To(HaveLen(1), "manager Pods")
	return &live[0]
}

// managerRestarts is how often the manager Pod's containers have restarted.
func managerRestarts(g Gomega, c client.Client) int32 {
	var n int32
	for _, st := range managerPod(g, c).Status.ContainerStatuses {
		n += st.RestartCount
	}
	return n
}

// waitManager waits for the manager Deployment to be rolled out and one Pod Ready, and
// for that Pod to hold the leader-election Lease, so that the Pod returned is the one
// reconciling.
func waitManager(t *testing.T, c client.Client) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		var deps appsv1.DeploymentList
		g.Expect(c.List(context.Background(), &deps, client.InNamespace(systemNamespace))).To(Succeed())
		g.Expect(deps.Items).To(HaveLen(1))
		d := deps.Items[0]
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(1)))
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
		pod = managerPod(g, c)
		g.Expect(podReady(pod)).To(BeTrue(), "manager Pod %s not Ready", pod.Name)
		var lease coordinationv1.Lease
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: "stackwright.dev"}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).To(HavePrefix(pod.Name+"_"), "leader")
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "manager not running\n%s", describeManager())
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// describeManager is what a failure message needs to be acted on.
func describeManager() string {
	out, _ := runErr("kubectl", "-n", systemNamespace, "describe", "pods")
	logs, _ := runErr("kubectl", "-n", systemNamespace, "logs", "-l", managerLabel, "--tail=60")
	return out + "\n--- manager log ---\n" + logs
}

// claimHostPath is the node directory behind a bound claim (the test runs on the node,
// and the node's volumes are host paths).
func claimHostPath(g Gomega, c client.Client, ns, claim string) string {
	var pvc corev1.PersistentVolumeClaim
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim}, &pvc)).To(Succeed())
	g.Expect(pvc.Spec.VolumeName).NotTo(BeEmpty(), "claim %s/%s not bound", ns, claim)
	var pv corev1.PersistentVolume
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv)).To(Succeed())
	g.Expect(pv.Spec.HostPath).NotTo(BeNil())
	return pv.Spec.HostPath.Path
}

// killRunners SIGKILLs the runner processes on this node (the test runs on the node) of
// the Pods whose host names start with podPrefix (a runner's HOSTNAME is its Job's name,
// which its Pod's name starts with; other tests' runners may be running) and returns how many it killed. The runner is its
// container's PID 1, so the engine processes it started die with it.
func killRunners(podPrefix string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("runner\x00--work=/var/run/stackwright/work/")) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00HOSTNAME="+podPrefix)) && !bytes.HasPrefix(env, []byte("HOSTNAME="+podPrefix)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
