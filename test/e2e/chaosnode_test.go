//go:build e2e

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The node fault campaign (issue 56): a Job-executor install with its state in the
// in-cluster S3 server runs a fleet of Stacks whose desired states keep changing while
// the schedule injects the node's faults, one at a time, each in the middle of an update;
// after each, the fleet must recover, and after all, the invariants below must hold.
// `make chaos-node` runs it in full (CHAOS_NODE_FAULTS, CHAOS_NODE_SEED), `make e2e` a
// short version; unset, it is skipped.
//
// The fleet has every shape a Stack takes in production: plain Stacks, one whose changes
// wait for a person's approval (the test approves each preview), two in a StackRollout's
// rings (their Program changes), and a template instance's Stack (its parameter changes).
const (
	chaosNamespace = "e2e-chaos-node"
	// chaosTenant holds the template's instance; its Stack runs in chaosNamespace.
	chaosTenant = "e2e-chaos-tenant"
	chaosBucket = "chaos"
	// chaosStacks is the count of plain Stacks; each up naps chaosNap seconds, so that
	// faults land while runners run.
	chaosStacks = 4
	chaosNap    = 12
	// chaosGroup is the API group the campaign's install serves its template in.
	chaosGroup = "chaos.e2e.stackwright.dev"
	// The Stacks of the other shapes: the approved one, and the rollout's rings.
	chaosApproved = "approved"
	chaosRing0    = "ring-0"
	chaosRing1    = "ring-1"
	// chaosHog is the Stack the out-of-memory fault changes: its runner's memory limit is
	// chaosHogLimit, and a faulty desired state makes its program allocate chaosHogMiB
	// (the test provider's Hog), past it.
	chaosHog      = "hog"
	chaosHogLimit = "512Mi"
	chaosHogMiB   = 1024
	// chaosRecovery bounds one fault's recovery: every Stack Ready at its desired state.
	chaosRecovery = 10 * time.Minute
)

// faultKind is one kind of fault and how to inject it.
type faultKind struct {
	name string
	// runner says the fault needs a runner Pod of the fleet running.
	runner bool
	inject func(cc *chaosCluster, t *testing.T) (string, error)
	// repair, if set, is what a person does once the fault showed (the fleet cannot
	// recover by itself); it returns the Update that showed the fault.
	repair func(cc *chaosCluster, t *testing.T) string
	// reasons are those the Update a runner fault hit (or a repair returned) may fail
	// with.
	reasons []string
}

// runnerUpdate is the Update of runner Pod pod, "" for any other target.
func (cc *chaosCluster) runnerUpdate(pod string) string {
	p := &corev1.Pod{}
	if err := cc.c.Get(context.Background(), client.ObjectKey{Namespace: chaosNamespace, Name: pod}, p); err != nil {
		return ""
	}
	return p.Labels["stackwright.dev/update"]
}

// runnerFaultReasons are what an Update whose runner was killed or evicted may say.
var runnerFaultReasons = []string{v1alpha1.ReasonRunnerLost, v1alpha1.ReasonEvicted}

// faultKinds are the campaign's kinds, in the order a short run takes them.
var faultKinds = []faultKind{
	{name: "manager-pod-deleted", inject: (*chaosCluster).deleteManager},
	{name: "manager-sigkilled", inject: (*chaosCluster).killManager},
	{name: "runner-sigkilled", runner: true, inject: (*chaosCluster).killRunner, reasons: runnerFaultReasons},
	{name: "runner-evicted", runner: true, inject: (*chaosCluster).evictRunner, reasons: runnerFaultReasons},
	{name: "runner-out-of-memory", inject: (*chaosCluster).overfeedHog, repair: (*chaosCluster).starveHog, reasons: []string{v1alpha1.ReasonOOMKilled}},
	{name: "kubelet-restarted", inject: crashComponent("kubelet")},
	{name: "containerd-restarted", inject: crashComponent("containerd")},
	{name: "kube-apiserver-restarted", inject: crashComponent("kube-apiserver")},
	{name: "etcd-restarted", inject: crashComponent("etcd")},
	{name: "node-rebooted", inject: (*chaosCluster).rebootNode},
}

// chaosCluster is the campaign's install and what it has done to it.
type chaosCluster struct {
	c   client.Client
	s3  *s3Server
	rng *rand.Rand
	// desired is each Stack's desired rev: the count of desired states it was given.
	desired map[string]int
	// failing is, per Stack, the count of its desired states meant to fail (the hog's,
	// which run out of memory), which no successful up may apply.
	failing map[string]int
	// oomSeen are the hog's Updates that ran out of memory, each a fault already recorded.
	oomSeen map[string]bool
	// instanceStack is the template instance's Stack, once the instance made it.
	instanceStack string
	// scrape reads the manager's metrics.
	scrape func(t *testing.T) string
	// managerPod and managerRestarts are the manager's Pod and its container's restarts
	// when last looked at, after a fault's recovery.
	managerPod      string
	managerRestarts int32
}

