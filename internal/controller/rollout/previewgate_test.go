package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
)

// preview records, as the Stack controller does, that the named Stack previewed revision
// and planned steps: the preview Update, finished, and the Stack's approval status naming it.
func (f *fleet) preview(name, revision string, steps ...v1alpha1.UpdateStep) {
	f.t.Helper()
	u := &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-preview-" + digest(revision)[7:15]},
		Spec:       v1alpha1.UpdateSpec{StackName: name, Type: v1alpha1.UpdateTypePreview, Revision: revision},
	}
	f.Create(u)
	u.Status.Phase, u.Status.Steps = v1alpha1.UpdatePhaseSucceeded, steps
	f.g.Expect(env.Client.Status().Update(f.t.Context(), u)).To(Succeed())
	f.setStatus(func(st *pulumiv1.Stack) {
		st.Status.Stackwright.Approval = &pulumiv1.ApprovalStatus{State: pulumiv1.ApprovalApproved, Revision: revision, Preview: u.Name}
	}, name)
}

// With spec.gates.preview, a wave is released only once each of its Stacks' previews of the
// target passed: one that deletes a resource halts the rollout before any Stack of the wave
// deploys, naming the Stack and the resource; a resume accepts the previews.
func TestReconciler_Reconcile_PreviewGate(t *testing.T) {
	t.Parallel()
	f := newFleet(t, [][]string{{"a"}, {"b1", "b2"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
		Gates: v1alpha1.RolloutGates{Preview: &v1alpha1.RolloutPreviewGate{NoDeletes: true, MaxChanges: new(int32(3))}},
	})
	f.settle()
	f.offer("generation/2")
	ro := f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWavePreviewing)
	f.g.Expect(ro.Status.Waves[0].State).To(Equal(v1alpha1.WavePreviewing))
	f.g.Expect(ro.Previews("a")).To(BeTrue())
	f.g.Expect(opened(ro, f.all()...)).To(BeEmpty(), "nothing deploys before its preview passed")

	f.preview("a", "generation/2", v1alpha1.UpdateStep{Op: "create", URN: "urn:pulumi:a::p::t::new"})
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), f.all()...)).To(Equal([]string{"a"})) })
	f.deploy("generation/2", "a")
	f.Eventually(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(ro.Status.Waves[1].State).To(Equal(v1alpha1.WavePreviewing))
		g.Expect(ro.Previews("b1")).To(BeTrue())
	})

	f.preview("b1", "generation/2", v1alpha1.UpdateStep{Op: "update", URN: "urn:pulumi:b1::p::t::kept"}, v1alpha1.UpdateStep{Op: "delete", URN: "urn:pulumi:b1::p::t::old-bucket"})
	f.preview("b2", "generation/2", v1alpha1.UpdateStep{Op: "update", URN: "urn:pulumi:b2::p::t::kept"})
	ro = f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonPreviewGateFailed)
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted).Message).To(ContainSubstring(
		"Stack b1: preview Update b1-preview-"), "names the Stack")
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted).Message).To(ContainSubstring(
		"deletes 1 resource(s): urn:pulumi:b1::p::t::old-bucket"), "names the resource")
	f.g.Expect(ro.Status.FailedStacks).To(Equal([]string{"b1"}))
	f.g.Consistently(func(g Gomega) {
		g.Expect(opened(f.rollout(g), "b1", "b2")).To(BeEmpty(), "no Stack of the halted wave deploys")
	}).WithTimeout(time.Second).Should(Succeed())

	f.annotate(v1alpha1.RolloutResumeAnnotation)
	f.Eventually(func(g Gomega) {
		g.Expect(opened(f.rollout(g), "b1", "b2")).To(Equal([]string{"b1", "b2"}), "a resume accepts the previews")
	})
	f.deploy("generation/2", "b1", "b2")
	f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventWavePreviewed)).To(Equal(1))
}
