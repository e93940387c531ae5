package stack_test

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack"
	"github.com/stackwright/stackwright/internal/testing/gitserver"
)

// manualStack is s.stack with approval: Manual.
func (s *scenario) manualStack(name, program string) *pulumiv1.Stack {
	st := s.stack(name, program)
	st.Spec.Stackwright = &pulumiv1.StackwrightSpec{Approval: pulumiv1.ApprovalManual}
	return st
}

// waitAwaiting waits until the Stack awaits approval of a preview of revision, and returns
// that preview's name.
func (s *scenario) waitAwaiting(name, revision string) string {
	s.t.Helper()
	var preview string
	s.eventually(func(g Gomega) {
		st := s.get(g, name)
		g.Expect(st.Status.Stackwright).NotTo(BeNil())
		a := st.Status.Stackwright.Approval
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.State).To(Equal(pulumiv1.ApprovalAwaiting))
		g.Expect(a.Revision).To(Equal(revision))
		c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.ReasonAwaitingApproval))
		g.Expect(c.Message).To(ContainSubstring(pulumiv1.ApproveAnnotation + "=" + a.Preview))
		preview = a.Preview
	})
	return preview
}

func (s *scenario) annotate(st *pulumiv1.Stack, key, value string) {
	s.t.Helper()
	s.patch(st, func() { metav1.SetMetaDataAnnotation(&st.ObjectMeta, key, value) })
}

func (s *scenario) update(name string) *v1alpha1.Update {
	s.t.Helper()
	u := &v1alpha1.Update{}
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: name}, u)).To(Succeed())
	return u
}

// stepKeys reduces an Update's steps to operation and resource, in a fixed order.
func stepKeys(u *v1alpha1.Update) []string {
	var out []string
	for _, st := range u.Status.Steps {
		out = append(out, st.Op+" "+st.URN)
	}
	slices.Sort(out)
	return out
}

func (s *scenario) events() []eventsv1.Event {
	s.t.Helper()
	var list eventsv1.EventList
	s.g.Expect(env.Client.List(s.ctx(), &list, client.InNamespace(s.ns))).To(Succeed())
	return list.Items
}

// A Manual-approval Stack previews each change and applies nothing until the approve
// annotation names that preview; the up then applies exactly the previewed steps, held to
// the preview's plan.
func TestStackReconciler_Reconcile_ManualApprovalAppliesExactlyTheApprovedPreview(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("gated", map[string]pulumiv1.Resource{"greeting": fileResource("gated.txt", "v1")}, nil)
	s.create(prog)
	st := s.manualStack("gated", "gated")
	s.create(st)

	preview := s.waitAwaiting("gated", "generation/1")
	if _, err := s.readFile("gated.txt"); err == nil {
		t.Fatal("the change was applied before anyone approved it")
	}
	p := s.update(preview)
	s.g.Expect(p.Spec.Type).To(Equal(v1alpha1.UpdateTypePreview))
	s.g.Expect(p.Spec.Options.SavePlan).To(BeTrue())
	s.g.Expect(p.Status.Steps).To(ContainElement(HaveField("Op", "create")))
	plan := &corev1.Secret{}
	s.g.Expect(env.Client.Get(s.ctx(), client.ObjectKey{Namespace: s.ns, Name: p.Status.PlanSecretName}, plan)).To(Succeed())
	s.g.Expect(plan.Data).To(HaveKey(v1alpha1.PlanSecretKey))
	s.g.Expect(metav1.IsControlledBy(plan, p)).To(BeTrue())

	// Approving an Update that is not the awaiting preview is refused and applies nothing.
	s.annotate(st, pulumiv1.ApproveAnnotation, "gated-no-such-preview")
	s.kube.WaitEvent(st, corev1.EventTypeWarning, stack.EventApprovalRefused)
	s.g.Expect(s.waitAwaiting("gated", "generation/1")).To(Equal(preview))

	s.annotate(st, pulumiv1.ApproveAnnotation, preview)
	got := s.waitReady("gated")
	s.g.Expect(s.readFile("gated.txt")).To(Equal("v1"))
	up := s.update(got.Status.LastUpdate.Name)
	s.g.Expect(up.Spec.Type).To(Equal(v1alpha1.UpdateTypeUp))
	s.g.Expect(up.Spec.Options.Plan).To(Equal(preview))
	s.g.Expect(stepKeys(up)).To(Equal(stepKeys(p)), "applied steps differ from the previewed ones")
	s.g.Expect(got.Status.Stackwright.Approval.State).To(Equal(pulumiv1.ApprovalApproved))
}

