//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A template whose revisions a StackRollout rolls out: its instances, one per tenant
// namespace, are the rings.
const (
	trPlatform = "e2e-trollout-platform"
	trTemplate = "e2e-caches"
)

var trTenants = []string{"e2e-trollout-0", "e2e-trollout-1", "e2e-trollout-2"}

// trProgramYAML is the Program of the template's Stacks: it creates a ConfigMap named by
// its config prefix (with the stack's name appended) in the platform namespace, holding
// and exporting its config version. A prefix the API server refuses in a name makes the
// program fail.
const trProgramYAML = `---
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: cache
program:
  configuration:
    prefix:
      type: String
    version:
      type: String
  resources:
    made:
      type: kubernetes:core/v1:ConfigMap
      properties:
        metadata:
          name: ${prefix}${pulumi.stack}
        data:
          version: ${version}
  outputs:
    version: ${version}
`

// trTemplateYAML is the template; each of its revisions sets the program's config.
func trTemplateYAML(prefix, version string) string {
	return `apiVersion: stackwright.dev/v1alpha1
kind: StackTemplate
metadata:
  name: ` + trTemplate + `
spec:
  api:
    group: ` + templateGroup + `
    kind: Cache
    plural: caches
  namespace: ` + trPlatform + `
  stack:
    stack: caches
    programRef:
      name: cache
    serviceAccountName: cache-runner
    destroyOnFinalize: true
    config:
      prefix: ` + prefix + `
      version: ` + version + `
    envRefs:
` + indent(s3EnvRefsYAML, "  ") + `  outputs: [version]
`
}

