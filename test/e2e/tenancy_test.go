//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor/job"
)

// The adversarial suite: tenant A, whose user may act only in its own namespace, tries
// the attacks of the tenant-isolation review against an install shared with tenant B,
// whose canary Stack and Secret must come through untouched.

// starvationBound is how long tenant B's Stack may take to become Ready while tenant A
// holds what it can of the runner slots; one Stack alone takes about 30 s here.
const starvationBound = 4 * time.Minute

// tenantLabel is the namespace label the e2e install shares runner slots by
// (--tenant-label): namespaces with the same value are one tenant.
const tenantLabel = "stackwright.dev/e2e-tenant"

// tenantRBACYAML lets the user tenant act on Stackwright's objects, Secrets, ConfigMaps and
// Pods in one namespace and nowhere else, as a platform would grant an app team.
func tenantRBACYAML(user string) string {
	return `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: tenant
rules:
- apiGroups: [pulumi.com]
  resources: [stacks, programs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [stackwright.dev]
  resources: [updates]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets, configmaps, serviceaccounts]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [pods, pods/log]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: tenant
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: tenant
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: ` + user + `
`
}

// tenant is one tenant's namespace and the user that acts there.
type tenant struct {
	ns, user string
}

func newTenant(t *testing.T, c client.Client, ns string) tenant {
	t.Helper()
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	tn := tenant{ns: ns, user: ns + "-user"}
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, tenantRBACYAML(tn.user)))
	return tn
}

// apply applies manifest in the tenant's namespace as the tenant's user, and returns what
// kubectl printed (admission warnings included).
func (tn tenant) apply(t *testing.T, manifest string) string {
	t.Helper()
	return run(t, "kubectl", "--as="+tn.user, "apply", "-n", tn.ns, "-f", writeManifest(t, manifest))
}

// sleepStackYAML is a Stack whose program sleeps for seconds, with the install's default
// S3 backend; spec is added to its spec (lines indented two spaces).
func sleepStackYAML(name string, seconds int, spec string) string {
	return fmt.Sprintf(`---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: %[1]s
program:
  resources:
    nap:
      type: stackwright-testing:index:Sleep
      properties:
        seconds: %[2]d
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: %[1]s
spec:
  stack: %[1]s
  programRef:
    name: %[1]s
%[3]s  envRefs:
`, name, seconds, spec) + s3EnvRefsYAML
}

// unschedulable is a workspaceTemplate whose runner Pods no node accepts.
const unschedulable = `  workspaceTemplate:
    spec:
      podTemplate:
        spec:
          containers:
          - name: pulumi
          nodeSelector:
            stackwright.dev/e2e: no-such-node
`

