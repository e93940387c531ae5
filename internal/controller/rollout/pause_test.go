package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
)

// A paused rollout starts nothing: not an offered revision, not another Stack of its wave
// (maxParallel 1), whether a request or spec.paused pauses it; a resume request lifts its
// own pause but not spec.paused, and once neither holds the rollout goes on and completes.
func TestReconciler_Reconcile_PauseHoldsWhatHasNotStarted(t *testing.T) {
	t.Parallel()
	f := newFleet(t, [][]string{{"a", "b", "c"}, {"d"}}, v1alpha1.StackRolloutSpec{
		Waves:       v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
		MaxParallel: ptrTo(intstr.FromInt32(1)),
	})
	f.settle()
	wave0 := []string{"a", "b", "c"}

	// Paused while idle: the offered revision does not start.
	pause := f.annotate(v1alpha1.RolloutPauseAnnotation)
	ro := f.waitCondition(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPauseRequested)
	f.g.Expect(ro.Status.HandledPause).To(Equal(pause))
	f.g.Expect(ro.Status.PauseTime).NotTo(BeNil())
	f.offer("generation/2")
	f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRolloutPaused)
	f.g.Consistently(func(g Gomega) {
		g.Expect(f.rollout(g).Status.Target).To(BeNil(), "a paused rollout starts no revision")
	}).WithTimeout(time.Second).Should(Succeed())

	f.annotate(v1alpha1.RolloutResumeAnnotation)
	f.Eventually(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(ro.Status.PauseTime).To(BeNil())
		g.Expect(ro.Status.Target).NotTo(BeNil())
		g.Expect(opened(ro, f.all()...)).To(Equal([]string{"a"}))
	})

	// Paused mid-wave: a finishes, and b is not released.
	f.annotate(v1alpha1.RolloutPauseAnnotation)
	f.waitCondition(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPauseRequested)
	f.deploy("generation/2", "a")
	f.Eventually(func(g Gomega) { g.Expect(f.rollout(g).Status.Waves[0].Updated).To(Equal(int32(1))) })
	f.g.Consistently(func(g Gomega) {
		g.Expect(opened(f.rollout(g), wave0...)).To(Equal([]string{"a"}), "a paused rollout releases no Stack")
	}).WithTimeout(time.Second).Should(Succeed())

	// spec.paused holds it too, through a resume request, which lifts the request's pause
	// only.
	f.setPaused(true)
	f.waitCondition(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonSpecPaused)
	f.annotate(v1alpha1.RolloutResumeAnnotation)
	f.Eventually(func(g Gomega) { g.Expect(f.rollout(g).Status.PauseTime).To(BeNil()) })
	f.g.Consistently(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(opened(ro, wave0...)).To(Equal([]string{"a"}), "spec.paused releases no Stack")
		g.Expect(ro.Status.Conditions).To(ContainElement(HaveField("Reason", v1alpha1.ReasonSpecPaused)))
	}).WithTimeout(time.Second).Should(Succeed())

	f.setPaused(false)
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), wave0...)).To(Equal([]string{"a", "b"})) })
	f.deploy("generation/2", "b", "c")
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), "d")).To(Equal([]string{"d"})) })
	f.deploy("generation/2", "d")
	ro = f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	f.g.Expect(ro.Status.Stable.Revision).To(Equal("generation/2"))
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventRolloutPaused)).To(Equal(2))
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventRolloutUnpaused)).To(Equal(2))
}