// testTemplateRollout: a StackRollout of a template's revisions across three tenants'
// instances, one ring each, behind a gate Job the cluster's Job controller runs. Revision 2
// (a new config version) reaches ring 1 only after ring 0's gate Job completed, then ring
// 2. Revision 3 (a ConfigMap name the API server refuses) fails: the rollout halts in ring
// 0 and rings 1 and 2 keep revision 2; the abort renders ring 0 from revision 2 again,
// which its next up deploys.
func testTemplateRollout(t *testing.T, jc *jobCluster) {
	g, c := NewWithT(t), jc.c
	ctx := context.Background()
	// Cleanups run last-in first-out: the tenants' namespaces (and instances) go first,
	// then the template, which waits for its instances, then the platform namespace.
	createNamespace(t, c, trPlatform)
	t.Cleanup(func() { deleteNamespace(t, c, trPlatform) })
	t.Cleanup(func() {
		_, _ = runErr("kubectl", "delete", "stacktemplate", trTemplate, "--ignore-not-found", "--timeout=3m")
	})
	for _, ns := range trTenants {
		createNamespace(t, c, ns)
		t.Cleanup(func() { deleteNamespace(t, c, ns) })
	}
	run(t, "kubectl", "apply", "-n", trPlatform, "-f", writeManifest(t, s3CredentialsYAML+"---\n"+configMapWriter("cache-runner")+
		trProgramYAML+"---\n"+rolloutGateYAML("version")))
	run(t, "kubectl", "apply", "-f", writeManifest(t, trTemplateYAML("cache-", "v1")))
	run(t, "kubectl", "wait", "--for=condition=Ready", "stacktemplate/"+trTemplate, "--timeout=2m")
	for _, ns := range trTenants {
		g.Eventually(func() error {
			_, err := runErr("kubectl", "apply", "-n", ns, "-f", writeManifest(t, "apiVersion: "+templateGroup+"/v1alpha1\nkind: Cache\nmetadata:\n  name: data\nspec: {}\n"))
			return err
		}).WithTimeout(time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the kind is served")
	}
	stackOf := func(g Gomega, ring int) *pulumiv1.Stack {
		var list pulumiv1.StackList
		g.Expect(c.List(ctx, &list, client.InNamespace(trPlatform), client.MatchingLabels{v1alpha1.TemplateLabel: trTemplate, v1alpha1.InstanceNamespaceLabel: trTenants[ring]})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "the Stack of ring %d", ring)
		return &list.Items[0]
	}
	// at waits until each named ring's Stack is rendered from revision and Ready, its
	// ConfigMap holding version.
	at := func(why, revision, version string, rings ...int) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			for _, ring := range rings {
				st := stackOf(g, ring)
				g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, revision), "ring %d", ring)
				st = waitStackReadyOnce(g, c, trPlatform, st.Name)
				g.Expect(string(st.Status.Outputs["version"].Raw)).To(Equal(`"`+version+`"`), "ring %d", ring)
				made := &corev1.ConfigMap{}
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: trPlatform, Name: "cache-" + st.Spec.Stack}, made)).To(Succeed())
				g.Expect(made.Data).To(HaveKeyWithValue("version", version), "ring %d's ConfigMap", ring)
			}
		}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "%s\n%s", why, describeNamespace(trPlatform))
	}
	at("revision 1 deployed", "1", "v1", 0, 1, 2)

	run(t, "kubectl", "apply", "-n", trPlatform, "-f", writeManifest(t, `apiVersion: stackwright.dev/v1alpha1
kind: StackRollout
metadata:
  name: caches
spec:
  template:
    name: `+trTemplate+`
  selector: {}
  waves:
    byLabel:
      key: `+v1alpha1.InstanceNamespaceLabel+`
      values: [`+strings.Join(trTenants, ", ")+`]
  gates:
    jobFrom:
      name: smoke
`))
	ro := &v1alpha1.StackRollout{}
	rolloutIs := func(why string, check func(g Gomega)) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: trPlatform, Name: "caches"}, ro)).To(Succeed())
			check(g)
		}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "%s\n%s", why, describeNamespace(trPlatform))
	}
	rolloutIs("the rollout takes revision 1 as stable", func(g Gomega) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).To(HaveField("Revision", "1"))
	})

	// Revision 2 goes ring by ring, each after the previous ring's gate Job completed.
	run(t, "kubectl", "apply", "-f", writeManifest(t, trTemplateYAML("cache-", "v2")))
	at("revision 2 reaches ring 0", "2", "v2", 0)
	at("revision 2 reaches every ring", "2", "v2", 0, 1, 2)
	rolloutIs("revision 2 becomes stable", func(g Gomega) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
		g.Expect(ro.Status.Stable).To(HaveField("Revision", "2"))
	})
	for ring := 1; ring < 3; ring++ {
		j := &batchv1.Job{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: trPlatform, Name: ro.Status.Waves[ring-1].GateJob}, j)).To(Succeed())
		g.Expect(j.Status.CompletionTime).NotTo(BeNil(), "the gate Job of ring %d completed", ring-1)
		last := stackOf(g, ring).Status.LastUpdate
		u := &v1alpha1.Update{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: trPlatform, Name: last.Name}, u)).To(Succeed())
		g.Expect(u.CreationTimestamp.Time).To(BeTemporally(">=", j.Status.CompletionTime.Truncate(time.Second)),
			"the up of ring %d to revision 2 started after ring %d's gate Job completed", ring, ring-1)
	}

	// Revision 3 fails in ring 0: the rollout halts, and rings 1 and 2 keep revision 2.
	run(t, "kubectl", "apply", "-f", writeManifest(t, trTemplateYAML("Not_A_Name-", "v3")))
	rolloutIs("the failing revision halts the rollout in ring 0", func(g Gomega) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		g.Expect(ro.Status.Target).To(HaveField("Revision", "3"))
		g.Expect(ro.Status.WaveName).To(Equal(trTenants[0]))
		h := meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(h).NotTo(BeNil())
		g.Expect(h.Reason).To(BeElementOf(v1alpha1.ReasonStackUpdateFailed, v1alpha1.ReasonStackStalled))
	})
	g.Expect(ro.Status.FailedStacks).To(Equal([]string{stackOf(g, 0).Name}))
	at("rings 1 and 2 keep revision 2 while the rollout is halted", "2", "v2", 1, 2)
	g.Expect(run(t, "kubectl-stackwright", "-n", trPlatform, "rollout", "status", "caches")).To(ContainSubstring("Halted"))

	// The abort returns ring 0 to revision 2.
	run(t, "kubectl-stackwright", "-n", trPlatform, "rollout", "abort", "caches")
	at("the abort returns ring 0 to revision 2", "2", "v2", 0, 1, 2)
	rolloutIs("the rollout is rolled back", func(g Gomega) {
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
		g.Expect(ro.Status.Aborted).To(HaveField("Revision", "3"))
		g.Expect(meta.IsStatusConditionTrue(ro.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "%v", ro.Status.Conditions)
	})
	for _, ns := range trTenants {
		run(t, "kubectl", "wait", "-n", ns, "--for=condition=Ready", "caches/data", "--timeout=2m")
	}
}
