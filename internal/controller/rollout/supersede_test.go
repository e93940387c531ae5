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

// With newerRevision: Restart, a revision offered while another is rolled out stops the
// target at its wave: the released Stack finishes, nothing more is released, and the newest
// revision starts again from the first wave; the later waves never get the superseded one.
// With the default (Queue), the target reaches every wave first.
func TestReconciler_Reconcile_NewerRevision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		newer v1alpha1.RolloutNewerRevision
	}{
		{name: "Restart", newer: v1alpha1.RolloutNewerRevisionRestart},
		{name: "Queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFleet(t, [][]string{{"a"}, {"b1", "b2"}, {"c"}}, v1alpha1.StackRolloutSpec{
				Waves:         v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
				MaxParallel:   new(intstr.FromInt32(1)),
				NewerRevision: tt.newer,
			})
			f.settle()
			f.offer("generation/2")
			f.deploy("generation/2", "a")
			f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), f.all()...)).To(Equal([]string{"a", "b1"})) })

			// Two newer revisions arrive while b1 updates.
			f.offer("generation/3")
			f.offer("generation/4")
			if tt.newer == v1alpha1.RolloutNewerRevisionRestart {
				ro := f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonSuperseding)
				f.g.Expect(ro.Status.Target.Revision).To(Equal("generation/2"))
				f.g.Consistently(func(g Gomega) {
					g.Expect(opened(f.rollout(g), f.all()...)).To(Equal([]string{"a", "b1"}), "nothing more gets the superseded revision")
				}).WithTimeout(time.Second).Should(Succeed())
				f.deploy("generation/2", "b1")
				f.Eventually(func(g Gomega) {
					ro := f.rollout(g)
					g.Expect(ro.Status.Target.Revision).To(Equal("generation/4"))
					g.Expect(opened(ro, f.all()...)).To(Equal([]string{"a"}), "the newest starts from the first wave")
				})
				f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventSuperseded)).To(Equal(1))
			} else {
				f.deploy("generation/2", "b1")
				f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), f.all()...)).To(Equal([]string{"a", "b1", "b2"})) })
				f.deploy("generation/2", "b2")
				f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), "c")).To(Equal([]string{"c"})) })
				f.deploy("generation/2", "c")
				f.Eventually(func(g Gomega) {
					ro := f.rollout(g)
					g.Expect(ro.Status.Stable.Revision).To(Equal("generation/2"))
					g.Expect(ro.Status.Target.Revision).To(Equal("generation/4"), "the newest waits for the target, and the one in between is skipped")
				})
			}
			stop := f.stackController("generation/4")
			ro := f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
			stop()
			f.g.Expect(ro.Status.Stable.Revision).To(Equal("generation/4"))
		})
	}
}
