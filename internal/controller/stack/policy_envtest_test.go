package stack_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	policyctrl "github.com/stackwright/stackwright/internal/controller/policy"
	"github.com/stackwright/stackwright/internal/controller/stack"
)

// keepResource forbids deleting (or replacing) any resource named keep.
const keepResource = `package guardrails

deny contains msg if {
	some step in input.steps
	step.op in {"delete", "replace"}
	endswith(step.urn, "::keep")
	msg := sprintf("%s must not be deleted", [step.urn])
}
`

// echoInputs reports every planned create or update with its inputs, as a careless
// policy might: secret values must reach it masked.
const echoInputs = `package echo

deny contains msg if {
	some step in input.steps
	step.op in {"create", "update"}
	msg := sprintf("%s %s with %v", [step.op, step.urn, step.inputs])
}
`

func (s *scenario) policy(name string, enforcement v1alpha1.PolicyEnforcement, rego string) *v1alpha1.Policy {
	return &v1alpha1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec:       v1alpha1.PolicySpec{Enforcement: enforcement, Rego: rego},
	}
}

// A mandatory policy stops a change that deletes a protected resource before anything is
// changed; made advisory, it lets the same change through with the violation recorded.
func TestStackReconciler_Reconcile_MandatoryPolicyBlocksDeletionAdvisoryRecords(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("guarded", map[string]pulumiv1.Resource{
		"keep":  fileResource("keep.txt", "precious"),
		"other": fileResource("other.txt", "v1"),
	}, nil)
	s.create(prog)
	st := s.stack("guarded", "guarded")
	s.create(st)
	s.waitReady("guarded")
	s.g.Expect(s.updates("guarded")).To(HaveLen(1), "a Stack no policy selects runs no preview")

	pol := s.policy("keep", v1alpha1.EnforcementMandatory, keepResource)
	s.create(pol)
	s.patch(prog, func() {
		delete(prog.Program.Resources, "keep")
		prog.Program.Resources["other"] = fileResource("other.txt", "v2")
	})
	blocked := s.waitCondition("guarded", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonPolicyViolation)
	s.g.Expect(apimeta.FindStatusCondition(blocked.Status.Conditions, pulumiv1.ConditionStalled).Message).To(ContainSubstring("::keep must not be deleted"))
	s.kube.WaitEvent(st, corev1.EventTypeWarning, stack.EventPolicyViolation)
	s.g.Expect(s.readFile("keep.txt")).To(Equal("precious"), "the blocked change deleted the resource")
	s.g.Expect(s.readFile("other.txt")).To(Equal("v1"), "the blocked change applied part of itself")
	preview := s.update(blocked.Status.Stackwright.Approval.Preview)
	s.g.Expect(preview.Status.Policy).NotTo(BeNil())
	s.g.Expect(preview.Status.Policy.Evaluated).To(Equal([]string{"Policy " + s.ns + "/keep"}))
	s.g.Expect(preview.Status.Policy.Violations).To(ConsistOf(HaveField("Enforcement", v1alpha1.EnforcementMandatory)))
	for _, u := range s.updates("guarded") {
		if u.Spec.Type == v1alpha1.UpdateTypeUp {
			s.g.Expect(u.Spec.Revision).To(Equal("generation/1"), "Update %s applied a change a policy denied", u.Name)
		}
	}

	s.patch(pol, func() { pol.Spec.Enforcement = v1alpha1.EnforcementAdvisory })
	done := s.waitReady("guarded")
	s.g.Expect(done.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
	s.requireDestroyed("keep.txt")
	s.g.Expect(s.readFile("other.txt")).To(Equal("v2"))
	s.kube.WaitEvent(st, corev1.EventTypeWarning, stack.EventPolicyWarning)
	a := done.Status.Stackwright.Approval
	s.g.Expect(a.Violations).To(ConsistOf(HaveField("Enforcement", "advisory")))
	up := s.update(done.Status.LastUpdate.Name)
	s.g.Expect(up.Spec.Options.Plan).To(Equal(a.Preview), "the up is not held to the judged plan")
}

// A policy that does not compile stops every change of the Stacks it selects, says so on
// the Stack and on itself, and never lets an update run.
func TestStackReconciler_Reconcile_PolicySyntaxErrorStopsChanges(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	pol := s.policy("broken", v1alpha1.EnforcementAdvisory, "package broken\n\ndeny contains msg if {\n\tmsg := \n}\n")
	s.create(pol)
	s.create(s.program("strict", map[string]pulumiv1.Resource{"f": fileResource("strict.txt", "v1")}, nil))
	s.create(s.stack("strict", "strict"))

	st := s.waitCondition("strict", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonPolicyInvalid)
	s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message).To(And(ContainSubstring("Policy "+s.ns+"/broken"), ContainSubstring("rego_parse_error")))
	if _, err := s.readFile("strict.txt"); err == nil {
		t.Fatal("an update ran although its policy does not compile")
	}
	for _, u := range s.updates("strict") {
		s.g.Expect(u.Spec.Type).To(Equal(v1alpha1.UpdateTypePreview), "Update %s ran", u.Name)
	}
	s.eventually(func(g Gomega) {
		p := &v1alpha1.Policy{}
		g.Expect(env.Client.Get(s.ctx(), client.ObjectKeyFromObject(pol), p)).To(Succeed())
		c := apimeta.FindStatusCondition(p.Status.Conditions, pulumiv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("rego_parse_error"))
		g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, pulumiv1.ConditionStalled)).To(HaveField("Reason", policyctrl.ReasonCompileError))
	})

	// Fixed, it lets the change through.
	s.patch(pol, func() { pol.Spec.Rego = keepResource })
	s.waitReady("strict")
	s.g.Expect(s.readFile("strict.txt")).To(Equal("v1"))
}

// Secret config never appears in what a preview records (steps, message, log, policy
// violations), nor in its plan Secret, nor in the Stack or its events.
func TestStackReconciler_Reconcile_PreviewRecordsNoSecretValue(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	const canary = "preview-Sup3rSecret-canary"
	prog := s.program("canary", map[string]pulumiv1.Resource{"f": fileResource("canary.txt", "${password}")}, nil)
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"password": {Type: "String"}}
	s.create(prog)
	s.create(secretOf(s.ns, "db", map[string]string{"password": canary}))
	s.create(s.policy("echo", v1alpha1.EnforcementAdvisory, echoInputs))
	st := s.manualStack("canary", "canary")
	st.Spec.SecretsRef = map[string]pulumiv1.ResourceRef{"password": secretRefOf("db", "password")}
	s.create(st)
	preview := s.waitAwaiting("canary", "generation/1")

	p := s.update(preview)
	s.g.Expect(p.Status.Policy.Violations).To(ContainElement(HaveField("Message", And(ContainSubstring("File::f with"), ContainSubstring("[secret]")))),
		"the echo policy did not see the file's secret content, masked")
	plan := &corev1.Secret{}
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: p.Status.PlanSecretName}, plan)).To(Succeed())
	got := s.get(s.g, "canary")
	for where, text := range map[string]string{
		"preview": mustJSON(t, p), "plan": string(plan.Data[v1alpha1.PlanSecretKey]), "stack": mustJSON(t, got),
		"events": mustJSON(t, s.events()),
	} {
		s.g.Expect(text).NotTo(ContainSubstring(canary), "secret value leaked into %s", where)
	}

	s.annotate(st, pulumiv1.ApproveAnnotation, preview)
	s.waitReady("canary")
	s.g.Expect(s.readFile("canary.txt")).To(Equal(canary))
}
