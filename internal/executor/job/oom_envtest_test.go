package job_test

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/memcgtest"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// oomLimit is the memory limit of the OOM test's runner: what pulumi, the YAML host and
// an idle provider need (about 100 MiB of their own), with room to spare.
const oomLimit = 256 << 20

// A runner whose provider plugin allocates past the runner's memory limit, in a real
// memory cgroup v1, has the plugin killed by the kernel's OOM killer: the engine fails,
// the runner sees its cgroup count the kill, and its Update fails OOMKilled, naming the
// limit; the failure is counted by its reason, and after three in a row the Stack stalls
// saying to raise the limit. Needs root and cgroup v1 (skipped elsewhere).
func TestExecutor_RunnerOutOfMemory_UpdateOOMKilledAndStackStalls(t *testing.T) {
	t.Parallel()
	cgroup := memcgtest.NewV1(t, oomLimit)
	// The suite's ./bin comes from `make tools`; the Hog is built here, from this tree.
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	plugins := t.TempDir()
	if err := repo.GoBuild(t.Context(), filepath.Join(root, "test", "provider"), "./cmd/pulumi-resource-stackwright-testing",
		filepath.Join(plugins, "pulumi-resource-stackwright-testing"), ""); err != nil {
		t.Fatal(err)
	}
	s := newScenario(t)
	sandboxes.Store(s.Namespace+"/hog", sandbox{cgroup: cgroup, pathPrefix: plugins})
	t.Cleanup(func() { sandboxes.Delete(s.Namespace + "/hog") })

	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "hog"}}
	p.Program.Resources = map[string]pulumiv1.Resource{"hog": {
		Type:       "stackwright-testing:index:Hog",
		Properties: map[string]apiextensionsv1.JSON{"mebibytes": {Raw: []byte("1024")}, "holdSeconds": {Raw: []byte("30")}},
	}}
	s.Create(p)
	s.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hog-pass"}, StringData: map[string]string{"p": "test-only"}})
	s.Create(&pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "hog"},
		Spec: pulumiv1.StackSpec{
			Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "hog"},
			EnvRefs: map[string]pulumiv1.ResourceRef{"PULUMI_CONFIG_PASSPHRASE": {Type: pulumiv1.ResourceSelectorSecret, ResourceSelector: pulumiv1.ResourceSelector{
				Secret: &pulumiv1.SecretSelector{Name: "hog-pass", Key: "p"},
			}}},
		},
	})

	st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "hog"}}
	s.WaitCondition(st, pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonUpdateFailed)
	c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled)
	s.g.Expect(c.Message).To(And(ContainSubstring("up failed 3 times in a row"), ContainSubstring("because its runner ran out of memory"),
		ContainSubstring("spec.workspaceTemplate.spec.resources.limits.memory")))
	s.g.Expect(st.Status.Stackwright.LastFailureReason).To(Equal(v1alpha1.ReasonOOMKilled))

	ups := s.updates()
	s.g.Expect(ups).To(HaveLen(3))
	for _, u := range ups {
		c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
		s.g.Expect(c).NotTo(BeNil(), "Update %s", u.Name)
		s.g.Expect(c.Reason).To(Equal(v1alpha1.ReasonOOMKilled), "Update %s: %s", u.Name, c.Message)
		s.g.Expect(u.Status.Message).To(HavePrefix("out of memory: the kernel killed a process of the runner (the runner's memory limit is 256Mi); the engine then failed: "))
	}
	s.g.Expect(metricSum(t, "stackwright_update_failures_total", map[string]string{"namespace": s.Namespace, "reason": v1alpha1.ReasonOOMKilled})).To(Equal(3.0))
	s.g.Expect(metricSum(t, "stackwright_runners_lost_total", map[string]string{"namespace": s.Namespace})).To(BeZero())
}