// faultRecord is one injected fault, how long the fleet took to recover from it, and how
// often the manager's container restarted meanwhile.
type faultRecord struct {
	kind, detail    string
	recovery        time.Duration
	managerRestarts int32
	// update is the Update whose runner a runner fault hit.
	update string
	// counted says the manager's update_failures_total counted the fault's Update (checked
	// when the manager ran through the fault).
	counted bool
}

func TestChaosNode(t *testing.T) {
	faults := envCount(t, "CHAOS_NODE_FAULTS")
	if faults == 0 {
		t.Skip("CHAOS_NODE_FAULTS is not set: `make chaos-node` runs the campaign, `make e2e` its short version")
	}
	seed := uint64(1)
	if v := os.Getenv("CHAOS_NODE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_NODE_SEED=%q: %v", v, err)
		}
		seed = s
	}
	c := newClient(t)
	cc := &chaosCluster{c: c, s3: startS3(t, c), rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), desired: map[string]int{}, failing: map[string]int{}, oomSeen: map[string]bool{}}
	values := filepath.Join(t.TempDir(), "values.yaml")
	NewWithT(t).Expect(os.WriteFile(values, []byte("executor: job\nmaxConcurrentUpdates: 4\nrunner:\n  jobTTL: 1m\ntemplates:\n  apiGroups: ["+chaosGroup+"]\ndefaultBackend: "+
		cc.s3.bucket(t, chaosBucket, "")+"\n"), 0o600)).To(Succeed())
	helmInstall(t, "install", "-f", values)
	waitManager(t, c)
	cc.scrape = managerScraper(t, "chaos")
	createNamespace(t, c, chaosNamespace)
	t.Cleanup(func() { deleteNamespace(t, c, chaosNamespace) })
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "stacktemplate", "chaos-apps", "--ignore-not-found", "--timeout=3m")
	})
	createNamespace(t, c, chaosTenant)
	t.Cleanup(func() { deleteNamespace(t, c, chaosTenant) })
	// The fleet's destroys first, while its namespace still runs its runners (cleanups run
	// last-in first-out): the instance's, then the other Stacks'; then the namespaces and
	// the template go.
	t.Cleanup(func() { cc.destroyFleet(t) })
	run(t, "kubectl", "label", "namespace", chaosTenant, chaosGroup+"/tenant=yes")
	run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, s3CredentialsYAML+"---\n"+configMapWriter("deployer")+"---\n"+chaosProgramYAML+"---\n"+chaosRingProgramYAML(1)+"---\n"+chaosRolloutYAML))
	for i := range chaosStacks {
		name := fmt.Sprintf("fleet-%d", i)
		cc.desired[name] = 1
		run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosStackYAML(name, 1, "")))
	}
	cc.desired[chaosHog] = 1
	run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosHogProgramYAML+"---\n"+chaosHogStackYAML(1, 0)))
	cc.desired[chaosApproved] = 1
	run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosStackYAML(chaosApproved, 1, "  stackwright:\n    approval: Manual\n")))
	for i, name := range []string{chaosRing0, chaosRing1} {
		cc.desired[name] = 1
		run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosRingStackYAML(name, i)))
	}
	run(t, "kubectl", "apply", "-f", writeManifest(t, chaosTemplateYAML))
	if out, err := runErr("kubectl", "wait", "--for=condition=Ready", "stacktemplate/chaos-apps", "--timeout=2m"); err != nil {
		status, _ := runErr("kubectl", "get", "stacktemplate", "chaos-apps", "-o", "jsonpath={.status}")
		t.Fatalf("the template is not Ready: %v\n%s\n%s\n%s", err, out, status, describeManager())
	}
	run(t, "kubectl", "apply", "-n", chaosTenant, "-f", writeManifest(t, chaosInstanceYAML(1)))
	cc.instanceStack = cc.waitInstanceStack(t)
	cc.desired[cc.instanceStack] = 1
	cc.waitRecovered(t, "the fleet's first ups")
	cc.managerRestarts, _ = cc.managerRestartsSince(t)

	var records []faultRecord
	order := cc.schedule(t, faults)
	for i, kind := range order {
		rec := cc.inject(t, i, kind)
		t.Logf("fault %d/%d %s (%s): recovered in %s, manager restarts %d", i+1, len(order), rec.kind, rec.detail, rec.recovery.Round(100*time.Millisecond), rec.managerRestarts)
		if kind.name == "manager-sigkilled" && rec.managerRestarts != 1 {
			t.Errorf("fault %d: the manager's container restarted %d times after one SIGKILL", i+1, rec.managerRestarts)
		}
		records = append(records, rec)
	}
	// A calm period: nothing may start, fail or linger once the fleet is at rest.
	time.Sleep(30 * time.Second)
	cc.checkInvariants(t)
	if path := os.Getenv("CHAOS_NODE_REPORT"); path != "" {
		writeChaosReport(t, path, seed, records)
	}
}

