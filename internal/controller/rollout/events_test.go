package rollout_test

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
)

// Every event the controller emits announces a status that a reader can already find: the
// recorder reads the rollout from the API server as it receives each event and checks that
// the status shows what the event says (see announced). The scenario makes the controller
// emit every reason it had before pause, supersede and the preview gate, whose reasons
// their own tests emit (and the recorder checks alike); each reason is checked at least once.
func TestReconciler_Events_FollowTheStatusTheyAnnounce(t *testing.T) {
	t.Parallel()
	f := newFleet(t, [][]string{{"a"}, {"b"}, {"c"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
		Gates: v1alpha1.RolloutGates{JobFrom: &corev1.LocalObjectReference{Name: "smoke"}, Approval: v1alpha1.RolloutApprovalManual},
	})
	f.gateCronJob("smoke", true)
	f.settle()

	// Wave 0: started, Ready, gated, awaiting promotion, promoted, passed; wave 1 starts.
	f.offer("generation/2")
	f.deploy("generation/2", "a")
	f.passGateAndPromote(0)

	// Wave 1 fails, the rollout halts and is resumed.
	f.fail("generation/2", "b")
	f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackUpdateFailed)
	f.annotate(v1alpha1.RolloutResumeAnnotation)
	f.Eventually(func(g Gomega) { g.Expect(f.rollout(g).Status.Phase).To(Equal(v1alpha1.RolloutProgressing)) })
	f.deploy("generation/2", "b")
	f.passGateAndPromote(1)

	// The last wave completes the rollout; an abort then finds nothing to abort.
	f.deploy("generation/2", "c")
	f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	f.annotate(v1alpha1.RolloutAbortAnnotation)
	f.Eventually(func(g Gomega) {
		g.Expect(recorder.Reasons(f.Namespace, "fleet")).To(ContainElement(rollout.EventRequestIgnored))
	})

	// The next revision is aborted.
	f.offer("generation/3")
	f.Eventually(func(g Gomega) { g.Expect(f.rollout(g).Status.Target).NotTo(BeNil()) })
	f.annotate(v1alpha1.RolloutAbortAnnotation)
	f.Eventually(func(g Gomega) { g.Expect(f.rollout(g).Status.Phase).To(Equal(v1alpha1.RolloutAborted)) })

	all := []string{
		rollout.EventRolloutStarted, rollout.EventWaveStarted, rollout.EventWaveReady, rollout.EventGateStarted,
		rollout.EventWavePassed, rollout.EventAwaitPromotion, rollout.EventPromoted, rollout.EventRolloutHalted,
		rollout.EventRolloutResumed, rollout.EventRolloutAborted, rollout.EventRolloutSucceeded, rollout.EventRequestIgnored,
	}
	f.Eventually(func(g Gomega) {
		seen := recorder.Reasons(f.Namespace, "fleet")
		for _, r := range all {
			g.Expect(seen).To(ContainElement(r), "every reason is emitted and checked")
		}
	})
	if late := recorder.Unwritten(f.Namespace); len(late) > 0 {
		t.Fatalf("events emitted before the status they announce was written:\n%s", strings.Join(late, "\n"))
	}
	for _, e := range recorder.Of(f.Namespace, "fleet") {
		if !slices.Contains(all, e.Reason) {
			t.Errorf("event %s is not in the list of reasons this test checks", e.Reason)
		}
	}
}

// passGateAndPromote waits for the gate Job of wave i, passes it and promotes the wave,
// and waits until the next wave opens.
func (f *fleet) passGateAndPromote(i int) {
	f.t.Helper()
	var gate string
	f.Eventually(func(g Gomega) {
		gate = f.rollout(g).Status.Waves[i].GateJob
		g.Expect(gate).NotTo(BeEmpty())
	})
	f.completeJob(gate, true)
	f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonAwaitingPromotion)
	f.annotate(v1alpha1.RolloutPromoteAnnotation)
	f.Eventually(func(g Gomega) { g.Expect(int(f.rollout(g).Status.Wave)).To(Equal(i + 1)) })
}