// testTenantCannotStarveOrSpoofAnother: tenant A, with two namespaces labelled as one
// tenant (tenantLabel), queues in the first four Stacks whose runner Pods no node
// schedules and one that sleeps for 55 minutes, and one more in the second; it plants a
// Secret under the name of the work Secret one of its queued Updates will get. The
// per-tenant share keeps A's two namespaces to one runner slot together (the second
// namespace's Update waits, saying so in status.queue), the pending timeout frees it from
// each unschedulable Pod, the planted Secret is refused and left as it was, and tenant B's
// Stack becomes Ready within starvationBound while its canary Secret is untouched.
func testTenantCannotStarveOrSpoofAnother(t *testing.T, jc *jobCluster) {
	g := NewWithT(t)
	c := jc.c
	a, b := newTenant(t, c, "e2e-tenant-a"), newTenant(t, c, "e2e-tenant-b")
	a2 := newTenant(t, c, "e2e-tenant-a2")
	for _, ns := range []string{a.ns, a2.ns} {
		run(t, "kubectl", "label", "namespace", ns, tenantLabel+"=a")
	}

	// B's canary: a Secret A must never read or change.
	b.apply(t, `apiVersion: v1
kind: Secret
metadata:
  name: canary
stringData:
  secret: tenant-b-only
`)
	var canary corev1.Secret
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: b.ns, Name: "canary"}, &canary)).To(Succeed())
	out, err := runErr("kubectl", "--as="+a.user, "get", "secret", "canary", "-n", b.ns)
	g.Expect(err).To(HaveOccurred(), "tenant A read tenant B's Secret: %s", out)
	g.Expect(out).To(ContainSubstring("Forbidden"))

	// A: the first unschedulable Stack takes A's one slot; the next ones queue behind it,
	// the first of them (whose Update A then spoofs) before the others, the 55-minute
	// sleep last, so that it takes A's slot only once the spoofed Update has had its turn.
	a.apply(t, s3CredentialsYAML+sleepStackYAML("stuck-0", 1, unschedulable))
	waitUpdatePhase(g, c, a.ns, "stuck-0", v1alpha1.UpdatePhaseRunning)
	a.apply(t, s3CredentialsYAML+sleepStackYAML("stuck-1", 1, unschedulable))
	victim := waitUpdatePhase(g, c, a.ns, "stuck-1", "")
	// A plants the work Secret of stuck-1's queued Update before the manager creates it.
	planted := job.WorkSecretName(victim.Name)
	a.apply(t, `apiVersion: v1
kind: Secret
metadata:
  name: `+planted+`
stringData:
  work.json: '{"request":{"env":{"PATH":"/tmp"}}}'
`)
	var plantedBefore corev1.Secret
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: planted}, &plantedBefore)).To(Succeed())
	a.apply(t, s3CredentialsYAML+sleepStackYAML("stuck-2", 1, unschedulable)+sleepStackYAML("stuck-3", 1, unschedulable))
	waitUpdatePhase(g, c, a.ns, "stuck-3", "")
	a.apply(t, s3CredentialsYAML+sleepStackYAML("nap", 55*60, ""))
	// A's second namespace shares A's one slot: its Update waits behind A's, and says why.
	a2.apply(t, s3CredentialsYAML+sleepStackYAML("elsewhere", 1, unschedulable))
	g.Eventually(func(g Gomega) {
		u := latestUpdate(g, c, a2.ns, "elsewhere")
		g.Expect(u.Status.Phase).NotTo(Equal(v1alpha1.UpdatePhaseRunning), "tenant A ran a second Update at once from its other namespace")
		g.Expect(u.Status.Queue).NotTo(BeNil())
		g.Expect(u.Status.Queue.Reason).To(Equal(v1alpha1.QueueReasonTenantAtLimit))
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(a2.ns))

	// B applies its Stack while A's queue is full.
	start := time.Now()
	b.apply(t, s3CredentialsYAML+sleepStackYAML("web", 1, ""))
	g.Eventually(func(g Gomega) {
		waitStackReadyOnce(g, c, b.ns, "web")
	}).WithTimeout(starvationBound).WithPolling(2*time.Second).Should(Succeed(),
		"tenant B's Stack was not Ready within %s while tenant A held its share\n%s\n%s", starvationBound, describeNamespace(b.ns), describeNamespace(a.ns))
	t.Logf("tenant B's Stack was Ready %s after it was applied", time.Since(start).Round(time.Second))

	// The planted Secret made stuck-1's Update fail, naming it, and was left as it was.
	g.Eventually(func(g Gomega) {
		var u v1alpha1.Update
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: victim.Name}, &u)).To(Succeed())
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseFailed))
		g.Expect(u.Status.Message).To(ContainSubstring(planted))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(a.ns))
	var plantedAfter corev1.Secret
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: planted}, &plantedAfter)).To(Succeed())
	g.Expect(plantedAfter.ResourceVersion).To(Equal(plantedBefore.ResourceVersion), "the planted Secret was changed")

	// The unschedulable runner freed its slot: its Update failed saying so (and the Stack
	// retries, with an Update that again waits for a node).
	g.Eventually(func(g Gomega) {
		var list v1alpha1.UpdateList
		g.Expect(c.List(context.Background(), &list, client.InNamespace(a.ns), client.MatchingLabels{v1alpha1.StackLabel: "stuck-0"})).To(Succeed())
		var messages []string
		for _, u := range list.Items {
			messages = append(messages, u.Status.Message)
		}
		g.Expect(messages).To(ContainElement(ContainSubstring("was not scheduled within")))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(a.ns))

	// B's canary is untouched.
	var after corev1.Secret
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: b.ns, Name: "canary"}, &after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(canary.ResourceVersion), "tenant B's canary Secret was changed")
	g.Expect(after.Data).To(Equal(canary.Data))
}