// destroyFleet deletes the template's instance and the fleet's Stacks, and waits until
// their destroys are done.
func (cc *chaosCluster) destroyFleet(t *testing.T) {
	t.Helper()
	if out, err := runErr("kubectl", "delete", "chaosapps."+chaosGroup, "--all", "-n", chaosTenant, "--ignore-not-found", "--timeout="+chaosRecovery.String()); err != nil {
		t.Errorf("failed to delete the template's instance: %v\n%s", err, out)
	}
	if out, err := runErr("kubectl", "delete", "stacks.pulumi.com", "--all", "-n", chaosNamespace, "--wait=false"); err != nil {
		t.Errorf("failed to delete the fleet: %v\n%s", err, out)
		return
	}
	NewWithT(t).Eventually(func(g Gomega) {
		var stacks pulumiv1.StackList
		g.Expect(cc.c.List(context.Background(), &stacks, client.InNamespace(chaosNamespace))).To(Succeed())
		g.Expect(stacks.Items).To(BeEmpty())
	}).WithTimeout(chaosRecovery).WithPolling(2*time.Second).Should(Succeed(), "the fleet's destroys\n%s", describeNamespace(chaosNamespace))
}

// envCount is a non-negative count from the environment, 0 when unset.
func envCount(t *testing.T, name string) int {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// schedule is the kinds of n faults: every kind once first (in a shuffled order), then
// kinds drawn at random.
func (cc *chaosCluster) schedule(t *testing.T, n int) []faultKind {
	kinds := faultKinds
	if names := os.Getenv("CHAOS_NODE_KINDS"); names != "" {
		// Only the kinds named (to chase one kind's failure).
		kinds = nil
		for name := range strings.SplitSeq(names, ",") {
			i := slices.IndexFunc(faultKinds, func(k faultKind) bool { return k.name == name })
			if i < 0 {
				t.Fatalf("CHAOS_NODE_KINDS: no fault kind %q", name)
			}
			kinds = append(kinds, faultKinds[i])
		}
	}
	order := slices.Clone(kinds)
	cc.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for len(order) < n {
		order = append(order, kinds[cc.rng.IntN(len(kinds))])
	}
	return order[:n]
}

// chaosProgramYAML creates a ConfigMap with the real Kubernetes provider, holding the
// Stack's rev, after a nap (the test provider's Sleep, which sleeps again whenever rev
// changes): an up of a new rev takes chaosNap seconds at least.
var chaosProgramYAML = `apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: fleet
program:
  configuration:
    rev:
      type: String
  resources:
    nap:
      type: stackwright-testing:index:Sleep
      properties:
        seconds: ` + strconv.Itoa(chaosNap) + `
        value: ${rev}
    made:
      type: kubernetes:core/v1:ConfigMap
      properties:
        metadata:
          name: made-by-${pulumi.stack}
        data:
          rev: ${rev}
      options:
        dependsOn:
        - ${nap}
  outputs:
    rev: ${rev}
`

// chaosRingProgramYAML is the rings' Program at rev: the fleet's program with rev in the
// program itself, so that a new rev is a new source revision, which the rollout rolls out.
func chaosRingProgramYAML(rev int) string {
	p := strings.Replace(chaosProgramYAML, "name: fleet", "name: ringed", 1)
	p = strings.Replace(p, "  configuration:\n    rev:\n      type: String\n", "", 1)
	return strings.ReplaceAll(p, "${rev}", revValue(rev))
}

// chaosHogProgramYAML allocates the Stack's mib (the test provider's Hog, which holds it
// for a few seconds); a new rev runs the Hog again.
const chaosHogProgramYAML = `apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: hog
program:
  configuration:
    rev:
      type: String
    mib:
      type: Number
  resources:
    hog:
      type: stackwright-testing:index:Hog
      properties:
        mebibytes: ${mib}
        value: ${rev}
  outputs:
    rev: ${rev}
`

// chaosHogStackYAML is the hog Stack at rev, allocating mib under its runner's memory
// limit.
func chaosHogStackYAML(rev, mib int) string {
	return `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: ` + chaosHog + `
spec:
  stack: ` + chaosHog + `
  programRef:
    name: hog
  serviceAccountName: deployer
  destroyOnFinalize: true
  workspaceTemplate:
    spec:
      resources:
        requests:
          cpu: 100m
          memory: 256Mi
        limits:
          memory: ` + chaosHogLimit + `
  config:
    rev: ` + revValue(rev) + `
    mib: ` + strconv.Itoa(mib) + `
  envRefs:
` + s3EnvRefsYAML
}

// overfeedHog gives the hog Stack a desired state whose program allocates past its
// runner's memory limit: the kernel kills a process of the runner.
func (cc *chaosCluster) overfeedHog(t *testing.T) (string, error) {
	cc.desired[chaosHog]++
	cc.failing[chaosHog]++
	_, err := runErr("kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosHogStackYAML(cc.desired[chaosHog], chaosHogMiB)))
	return fmt.Sprintf("%s: %d MiB under %s", chaosHog, chaosHogMiB, chaosHogLimit), err
}

// starveHog waits for the hog's Update that ran out of memory, then does what its owner
// would: gives it a desired state that allocates nothing. It returns that Update.
func (cc *chaosCluster) starveHog(t *testing.T) string {
	t.Helper()
	var failed string
	NewWithT(t).Eventually(func(g Gomega) {
		var list v1alpha1.UpdateList
		g.Expect(cc.c.List(context.Background(), &list, client.InNamespace(chaosNamespace))).To(Succeed())
		for _, u := range list.Items {
			c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
			if u.Spec.StackName == chaosHog && u.Spec.Type == v1alpha1.UpdateTypeUp && c != nil && c.Reason == v1alpha1.ReasonOOMKilled && !cc.oomSeen[u.Name] {
				failed = u.Name
				g.Expect(c.Message).To(ContainSubstring(chaosHogLimit), "the Update names the limit")
				return
			}
		}
		g.Expect(failed).NotTo(BeEmpty(), "no Update of %s ran out of memory", chaosHog)
	}).WithTimeout(chaosRecovery).WithPolling(time.Second).Should(Succeed(), func() string { return describeNamespace(chaosNamespace) + "\n" + describeManager() })
	cc.oomSeen[failed] = true
	cc.desired[chaosHog]++
	run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosHogStackYAML(cc.desired[chaosHog], 0)))
	return failed
}

