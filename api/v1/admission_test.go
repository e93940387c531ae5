package v1_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// guidanceClient binds the install's guidance policy to a namespace of its own, so other
// tests' Stacks draw no warning from it, and returns that namespace with a client whose
// warnings are recorded. It returns once the policy is in force.
func guidanceClient(t *testing.T) (string, *warningRecorder, client.Client) {
	t.Helper()
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
	// A policy takes effect a moment after it is created: probe until it warns.
	g := NewWithT(t)
	n := 0
	g.Eventually(func() []string {
		n++
		probe := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n), Namespace: ns}, Spec: pulumiv1.StackSpec{
			Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "p"},
			DriftDetection: &pulumiv1.DriftDetectionSpec{Schedules: []pulumiv1.DriftSchedule{{Cron: "*/15 * * * *"}}},
		}}
		g.Expect(c.Create(ctx, probe)).To(Succeed(), "the policy must never refuse a Stack")
		return warnings.get()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(ContainElement(ContainSubstring("spec.driftDetection is accepted but not yet honoured")))
	return ns, warnings, c
}

// createWithWarnings creates a Stack from YAML below metadata and returns the warnings the
// create drew; the policy must never refuse one.
func createWithWarnings(t *testing.T, c client.Client, w *warningRecorder, ns, name, body string) []string {
	t.Helper()
	var fields map[string]any
	if err := yaml.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatalf("bad test case: %v", err)
	}
	obj := newObject("pulumi.com/v1", "Stack", ns, name)
	for k, v := range fields {
		if k != "metadata" {
			obj.Object[k] = v
		}
	}
	before := len(w.get())
	if err := c.Create(testContext(t), obj, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("refused: %v", err)
	}
	return w.get()[before:]
}

func TestStackGuidancePolicy_Create_WarnsAboutUnhonouredFields(t *testing.T) {
	ns, warnings, c := guidanceClient(t)
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{name: "plainStackNoWarning", body: "spec: {stack: dev, programRef: {name: p}}"},
		{name: "prerequisitesHonouredNoWarning", body: "spec: {stack: dev, programRef: {name: p}, prerequisites: [{name: network, requirement: {succeededWithinDuration: 1h}}]}"},
		{name: "driftDetectionWarns", body: `spec: {stack: dev, programRef: {name: p}, driftDetection: {schedules: [{cron: "*/15 * * * *"}]}}`, want: []string{"spec.driftDetection is accepted but not yet honoured"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := createWithWarnings(t, c, warnings, ns, strings.ToLower(tc.name), tc.body)
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

// warnedField reduces a finding to the top-level field it is about ("spec.envRefs" for
// "spec.envRefs[HOME]: ..."), which is how the policy's fixed messages and Review's
// detailed ones are compared.
var (
	warnedField  = regexp.MustCompile(`^spec(\.[A-Za-z]+)?`)
	policyPrefix = regexp.MustCompile(`^Validation failed for ValidatingAdmissionPolicy '[^']*' with binding '[^']*': `)
)

func warnedFields(findings []string) []string {
	var fields []string
	for _, f := range findings {
		fields = append(fields, warnedField.FindString(policyPrefix.ReplaceAllString(f, "")))
	}
	slices.Sort(fields)
	return slices.Compact(fields)
}

// The policy warns at apply time about exactly what Review reports to the controller: every
// case Review finds something in draws a warning about the same field, and nothing else.
func TestStackGuidancePolicy_Create_WarnsAsReviewFinds(t *testing.T) {
	ns, warnings, c := guidanceClient(t)
	for _, tc := range reviewCases {
		t.Run(tc.name, func(t *testing.T) {
			got := createWithWarnings(t, c, warnings, ns, strings.ToLower(tc.name), tc.body)
			r := reviewOf(t, tc.body)
			want := warnedFields(append(r.Problems, r.Ignored...))
			if diff := cmp.Diff(want, warnedFields(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warned fields differ from Review's (-review +policy):\n%s\nwarnings: %q", diff, got)
			}
			if len(r.Problems) > 0 && !slicesContainSubstring(got, "will stall (SpecInvalid)") {
				t.Errorf("warnings %q do not say that the Stack will stall", got)
			}
		})
	}
}