// testVolumeOutsideAllowListRefused: a tenant's runner Pod may not mount an NFS share (nor
// any volume type outside the manager's allow-list): apply warns, and the Stack stalls with
// a message naming the volume and its type, without a runner Pod ever being created.
func testVolumeOutsideAllowListRefused(t *testing.T, jc *jobCluster) {
	g := NewWithT(t)
	c := jc.c
	a := newTenant(t, c, "e2e-tenant-nfs")
	out := a.apply(t, s3CredentialsYAML+sleepStackYAML("share", 1, `  workspaceTemplate:
    spec:
      podTemplate:
        spec:
          containers:
          - name: pulumi
          volumes:
          - name: nodes-share
            nfs:
              server: 127.0.0.1
              path: /export
`))
	g.Expect(out).To(ContainSubstring("runner Pods may not mount by default"), "no warning at apply time")
	g.Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: "share"}, &st)).To(Succeed())
		stalled := meta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(And(ContainSubstring(`volume "nodes-share" is of type nfs`), ContainSubstring("--runner-allowed-volume-types")))
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(a.ns))
	g.Expect(runnerPods(g, c, a.ns)).To(BeZero(), "a runner Pod was created")

	// Placement is the platform's: a system taint, every taint, a tenant's choice of node
	// pool, an AppArmor annotation and an inline CSI volume, each refused by name.
	out = a.apply(t, sleepStackYAML("placed", 1, `  workspaceTemplate:
    spec:
      podTemplate:
        metadata:
          annotations:
            container.apparmor.security.beta.kubernetes.io/pulumi: unconfined
        spec:
          containers:
          - name: pulumi
          nodeSelector:
            pool: platform
          tolerations:
          - key: node-role.kubernetes.io/control-plane
            operator: Exists
          - operator: Exists
          volumes:
          - name: secrets-store
            csi:
              driver: secrets-store.csi.k8s.io
`))
	for _, flag := range []string{"--runner-allowed-node-selector-keys", "--runner-allowed-toleration-keys", "--runner-allowed-annotation-prefixes", "--runner-allowed-csi-drivers"} {
		g.Expect(out).To(ContainSubstring(flag), "no warning at apply time naming %s", flag)
	}
	g.Eventually(func(g Gomega) {
		var st pulumiv1.Stack
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: "placed"}, &st)).To(Succeed())
		stalled := meta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		for _, want := range []string{`nodeSelector key "pool"`, `toleration of taint "node-role.kubernetes.io/control-plane"`, `toleration of taint "(every taint)"`,
			`pod annotation "container.apparmor.security.beta.kubernetes.io/pulumi"`, `volume "secrets-store" of CSI driver "secrets-store.csi.k8s.io"`} {
			g.Expect(stalled.Message).To(ContainSubstring(want))
		}
	}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "\n%s", describeNamespace(a.ns))
	g.Expect(runnerPods(g, c, a.ns)).To(BeZero(), "a runner Pod was created")
}

// testMetricsRefuseAnonymousScrape: the manager's metrics, which name every tenant's
// Stacks, are not served to a scrape without a token. The API server's service proxy does
// not pass the caller's credentials on, so its request reaches the manager anonymous.
func testMetricsRefuseAnonymousScrape(t *testing.T, _ *jobCluster) {
	out, err := runErr("kubectl", "get", "--raw", "/api/v1/namespaces/"+systemNamespace+"/services/https:stackwright-metrics:https-metrics/proxy/metrics")
	g := NewWithT(t)
	g.Expect(err).To(HaveOccurred(), "an anonymous scrape got the metrics")
	// kubectl's own credentials are good (every other call of the suite uses them), so the
	// 401 it reports came from the manager, through the proxy.
	g.Expect(out).To(Or(ContainSubstring("Unauthorized"), ContainSubstring("the server has asked for the client to provide credentials")))
	g.Expect(out).NotTo(ContainSubstring("stackwright_"))
}

// waitUpdatePhase waits for the Update of the Stack's first attempt to exist (and, when
// phase is set, to be in that phase), and returns it.
func waitUpdatePhase(g Gomega, c client.Client, ns, stack string, phase v1alpha1.UpdatePhase) v1alpha1.Update {
	var u v1alpha1.Update
	g.Eventually(func(g Gomega) {
		u = latestUpdate(g, c, ns, stack)
		if phase != "" {
			g.Expect(u.Status.Phase).To(Equal(phase))
		}
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "\n%s", describeNamespace(ns))
	return u
}

// latestUpdate is the Stack's newest Update.
func latestUpdate(g Gomega, c client.Client, ns, stack string) v1alpha1.Update {
	var list v1alpha1.UpdateList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: stack})).To(Succeed())
	g.Expect(list.Items).NotTo(BeEmpty())
	latest := list.Items[0]
	for _, u := range list.Items[1:] {
		if u.CreationTimestamp.After(latest.CreationTimestamp.Time) {
			latest = u
		}
	}
	return latest
}

// runnerPods counts the runner Pods in ns that have not finished.
func runnerPods(g Gomega, c client.Client, ns string) int {
	var pods corev1.PodList
	g.Expect(c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "stackwright-runner"})).To(Succeed())
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}