// chaosRolloutYAML rolls the rings' revisions out, ring 0 first, with no gate.
const chaosRolloutYAML = `apiVersion: stackwright.dev/v1alpha1
kind: StackRollout
metadata:
  name: rings
spec:
  selector:
    matchLabels:
      app: rings
  waves:
    byLabel:
      key: ring
      values: ["0", "1"]
`

// chaosTemplateYAML publishes the kind ChaosApp, whose instances (in namespaces labelled
// tenant=yes) are Stacks of the fleet's program with the instance's rev.
var chaosTemplateYAML = `apiVersion: stackwright.dev/v1alpha1
kind: StackTemplate
metadata:
  name: chaos-apps
spec:
  api:
    group: ` + chaosGroup + `
    kind: ChaosApp
    plural: chaosapps
  parameters:
    type: object
    required: [rev]
    properties:
      rev:
        type: string
  namespace: ` + chaosNamespace + `
  stack:
    stack: app
    programRef:
      name: fleet
    serviceAccountName: deployer
    destroyOnFinalize: true
    envRefs:
` + indent(s3EnvRefsYAML, "  ") + `  config:
  - key: rev
    parameter: rev
  outputs: [rev]
  namespaceSelector:
    matchLabels:
      ` + chaosGroup + `/tenant: "yes"
`

// chaosInstanceYAML is the template's instance at rev.
func chaosInstanceYAML(rev int) string {
	return `apiVersion: ` + chaosGroup + `/v1alpha1
kind: ChaosApp
metadata:
  name: app
spec:
  parameters:
    rev: ` + revValue(rev) + `
`
}

// revValue is desired state rev's config value: not a number, which a config value in
// YAML would become.
func revValue(rev int) string { return "rev-" + strconv.Itoa(rev) }

// chaosStackYAML is the fleet Stack name at rev, with extra added to its spec.
func chaosStackYAML(name string, rev int, extra string) string {
	return `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: ` + name + `
spec:
  stack: ` + name + `
  programRef:
    name: fleet
  serviceAccountName: deployer
  destroyOnFinalize: true
` + extra + `  config:
    rev: ` + revValue(rev) + `
  envRefs:
` + s3EnvRefsYAML
}

// chaosRingStackYAML is the rollout's Stack name in ring.
func chaosRingStackYAML(name string, ring int) string {
	return `apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: ` + name + `
  labels:
    app: rings
    ring: "` + strconv.Itoa(ring) + `"
spec:
  stack: ` + name + `
  programRef:
    name: ringed
  serviceAccountName: deployer
  destroyOnFinalize: true
  envRefs:
` + s3EnvRefsYAML
}

