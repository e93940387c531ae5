//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// rolloutProgramYAML is the Program the rollout's Stacks share: its output says which
// version each Stack deployed.
func rolloutProgramYAML(version string) string {
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: shared
program:
  outputs:
    version: %s
`, version)
}

// ringStacksYAML is the Stacks named, each in its ring, on the Program "shared".
func ringStacksYAML(rings map[string]string) string {
	stacks := ""
	for _, name := range slices.Sorted(maps.Keys(rings)) {
		stacks += fmt.Sprintf(`---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: %s
  labels:
    app: fleet
    ring: "%s"
spec:
  stack: %s
  programRef:
    name: shared
  envRefs:
%s`, name, rings[name], name, s3EnvRefsYAML)
	}
	return stacks
}

// versionsWaiter returns a wait until the Stacks named are Ready with the versions
// (rolloutProgramYAML's output) wanted.
func versionsWaiter(t *testing.T, c client.Client, ns string) func(why string, want map[string]string) {
	return func(why string, want map[string]string) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			for name, v := range want {
				st := waitStackReadyOnce(g, c, ns, name)
				g.Expect(strings.Trim(string(st.Status.Outputs["version"].Raw), `"`)).To(Equal(v), "Stack %s", name)
			}
		}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "%s\n%s", why, describeNamespace(ns))
	}
}

// rolloutGateYAML is the gate: a suspended CronJob whose Job runs the runner image's
// stackwright binary with args (exit 0 for "version", 1 for an unknown command).
func rolloutGateYAML(arg string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: CronJob
metadata:
  name: smoke
  labels:
    stackwright.dev/rollout-gate: "true"
spec:
  schedule: "@yearly"
  suspend: true
  jobTemplate:
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          securityContext:
            runAsNonRoot: true
            runAsUser: 65532
            seccompProfile:
              type: RuntimeDefault
          containers:
          - name: smoke
            image: localhost/stackwright-runner:%s
            imagePullPolicy: IfNotPresent
            args: [%q]
            securityContext:
              allowPrivilegeEscalation: false
              capabilities:
                drop: [ALL]
`, version, arg)
}

// testFleetRollout: three Stacks on one Program in rings 0 and 1, behind a gate Job the
// cluster's Job controller runs. A new version reaches ring 0, then, once the gate Job
// exited 0, ring 1. A gate Job that exits 1 halts the next version after ring 0, and ring
// 1 keeps the version it has.
func testFleetRollout(t *testing.T, jc *jobCluster) {
	c := jc.c
	const ns = "e2e-rollout"
	createNamespace(t, c, ns)
	t.Cleanup(func() { deleteNamespace(t, c, ns) })
	stacks := ringStacksYAML(map[string]string{"r0": "0", "r1-a": "1", "r1-b": "1"})
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, s3CredentialsYAML+"---\n"+rolloutProgramYAML("v1")+stacks+"---\n"+rolloutGateYAML("version")))
	waitVersions := versionsWaiter(t, c, ns)
	waitVersions("v1 deployed", map[string]string{"r0": "v1", "r1-a": "v1", "r1-b": "v1"})

	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, `apiVersion: stackwright.dev/v1alpha1
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
    jobFrom:
      name: smoke
`))
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
	waitVersions("v2 reaches ring 0 first", map[string]string{"r0": "v2"})
	var gateDone time.Time
	NewWithT(t).Eventually(func(g Gomega) {
		getRO(g)
		g.Expect(ro.Status.Waves).NotTo(BeEmpty())
		g.Expect(ro.Status.Waves[0].GateJob).NotTo(BeEmpty())
		j := &batchv1.Job{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ro.Status.Waves[0].GateJob}, j)).To(Succeed())
		g.Expect(j.Status.CompletionTime).NotTo(BeNil(), "the gate Job completes")
		gateDone = j.Status.CompletionTime.Time
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the gate Job runs\n%s", describeNamespace(ns))
	waitVersions("v2 reaches ring 1 after the gate", map[string]string{"r1-a": "v2", "r1-b": "v2"})
	var list v1alpha1.UpdateList
	NewWithT(t).Expect(c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	for _, u := range list.Items {
		if u.Spec.StackName != "r0" && u.Spec.Revision == "generation/2" {
			NewWithT(t).Expect(u.CreationTimestamp.Time).To(BeTemporally(">=", gateDone.Truncate(time.Second)), "Update %s of ring 1 started after the gate Job completed", u.Name)
		}
	}

	// A failing gate halts v3 after ring 0; ring 1 keeps v2.
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, rolloutGateYAML("no-such-command")))
	run(t, "kubectl", "apply", "-n", ns, "-f", writeManifest(t, rolloutProgramYAML("v3")))
	waitVersions("v3 reaches ring 0", map[string]string{"r0": "v3"})
	NewWithT(t).Eventually(func(g Gomega) {
		getRO(g)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		h := meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		g.Expect(h).NotTo(BeNil())
		g.Expect(h.Reason).To(Equal(v1alpha1.ReasonGateFailed))
	}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Succeed(), "the failed gate halts the rollout\n%s", describeNamespace(ns))
	for _, name := range []string{"r1-a", "r1-b"} {
		st := &pulumiv1.Stack{}
		NewWithT(t).Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, st)).To(Succeed())
		NewWithT(t).Expect(strings.Trim(string(st.Status.Outputs["version"].Raw), `"`)).To(Equal("v2"), "Stack %s keeps v2", name)
		NewWithT(t).Expect(meta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionHeldBack)).To(BeTrue(), "Stack %s shows it is held", name)
	}
	out := run(t, "kubectl-stackwright", "-n", ns, "rollout", "status", "fleet")
	NewWithT(t).Expect(out).To(ContainSubstring("GateFailed"))
}