// A change arriving while a preview awaits approval voids that approval: approving the old
// preview is refused, nothing of either change is applied until the new preview is approved.
// A rejected change is never applied.
func TestStackReconciler_Reconcile_NewChangeVoidsApprovalAndRejectAppliesNothing(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	prog := s.program("moving", map[string]pulumiv1.Resource{"greeting": fileResource("moving.txt", "v1")}, nil)
	s.create(prog)
	st := s.manualStack("moving", "moving")
	s.create(st)
	s.annotate(st, pulumiv1.ApproveAnnotation, s.waitAwaiting("moving", "generation/1"))
	s.waitReady("moving")

	s.patch(prog, func() { prog.Program.Resources["greeting"] = fileResource("moving.txt", "v2") })
	stale := s.waitAwaiting("moving", "generation/2")
	s.patch(prog, func() { prog.Program.Resources["greeting"] = fileResource("moving.txt", "v3") })
	s.kube.WaitEvent(st, corev1.EventTypeNormal, stack.EventApprovalVoided)
	fresh := s.waitAwaiting("moving", "generation/3")
	s.g.Expect(fresh).NotTo(Equal(stale))
	cur := s.get(s.g, "moving")
	s.g.Expect(cur.Status.Stackwright.Approval.Message).To(ContainSubstring("the source moved from revision generation/2 to generation/3"))

	s.annotate(st, pulumiv1.ApproveAnnotation, stale)
	s.kube.WaitEvent(st, corev1.EventTypeWarning, stack.EventApprovalRefused)
	s.g.Expect(s.waitAwaiting("moving", "generation/3")).To(Equal(fresh))
	s.g.Expect(s.readFile("moving.txt")).To(Equal("v1"))

	s.annotate(st, pulumiv1.RejectAnnotation, fresh)
	s.waitCondition("moving", pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonApprovalRejected)
	s.g.Expect(s.readFile("moving.txt")).To(Equal("v1"))
	for _, u := range s.updates("moving") {
		if u.Spec.Type == v1alpha1.UpdateTypeUp {
			s.g.Expect(u.Spec.Revision).To(Equal("generation/1"), "Update %s applied a change nobody approved", u.Name)
		}
	}

	// A new change after a rejection is previewed again and can be approved.
	s.patch(prog, func() { prog.Program.Resources["greeting"] = fileResource("moving.txt", "v4") })
	s.annotate(st, pulumiv1.ApproveAnnotation, s.waitAwaiting("moving", "generation/4"))
	s.waitReady("moving")
	s.g.Expect(s.readFile("moving.txt")).To(Equal("v4"))
}

// On a git branch: a commit pushed while a preview awaits approval voids it, the preview
// of the new commit awaits approval instead, and approving it deploys that commit.
func TestStackReconciler_Reconcile_CommitBetweenPreviewAndApprovalVoidsIt(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	served := t.TempDir()
	repo, first := gitserver.NewRepo(t, served, "app", gitProgram("v1"))
	server := gitserver.NewHTTPServer(t, served, nil)
	st := s.manualStack("branch", "")
	st.Spec.ProgramRef = nil
	st.Spec.GitSource = pulumiv1.GitSource{ProjectRepo: server.URL + "/app.git", RepoDir: "infra", Branch: "main"}
	st.Spec.ResyncFrequencySeconds = 10
	s.create(st)

	stale := s.waitAwaiting("branch", first)
	second := repo.Commit(gitProgram("v2"))
	s.kube.WaitEvent(st, corev1.EventTypeNormal, stack.EventApprovalVoided)
	fresh := s.waitAwaiting("branch", second)
	s.g.Expect(s.get(s.g, "branch").Status.Stackwright.Approval.Message).To(ContainSubstring("the source moved from revision " + first + " to " + second))

	s.annotate(st, pulumiv1.ApproveAnnotation, stale)
	s.kube.WaitEvent(st, corev1.EventTypeWarning, stack.EventApprovalRefused)
	if _, err := s.readFile("app.txt"); err == nil {
		t.Fatal("approving the voided preview applied something")
	}
	s.annotate(st, pulumiv1.ApproveAnnotation, fresh)
	done := s.waitReady("branch")
	s.g.Expect(done.Status.LastUpdate.LastSuccessfulCommit).To(Equal(second))
	s.g.Expect(s.readFile("app.txt")).To(Equal("v2"))
}