// waitInstanceStack waits for the Stack the template's instance became, and returns its
// name.
func (cc *chaosCluster) waitInstanceStack(t *testing.T) string {
	t.Helper()
	var name string
	NewWithT(t).Eventually(func(g Gomega) {
		var stacks pulumiv1.StackList
		g.Expect(cc.c.List(context.Background(), &stacks, client.InNamespace(chaosNamespace), client.MatchingLabels{"stackwright.dev/template": "chaos-apps"})).To(Succeed())
		g.Expect(stacks.Items).To(HaveLen(1))
		name = stacks.Items[0].Name
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "the instance's Stack\n%s", describeNamespace(chaosTenant))
	return name
}

// inject gives one to three Stacks a new desired state, injects a fault of kind while
// their ups run (once a runner runs, for the kinds that need one), and waits for the
// fleet to recover.
func (cc *chaosCluster) inject(t *testing.T, i int, kind faultKind) faultRecord {
	t.Helper()
	// One plain Stack always changes, so that a runner of an up (not only of the approved
	// Stack's preview) runs; then up to two of the other units.
	plain := fmt.Sprintf("fleet-%d", cc.rng.IntN(chaosStacks))
	units := []string{"approved", "rings", "instance"}
	for p := range chaosStacks {
		if name := fmt.Sprintf("fleet-%d", p); name != plain {
			units = append(units, name)
		}
	}
	cc.rng.Shuffle(len(units), func(a, b int) { units[a], units[b] = units[b], units[a] })
	for _, unit := range append([]string{plain}, units[:cc.rng.IntN(3)]...) {
		cc.change(t, unit)
	}
	if kind.runner {
		NewWithT(t).Eventually(func() int { return len(cc.upRunners(t)) }).
			WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(BeNumerically(">", 0), "fault %d: no runner of an up started\n%s", i, describeNamespace(chaosNamespace))
		// Into the nap: the engine has started and holds the stack's lock.
		time.Sleep(time.Duration(2+cc.rng.IntN(chaosNap/2)) * time.Second)
	} else {
		time.Sleep(time.Duration(1+cc.rng.IntN(chaosNap)) * time.Second)
	}
	// The manager counts every failed Update by its reason, whether its runner reported
	// (an eviction's SIGTERM, an out-of-memory kill of a child) or was lost.
	var failuresBefore map[string]float64
	if kind.runner || kind.repair != nil {
		failuresBefore = counterByReason(cc.scrape(t), updateFailures)
	}
	start := time.Now()
	detail, err := kind.inject(cc, t)
	if err != nil {
		t.Fatalf("fault %d (%s): %v", i, kind.name, err)
	}
	rec := faultRecord{kind: kind.name, detail: detail}
	if kind.runner {
		rec.update = cc.runnerUpdate(detail)
	}
	if kind.repair != nil {
		rec.update = kind.repair(cc, t)
	}
	cc.waitRecovered(t, fmt.Sprintf("fault %d (%s: %s)", i, kind.name, detail))
	rec.recovery = time.Since(start)
	var replaced bool
	rec.managerRestarts, replaced = cc.managerRestartsSince(t)
	if rec.update != "" {
		// The fault is the Update's reason, not a silent retry, and counted.
		u := &v1alpha1.Update{}
		g := NewWithT(t)
		g.Expect(cc.c.Get(context.Background(), client.ObjectKey{Namespace: chaosNamespace, Name: rec.update}, u)).To(Succeed())
		c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
		g.Expect(c).NotTo(BeNil(), "Update %s of the %s fault", u.Name, kind.name)
		g.Expect(c.Reason).To(BeElementOf(kind.reasons), "Update %s of the %s fault: %s", u.Name, kind.name, c.Message)
		rec.detail += " → " + c.Reason
		rec.counted = cc.checkCounted(t, c.Reason, failuresBefore, rec.managerRestarts == 0 && !replaced)
	}
	return rec
}

// updateFailures counts the manager's failed Updates by namespace, operation and reason.
const updateFailures = "stackwright_update_failures_total"

// checkCounted checks that the manager counted one more failed Update with reason since
// before, if it ran through the fault (a restart starts its counters from zero), and
// says whether it checked.
func (cc *chaosCluster) checkCounted(t *testing.T, reason string, before map[string]float64, ranThrough bool) bool {
	t.Helper()
	if !ranThrough {
		return false
	}
	after := counterByReason(cc.scrape(t), updateFailures)
	NewWithT(t).Expect(after[reason]-before[reason]).To(BeNumerically(">=", 1), "%s{reason=%q} before %v, after %v", updateFailures, reason, before, after)
	return true
}

// counterByReason is the counter name of the campaign's namespace, by reason, summed
// over its other labels, from the manager's metrics.
func counterByReason(metrics, name string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.Lines(metrics) {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `namespace="`+chaosNamespace+`"`) {
			continue
		}
		_, labels, _ := strings.Cut(line, "{")
		labels, value, _ := strings.Cut(labels, "} ")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		for l := range strings.SplitSeq(labels, ",") {
			if r, ok := strings.CutPrefix(l, `reason="`); ok {
				out[strings.TrimSuffix(r, `"`)] += v
			}
		}
	}
	return out
}

// change gives unit a new desired state: a plain or the approved Stack its next rev, the
// rings their Program's next rev, the instance its next rev.
func (cc *chaosCluster) change(t *testing.T, unit string) {
	t.Helper()
	switch unit {
	case "rings":
		cc.desired[chaosRing0]++
		cc.desired[chaosRing1] = cc.desired[chaosRing0]
		run(t, "kubectl", "apply", "-n", chaosNamespace, "-f", writeManifest(t, chaosRingProgramYAML(cc.desired[chaosRing0])))
	case "instance":
		cc.desired[cc.instanceStack]++
		run(t, "kubectl", "apply", "-n", chaosTenant, "-f", writeManifest(t, chaosInstanceYAML(cc.desired[cc.instanceStack])))
	default:
		cc.desired[unit]++
		cc.setRev(t, unit, cc.desired[unit])
	}
}

