package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Each wave keeps its own pace: spec.waves.pace overrides the rollout's maxParallel (a
// count or a percentage of the wave) and bakeTime, and a wave with maxParallel 0 is held,
// none of its Stacks released, until it is raised.
func TestReconciler_Reconcile_PerWavePace(t *testing.T) {
	t.Parallel()
	rings := [][]string{{"r0-a"}, {"r1-a", "r1-b", "r1-c", "r1-d"}, {"r2-a", "r2-b", "r2-c", "r2-d"}}
	f := newFleet(t, rings, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{
			ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}},
			Pace: []v1alpha1.RolloutWavePace{
				{Wave: "0", BakeTime: &metav1.Duration{Duration: 3 * time.Second}},
				{Wave: "1", MaxParallel: new(intstr.FromString("50%"))},
				{Wave: "2", MaxParallel: new(intstr.FromInt32(0))},
			},
		},
		MaxParallel: new(intstr.FromInt32(1)),
	})
	f.settle()
	stopStacks := f.stackController("generation/2")
	f.offer("generation/2")

	ro := f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWaveBaking)
	f.g.Expect(ro.Status.WaveName).To(Equal("0"), "wave 0 bakes its own bake time; the rollout has none")

	ro = f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWaveHeld)
	f.g.Expect(ro.Status.WaveName).To(Equal("2"))
	f.g.Consistently(func(g Gomega) {
		g.Expect(opened(f.rollout(g), rings[2]...)).To(BeEmpty(), "a wave held by maxParallel 0 releases nothing")
	}).WithTimeout(time.Second).Should(Succeed())

	ro = f.rollout(f.g)
	f.Patch(ro, func() { ro.Spec.Waves.Pace[2].MaxParallel = new(intstr.FromInt32(3)) })
	ro = f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	f.g.Expect(ro.Status.Stable.Revision).To(Equal("generation/2"))
	_, _, most := stopStacks()
	t.Logf("most Stacks opened and unfinished at once, per wave: %v", most)
	f.g.Expect(most).To(Equal(map[string]int{"0": 1, "1": 2, "2": 3}), "each wave at its own maxParallel: 50%% of 4, then 3")
}
