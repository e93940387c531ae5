package rollout_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
)

// returned lists the named Stacks the rollout lets return to the stable revision.
func returned(ro *v1alpha1.StackRollout, names ...string) []string {
	var out []string
	for _, n := range names {
		if ro.Returns(n) {
			out = append(out, n)
		}
	}
	return out
}

// With spec.autoAbort, a halt aborts the target at once: the Stacks that ran it return to
// the stable revision, each wave at most its maxParallel at a time, and the rollout is
// Ready (Aborted) once they are back. The next halt beyond the limit of automatic aborts in
// a row waits for a person, halted.
func TestReconciler_Reconcile_AutoAbortPacedAndLimited(t *testing.T) {
	t.Parallel()
	wave1 := []string{"b1", "b2", "b3", "b4"}
	f := newFleet(t, [][]string{{"a"}, wave1}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{
			ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}},
			Pace:    []v1alpha1.RolloutWavePace{{Wave: "1", MaxParallel: new(intstr.FromInt32(2))}},
		},
		AutoAbort: &v1alpha1.RolloutAutoAbort{Limit: 1},
	})
	f.settle()
	f.offer("generation/2")
	f.deploy("generation/2", "a")
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), wave1...)).To(Equal([]string{"b1", "b2"})) })
	f.deploy("generation/2", "b1", "b2")
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), wave1...)).To(Equal(wave1)) })
	f.deploy("generation/2", "b3")
	f.fail("generation/2", "b4")

	// Aborted at once; wave 1 returns two at a time: b1 and b2 first.
	var ro *v1alpha1.StackRollout
	f.Eventually(func(g Gomega) {
		ro = f.rollout(g)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
		g.Expect(ro.Status.AutomaticAborts).To(Equal(int32(1)))
		g.Expect(returned(ro, append([]string{"a"}, wave1...)...)).To(Equal([]string{"a", "b1", "b2"}))
	})
	f.g.Expect(ro.Status.Aborted.Revision).To(Equal("generation/2"))
	f.g.Expect(ro.Status.PacedAbort).To(BeTrue())
	f.g.Expect(ro.Status.Waves[1].State).To(Equal(v1alpha1.WaveFailed))
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)).To(BeNil())
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionReconciling).Reason).To(Equal(v1alpha1.ReasonRollingBack))

	f.deploy("generation/1", "b1")
	f.Eventually(func(g Gomega) { g.Expect(returned(f.rollout(g), wave1...)).To(Equal([]string{"b1", "b2", "b3"})) })
	f.deploy("generation/1", "b2")
	f.Eventually(func(g Gomega) { g.Expect(returned(f.rollout(g), wave1...)).To(Equal(wave1)) })
	f.deploy("generation/1", "a", "b3", "b4")
	ro = f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutAborted)
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventRolloutHalted)).To(Equal(0))
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventRolloutAborted)).To(Equal(1))

	// The next failure is beyond the limit of one: the rollout halts and waits.
	f.offer("generation/3")
	f.fail("generation/3", "a")
	ro = f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackUpdateFailed)
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
	f.g.Expect(ro.Status.Target.Revision).To(Equal("generation/3"))
	f.g.Expect(ro.Status.AutomaticAborts).To(Equal(int32(1)))
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted).Message).To(ContainSubstring("not aborted automatically"))
}