// upRunners are the running runner Pods of ups (a preview's may be gone before a fault
// reaches it).
func (cc *chaosCluster) upRunners(t *testing.T) []corev1.Pod {
	t.Helper()
	return slices.DeleteFunc(cc.runnerPods(t, corev1.PodRunning), func(p corev1.Pod) bool {
		u := &v1alpha1.Update{}
		err := cc.c.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: p.Labels["stackwright.dev/update"]}, u)
		return err != nil || u.Spec.Type != v1alpha1.UpdateTypeUp
	})
}

// managerRestartsSince returns how often the manager's container restarted since the last
// look (a new Pod starts from none), and whether its Pod is another.
func (cc *chaosCluster) managerRestartsSince(t *testing.T) (int32, bool) {
	t.Helper()
	g := NewWithT(t)
	pod := managerPod(g, cc.c)
	n := managerRestarts(g, cc.c)
	since, replaced := n-cc.managerRestarts, pod.Name != cc.managerPod
	if replaced {
		since = n
	}
	cc.managerPod, cc.managerRestarts = pod.Name, n
	return since, replaced
}

// setRev gives the Stack name the desired rev.
func (cc *chaosCluster) setRev(t *testing.T, name string, rev int) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		st := &pulumiv1.Stack{}
		if err := cc.c.Get(context.Background(), client.ObjectKey{Namespace: chaosNamespace, Name: name}, st); err != nil {
			return err
		}
		patch := client.MergeFrom(st.DeepCopy())
		st.Spec.Config = map[string]apiextensionsv1.JSON{"rev": {Raw: []byte(strconv.Quote(revValue(rev)))}}
		return cc.c.Patch(context.Background(), st, patch)
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "set %s to rev %d", name, rev)
}

// waitRecovered waits until every Stack is Ready at its desired state: its spec's
// generation observed, and its output rev the desired one.
func (cc *chaosCluster) waitRecovered(t *testing.T, why string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cc.approve(t)
		for name, rev := range cc.desired {
			st := &pulumiv1.Stack{}
			g.Expect(cc.c.Get(context.Background(), client.ObjectKey{Namespace: chaosNamespace, Name: name}, st)).To(Succeed())
			ready := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReady)
			g.Expect(ready).NotTo(BeNil(), "%s has no Ready condition", name)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s %s", name, ready.Reason, ready.Message)
			g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation), name)
			g.Expect(string(st.Status.Outputs["rev"].Raw)).To(Equal(strconv.Quote(revValue(rev))), "%s's outputs", name)
		}
	}).WithTimeout(chaosRecovery).WithPolling(time.Second).Should(Succeed(), func() string {
		// Described when it failed, not when the wait began.
		return fmt.Sprintf("%s: the fleet did not recover\n%s\n%s", why, describeNamespace(chaosNamespace), describeManager())
	})
}

// approve approves the approved Stack's change, as a person would, once its preview
// awaits approval.
func (cc *chaosCluster) approve(t *testing.T) {
	t.Helper()
	st := &pulumiv1.Stack{}
	if err := cc.c.Get(context.Background(), client.ObjectKey{Namespace: chaosNamespace, Name: chaosApproved}, st); err != nil {
		return
	}
	if st.Status.Stackwright == nil || st.Status.Stackwright.Approval == nil || st.Status.Stackwright.Approval.State != pulumiv1.ApprovalAwaiting {
		return
	}
	if st.Annotations[pulumiv1.ApproveAnnotation] == st.Status.Stackwright.Approval.Preview {
		return
	}
	// The plugin's command, as a person runs it; it refuses a preview no longer awaiting.
	if out, err := runErr("kubectl-stackwright", "-n", chaosNamespace, "approve", chaosApproved); err != nil {
		t.Logf("approve %s: %v\n%s", chaosApproved, err, out)
	}
}

// runnerPods are the fleet's runner Pods in phase (any phase when empty).
func (cc *chaosCluster) runnerPods(t *testing.T, phase corev1.PodPhase) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := cc.c.List(context.Background(), &pods, client.InNamespace(chaosNamespace), client.MatchingLabels{"app.kubernetes.io/name": "stackwright-runner"}); err != nil {
		return nil
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return (phase != "" && p.Status.Phase != phase) || !p.DeletionTimestamp.IsZero()
	})
}

// deleteManager deletes the manager's Pod, as a drain or a rollout would.
func (cc *chaosCluster) deleteManager(t *testing.T) (string, error) {
	pod := managerPod(NewWithT(t), cc.c)
	return pod.Name, cc.c.Delete(context.Background(), pod)
}

// killManager SIGKILLs the manager's container process, as the OOM killer or the runtime
// would: the kubelet restarts the container in the same Pod.
func (cc *chaosCluster) killManager(t *testing.T) (string, error) {
	pod := managerPod(NewWithT(t), cc.c)
	pids := containerPIDs(pod)
	if len(pids) == 0 {
		return "", fmt.Errorf("no process of manager Pod %s found", pod.Name)
	}
	return pod.Name, syscall.Kill(pids[0], syscall.SIGKILL)
}

