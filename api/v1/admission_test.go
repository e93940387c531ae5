package v1_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// The install's guidance policy warns about Stack fields accepted but not honoured, and
// refuses nothing. The test binds the shipped policy to its own namespace only, so other
// tests' Stacks draw no warning from it.
func TestStackGuidancePolicy_Create_WarnsAboutUnhonouredFields(t *testing.T) {
	ctx := testContext(t)
	ns := env.Namespace(t)
	docs := readDocs(t, filepath.Join(repoRoot(t), "config", "admission", "stack_guidance_policy.yaml"))
	if len(docs) != 1 {
		t.Fatalf("stack_guidance_policy.yaml holds %d documents; want the policy alone", len(docs))
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(docs[0].Object, &policy); err != nil {
		t.Fatal(err)
	}
	policy.Name = "test-" + ns
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-" + ns},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Warn},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	warnings, c := warningClient(t)
	for _, o := range []client.Object{&policy, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("failed to create %T: %v", o, err)
		}
		t.Cleanup(func() { _ = c.Delete(ctx, o) })
	}

	stack := func(name string, mutate func(*pulumiv1.StackSpec)) *pulumiv1.Stack {
		s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: pulumiv1.StackSpec{
			Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"},
		}}
		mutate(&s.Spec)
		return s
	}
	withPrerequisites := func(s *pulumiv1.StackSpec) { s.Prerequisites = []pulumiv1.PrerequisiteRef{{Name: "network"}} }
	withDrift := func(s *pulumiv1.StackSpec) {
		s.DriftDetection = &pulumiv1.DriftDetectionSpec{Schedules: []pulumiv1.DriftSchedule{{Cron: "*/15 * * * *"}}}
	}

	// A policy takes effect a moment after it is created: probe until it warns.
	g := NewWithT(t)
	n := 0
	g.Eventually(func() []string {
		n++
		g.Expect(c.Create(ctx, stack(fmt.Sprintf("probe-%d", n), withDrift))).To(Succeed(), "the policy must never refuse a Stack")
		return warnings.get()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(ContainElement(ContainSubstring("spec.driftDetection is accepted but not yet honoured")))

	for _, tc := range []struct {
		name   string
		mutate func(*pulumiv1.StackSpec)
		want   []string
	}{
		{name: "plainStackNoWarning", mutate: func(*pulumiv1.StackSpec) {}},
		{name: "prerequisitesHonouredNoWarning", mutate: withPrerequisites},
		{name: "driftDetectionWarns", mutate: withDrift, want: []string{"spec.driftDetection is accepted but not yet honoured"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(warnings.get()) // what earlier creates drew
			if err := c.Create(ctx, stack(strings.ToLower(tc.name), tc.mutate)); err != nil {
				t.Fatalf("refused: %v", err)
			}
			got := warnings.get()[before:]
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q; want %d containing %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q does not say %q", got[i], w)
				}
			}
		})
	}
}