// killRunner SIGKILLs a running runner's container, as the OOM killer would.
func (cc *chaosCluster) killRunner(t *testing.T) (string, error) {
	pods := cc.upRunners(t)
	if len(pods) == 0 {
		return "", fmt.Errorf("no runner Pod is running")
	}
	pod := pods[cc.rng.IntN(len(pods))]
	pids := containerPIDs(&pod)
	if len(pids) == 0 {
		return "", fmt.Errorf("no process of runner Pod %s found", pod.Name)
	}
	return pod.Name, syscall.Kill(pids[0], syscall.SIGKILL)
}

// evictRunner evicts a running runner's Pod through the API's eviction, as a drain would.
func (cc *chaosCluster) evictRunner(t *testing.T) (string, error) {
	pods := cc.upRunners(t)
	if len(pods) == 0 {
		return "", fmt.Errorf("no runner Pod is running")
	}
	pod := pods[cc.rng.IntN(len(pods))]
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	return pod.Name, cc.c.SubResource("eviction").Create(context.Background(), &pod, ev)
}

// crashComponent SIGKILLs the node's component name, as a crash would; the node's
// supervisor starts it again, as its init system would.
func crashComponent(name string) func(*chaosCluster, *testing.T) (string, error) {
	return func(*chaosCluster, *testing.T) (string, error) {
		pids := componentPIDs(filepath.Join(root, "bin", name))
		if len(pids) == 0 {
			return "", fmt.Errorf("no %s process of the node found", name)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return "", fmt.Errorf("failed to kill %s (pid %d): %w", name, pid, err)
			}
		}
		return fmt.Sprintf("pid %v", pids), nil
	}
}

// rebootNode stops the whole node, every container with it, and starts it again with its
// state (etcd, images, volumes) kept, as a machine's reboot would.
func (cc *chaosCluster) rebootNode(*testing.T) (string, error) {
	cluster := filepath.Join(root, "bin", "stackwright-cluster")
	bin := filepath.Join(root, "bin")
	if out, err := execErr("", cluster, "down", "--bin", bin, "--keep-state"); err != nil {
		return "", fmt.Errorf("failed to stop the node: %w\n%s", err, out)
	}
	if out, err := execErr("", cluster, "up", "--bin", bin); err != nil {
		return "", fmt.Errorf("failed to start the node again: %w\n%s", err, out)
	}
	return "down --keep-state, up", nil
}

// componentPIDs are the processes running exe outside this process's network namespace:
// the node's, not an envtest's of the same ./bin.
func componentPIDs(exe string) []int {
	self, _ := os.Readlink("/proc/self/ns/net")
	var pids []int
	for _, pid := range procPIDs() {
		path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || strings.TrimSuffix(path, " (deleted)") != exe {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns != self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// containerPIDs are the main processes of Pod pod's containers (the Pods here have one,
// besides the sandbox's pause): the processes whose HOSTNAME is the Pod's host name (its
// spec's, a runner's Job name, else its name) and whose parent is a containerd shim.
func containerPIDs(p *corev1.Pod) []int {
	host := cmp.Or(p.Spec.Hostname, p.Name)
	var pids []int
	for _, pid := range procPIDs() {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == "HOSTNAME="+host }) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		parent, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
		self, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if strings.HasPrefix(filepath.Base(parent), "containerd-shim") && filepath.Base(self) != "pause" {
			pids = append(pids, pid)
		}
	}
	return pids
}

func procPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// checkInvariants checks, after the calm, what no fault may leave behind.
func (cc *chaosCluster) checkInvariants(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	// Exactly one successful up per desired state, from the backend's own history: none
	// lost, none applied twice.
	ups := cc.successfulUps(t)
	for name, rev := range cc.desired {
		st := &pulumiv1.Stack{}
		g.Expect(cc.c.Get(ctx, client.ObjectKey{Namespace: chaosNamespace, Name: name}, st)).To(Succeed())
		g.Expect(ups[st.Spec.Stack]).To(Equal(rev-cc.failing[name]), "%s (stack %s): successful ups in the backend's history for %d desired states, %d of them meant to fail", name, st.Spec.Stack, rev, cc.failing[name])
	}
	// No lock left in the backend.
	g.Expect(cc.s3.objects(chaosBucket, "")).NotTo(ContainElement(ContainSubstring(".pulumi/locks/")), "locks left in the backend")
	// No Update stuck in a non-final phase, and each lost runner said so.
	var list v1alpha1.UpdateList
	g.Expect(cc.c.List(ctx, &list, client.InNamespace(chaosNamespace))).To(Succeed())
	for _, u := range list.Items {
		g.Expect(u.Status.Phase).To(BeElementOf(v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdatePhaseFailed), "Update %s is %s", u.Name, u.Status.Phase)
		if u.Status.Phase == v1alpha1.UpdatePhaseFailed {
			c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
			g.Expect(c).NotTo(BeNil(), "failed Update %s has no Complete condition", u.Name)
			g.Expect(c.Reason).NotTo(BeEmpty(), "failed Update %s gives no reason", u.Name)
		}
	}
	// No runner Job, Pod or work Secret of a finished Update beyond the Job TTL (1m), nor
	// any of an Update that is gone.
	updates := map[string]bool{}
	for _, u := range list.Items {
		updates[string(u.UID)] = true
	}
	sel := client.MatchingLabels{"app.kubernetes.io/name": "stackwright-runner"}
	var jobs batchv1.JobList
	g.Expect(cc.c.List(ctx, &jobs, client.InNamespace(chaosNamespace), sel)).To(Succeed())
	var pods corev1.PodList
	g.Expect(cc.c.List(ctx, &pods, client.InNamespace(chaosNamespace), sel)).To(Succeed())
	var secrets corev1.SecretList
	g.Expect(cc.c.List(ctx, &secrets, client.InNamespace(chaosNamespace), sel)).To(Succeed())
	var left []string
	for _, objs := range [][]client.Object{objectsOf(jobs.Items), objectsOf(pods.Items), objectsOf(secrets.Items)} {
		for _, o := range objs {
			if !updates[o.GetLabels()["stackwright.dev/update-uid"]] || time.Since(o.GetCreationTimestamp().Time) > 2*time.Minute+chaosNap*time.Second {
				left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
			}
		}
	}
	g.Expect(left).To(BeEmpty(), "runner objects left behind")
	// The manager did not restart at rest: every restart was a fault's (the report says
	// whose).
	restarts, replaced := cc.managerRestartsSince(t)
	g.Expect(restarts).To(BeZero(), "manager restarts during the calm")
	g.Expect(replaced).To(BeFalse(), "the manager's Pod was replaced during the calm")
}

func objectsOf[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// successfulUps counts, per Stack, the successful updates its history in the backend
// records (the DIY backend's .pulumi/history/<project>/<stack>/*.history.json).
func (cc *chaosCluster) successfulUps(t *testing.T) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, key := range cc.s3.objects(chaosBucket, "") {
		if !strings.Contains(key, ".pulumi/history/") || !strings.HasSuffix(key, ".history.json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(cc.s3.dir, chaosBucket, key))
		if err != nil {
			t.Fatalf("failed to read %s: %v", key, err)
		}
		var entry struct {
			Kind   string `json:"kind"`
			Result string `json:"result"`
		}
		if err := json.Unmarshal(raw, &entry); err != nil {
			t.Fatalf("failed to decode %s: %v", key, err)
		}
		if entry.Kind == "update" && entry.Result == "succeeded" {
			counts[filepath.Base(filepath.Dir(key))]++
		}
	}
	return counts
}

// writeChaosReport writes the campaign's report: the faults, and recovery per kind.
func writeChaosReport(t *testing.T, path string, seed uint64, records []faultRecord) {
	t.Helper()
	byKind := map[string][]time.Duration{}
	for _, r := range records {
		byKind[r.kind] = append(byKind[r.kind], r.recovery)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Node fault campaign, %s\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "`make chaos-node CHAOS_NODE_FAULTS=%d CHAOS_NODE_SEED=%d`: %d Stacks (the real Kubernetes provider, a %d s nap per up: %d plain, one with `approval: Manual` whose previews the test approves, two in a StackRollout's rings, one a template instance's, and the hog, whose runner has a memory limit of %s) on the one-node cluster, Job executor, state in the in-cluster S3 server; each fault injected while ups of new desired states run, then the fleet must be Ready at its desired states again (recovery, measured from the fault).\n\n", len(records), seed, chaosStacks+5, chaosNap, chaosStacks, chaosHogLimit)
	b.WriteString("| Kind | Faults | Recovery median (upper, for an even count) | Recovery max |\n| --- | --- | --- | --- |\n")
	kinds := slices.Sorted(maps.Keys(byKind))
	for _, k := range kinds {
		d := byKind[k]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		fmt.Fprintf(&b, "| %s | %d | %.1f s | %.1f s |\n", k, len(d), d[len(d)/2].Seconds(), d[len(d)-1].Seconds())
	}
	fmt.Fprintf(&b, "\nInvariants, all held: every Stack Ready at its desired state; exactly one successful up per desired state in the backend's history (none for the hog's desired states that allocate %d MiB, which the runner-out-of-memory faults give it, then replace with one that allocates nothing); no lock left in the backend; no Update in a non-final phase, every failed one with a reason; no runner Job, Pod or work Secret beyond its TTL; the manager restarted only after faults (each SIGKILL once), never at rest; each runner fault's Update names its reason, and the manager counted it in `stackwright_update_failures_total` by that reason (column Counted, checked when the manager ran through the fault). A runner-out-of-memory fault's recovery includes its Update's failure and the test's repair.\n\n## Faults\n\n| # | Kind | Target | Recovery | Manager restarts | Counted |\n| --- | --- | --- | --- | --- | --- |\n", chaosHogMiB)
	for i, r := range records {
		counted := ""
		if r.counted {
			counted = "yes"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %.1f s | %d | %s |\n", i+1, r.kind, r.detail, r.recovery.Seconds(), r.managerRestarts, counted)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("failed to write report: %v", err)
	}
}
