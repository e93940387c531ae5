package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/rollout"
)

// settle has the Stacks report that their source offers generation/1, the revision they
// deployed, as the Stack controller does once a rollout selects them, and waits until the
// rollout is Ready with it as the stable revision.
func (f *fleet) settle() {
	f.t.Helper()
	f.offer("generation/1")
	ro := f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
	f.g.Expect(ro.Status.Stable).To(Equal(&v1alpha1.RolloutRevision{Revision: "generation/1", Digest: digest("generation/1")}))
}

// Ten Stacks in rings 0/1/2 of sizes 1/3/6. A new revision opens ring 0 alone; ring 1
// opens only after ring 0 is Ready, baked and its gate Job passed, and never more than
// maxParallel of a wave's Stacks are opened and unfinished. The new revision fails on one
// ring-1 Stack: the rollout halts naming it, and ring 2 stays closed whatever its Stacks
// do; abort closes every wave, and the rollout is Ready once the opened Stacks are back at
// the stable revision; a fixed revision then reaches every ring, each after the previous
// one's gate.
func TestReconciler_Reconcile_WavesGatesHaltAbortAndFix(t *testing.T) {
	t.Parallel()
	const bake = 2 * time.Second
	rings := [][]string{{"r0-a"}, {"r1-a", "r1-b", "r1-c"}, {"r2-a", "r2-b", "r2-c", "r2-d", "r2-e", "r2-f"}}
	f := newFleet(t, rings, v1alpha1.StackRolloutSpec{
		Waves:       v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}},
		MaxParallel: ptrTo(intstr.FromInt32(2)),
		BakeTime:    &metav1.Duration{Duration: bake},
		Gates:       v1alpha1.RolloutGates{JobFrom: &corev1.LocalObjectReference{Name: "smoke"}},
	})
	f.gateCronJob("smoke", true)
	f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRolloutWaiting)
	f.settle()

	f.offer("generation/2")
	f.Eventually(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutProgressing))
		g.Expect(ro.Status.Target.Revision).To(Equal("generation/2"))
		g.Expect(ro.Status.Waves).To(HaveLen(3))
		g.Expect(opened(ro, f.all()...)).To(Equal([]string{"r0-a"}), "ring 0 alone opens")
	})
	f.setStatus(func(st *pulumiv1.Stack) {
		deployed("generation/2")(st)
		st.Status.Outputs = map[string]apiextensionsv1.JSON{"url": jsonValue("https://r0-a.example")}
	}, "r0-a")

	// Ring 0 is Ready: after the bake, the gate Job runs; ring 1 waits for it.
	var ro *v1alpha1.StackRollout
	f.Eventually(func(g Gomega) {
		ro = f.rollout(g)
		g.Expect(ro.Status.Waves[0].GateJob).NotTo(BeEmpty())
		g.Expect(ro.Status.Waves[0].State).To(Equal(v1alpha1.WaveGating))
	})
	gate := ro.Status.Waves[0].GateJob
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: gate}}
	f.g.Expect(f.Get(job)).To(Succeed())
	f.g.Expect(job.CreationTimestamp.Time).To(BeTemporally(">=", ro.Status.Waves[0].ReadyTime.Add(bake)), "the gate runs after the bake")
	envOf := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		envOf[e.Name] = e.Value
	}
	f.g.Expect(envOf).To(Equal(map[string]string{
		rollout.EnvRollout: "fleet", rollout.EnvWave: "0", rollout.EnvRevision: "generation/2", rollout.EnvStacks: "r0-a",
		rollout.EnvOutputs: `{"r0-a":{"url":"https://r0-a.example"}}`,
	}))
	f.g.Expect(metav1.IsControlledBy(job, ro)).To(BeTrue())
	f.g.Expect(job.Labels).To(HaveKeyWithValue(v1alpha1.RolloutLabel, "fleet"))
	f.g.Consistently(func(g Gomega) {
		g.Expect(opened(f.rollout(g), f.all()...)).To(Equal([]string{"r0-a"}), "no ring-1 Stack opens before the gate passes")
	}).WithTimeout(2 * time.Second).Should(Succeed())
	f.completeJob(gate, true)

	// Ring 1 opens maxParallel Stacks at a time; r1-b fails and the rollout halts naming it.
	f.Eventually(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(ro.Status.Waves[0].State).To(Equal(v1alpha1.WaveDone))
		g.Expect(opened(ro, f.all()...)).To(Equal([]string{"r0-a", "r1-a", "r1-b"}))
	})
	f.deploy("generation/2", "r1-a")
	f.Eventually(func(g Gomega) {
		g.Expect(opened(f.rollout(g), f.all()...)).To(Equal([]string{"r0-a", "r1-a", "r1-b", "r1-c"}), "r1-c opens once r1-a is done")
	})
	f.fail("generation/2", "r1-b")
	ro = f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackUpdateFailed)
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted).Message).To(ContainSubstring("Stack r1-b failed to update to generation/2"))
	f.g.Expect(ro.Status.FailedStacks).To(Equal([]string{"r1-b"}))
	f.g.Expect(ro.Status.Waves[1].State).To(Equal(v1alpha1.WaveFailed))
	f.g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, pulumiv1.ConditionStalled)).To(BeTrue(), "%v", ro.Status.Conditions)

	// Ring 2 stays closed, also through its Stacks' resyncs; the halt is announced once.
	f.deploy("generation/1", rings[2]...)
	f.g.Consistently(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
		g.Expect(opened(ro, rings[2]...)).To(BeEmpty())
	}).WithTimeout(2 * time.Second).Should(Succeed())
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventRolloutHalted)).To(Equal(1))

	// Abort: every wave closes; the rollout is Ready once the opened Stacks are back at v1.
	f.annotate(v1alpha1.RolloutAbortAnnotation)
	ro = f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRollingBack)
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))
	f.g.Expect(ro.Status.Aborted.Revision).To(Equal("generation/2"))
	f.g.Expect(ro.Status.Target).To(BeNil())
	f.g.Expect(opened(ro, f.all()...)).To(BeEmpty())
	f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)).To(BeNil())
	f.deploy("generation/1", "r0-a", "r1-a", "r1-b")
	ro = f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutAborted)
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutAborted))

	// A fixed revision reaches every ring, each after the previous one's gate.
	stopGates := f.autoPassGates()
	stopStacks := f.stackController("generation/3")
	f.offer("generation/3")
	ro = f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	most, early, _ := stopStacks()
	stopGates()
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
	f.g.Expect(ro.Status.Stable.Revision).To(Equal("generation/3"))
	f.g.Expect(ro.Status.Target).To(BeNil())
	f.g.Expect(ro.Status.Updated).To(Equal(int32(10)))
	f.g.Expect(early).To(BeEmpty(), "Stacks opened before the previous wave's gate passed")
	t.Logf("most Stacks opened and unfinished at once: %d", most)
	f.g.Expect(most).To(BeNumerically("<=", 2), "never more than maxParallel Stacks opened and unfinished at once")
}

// A halted rollout resumed forgives the failures before the resume and asks the failed
// Stacks to retry now; requests that do not apply to the rollout's state are recorded as
// handled, so that they never act later by surprise.
func TestReconciler_Reconcile_ResumeForgivesAndRetries(t *testing.T) {
	t.Parallel()
	f := newFleet(t, [][]string{{"a"}, {"b"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
	})
	f.settle()
	f.offer("generation/2")
	f.fail("generation/2", "a")
	ro := f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonStackUpdateFailed)
	f.g.Expect(ro.Status.FailedStacks).To(Equal([]string{"a"}))

	resume := f.annotate(v1alpha1.RolloutResumeAnnotation)
	f.Eventually(func(g Gomega) {
		ro = f.rollout(g)
		g.Expect(ro.Status.HandledResume).To(Equal(resume))
		g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutProgressing))
		g.Expect(ro.Status.ResumeTime).NotTo(BeNil())
		g.Expect(ro.Status.FailedStacks).To(BeEmpty())
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)).To(BeNil())
	})
	a := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	f.g.Expect(f.Get(a)).To(Succeed())
	retry, err := time.Parse(time.RFC3339Nano, a.Annotations[pulumiv1.ReconcileRequestAnnotation])
	f.g.Expect(err).NotTo(HaveOccurred(), "the failed Stack is asked to retry")
	f.g.Expect(retry.Truncate(time.Second)).To(BeTemporally("==", ro.Status.ResumeTime.Time), "the retry is requested at the resume")
	f.g.Consistently(func(g Gomega) {
		g.Expect(f.rollout(g).Status.Phase).To(Equal(v1alpha1.RolloutProgressing), "the failure before the resume is forgiven")
	}).WithTimeout(time.Second).Should(Succeed())

	f.deploy("generation/2", "a")
	f.Eventually(func(g Gomega) { g.Expect(opened(f.rollout(g), "b")).To(Equal([]string{"b"})) })
	f.deploy("generation/2", "b")
	f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)

	// Idle now: each request is ignored, and recorded as handled.
	for _, key := range []string{v1alpha1.RolloutResumeAnnotation, v1alpha1.RolloutAbortAnnotation, v1alpha1.RolloutPromoteAnnotation} {
		v := f.annotate(key)
		f.Eventually(func(g Gomega) {
			st := f.rollout(g).Status
			g.Expect(map[string]string{
				v1alpha1.RolloutResumeAnnotation: st.HandledResume, v1alpha1.RolloutAbortAnnotation: st.HandledAbort, v1alpha1.RolloutPromoteAnnotation: st.HandledPromote,
			}).To(HaveKeyWithValue(key, v))
		})
	}
	ro = f.rollout(f.g)
	f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutIdle))
	f.g.Expect(ro.Status.Stable.Revision).To(Equal("generation/2"))
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventRequestIgnored)).To(Equal(3))
}

// With manual approval a wave that passed its gates waits for a promotion, and the last
// wave needs none.
func TestReconciler_Reconcile_ManualApprovalWaitsForPromotion(t *testing.T) {
	t.Parallel()
	f := newFleet(t, [][]string{{"a"}, {"b"}}, v1alpha1.StackRolloutSpec{
		Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
		Gates: v1alpha1.RolloutGates{Approval: v1alpha1.RolloutApprovalManual},
	})
	f.settle()
	f.offer("generation/2")
	f.deploy("generation/2", "a")
	ro := f.waitCondition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonAwaitingPromotion)
	f.g.Expect(ro.Status.Waves[0].State).To(Equal(v1alpha1.WaveAwaitingPromotion))
	f.g.Consistently(func(g Gomega) {
		g.Expect(opened(f.rollout(g), "b")).To(BeEmpty(), "the next wave waits for the promotion")
	}).WithTimeout(time.Second).Should(Succeed())

	promote := f.annotate(v1alpha1.RolloutPromoteAnnotation)
	f.Eventually(func(g Gomega) {
		ro := f.rollout(g)
		g.Expect(ro.Status.HandledPromote).To(Equal(promote))
		g.Expect(ro.Status.Waves[0].State).To(Equal(v1alpha1.WaveDone))
		g.Expect(opened(ro, "b")).To(Equal([]string{"b"}))
	})
	f.deploy("generation/2", "b")
	ro = f.waitCondition(pulumiv1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	f.g.Expect(ro.Status.Stable.Revision).To(Equal("generation/2"))
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventAwaitPromotion)).To(Equal(1))
	f.g.Expect(recorder.Count(f.Namespace, "fleet", rollout.EventPromoted)).To(Equal(1))
}

// A gate that fails, or cannot run, halts the rollout at its wave.
func TestReconciler_Reconcile_GateFailureHalts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cronJob  bool
		consent  bool
		jobFails bool
		want     string
	}{
		{name: "JobFailed", cronJob: true, consent: true, jobFails: true, want: "failed (BackoffLimitExceeded): smoke test exited 1"},
		{name: "CronJobWithoutConsent", cronJob: true, want: `CronJob "smoke" (spec.gates.jobFrom) is not labelled ` + v1alpha1.RolloutGateLabel + "=true"},
		{name: "CronJobMissing", want: `CronJob "smoke" (spec.gates.jobFrom) not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFleet(t, [][]string{{"a"}, {"b"}}, v1alpha1.StackRolloutSpec{
				Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1"}}},
				Gates: v1alpha1.RolloutGates{JobFrom: &corev1.LocalObjectReference{Name: "smoke"}},
			})
			if tt.cronJob {
				f.gateCronJob("smoke", tt.consent)
			}
			f.settle()
			f.offer("generation/2")
			f.deploy("generation/2", "a")
			if tt.jobFails {
				var gate string
				f.Eventually(func(g Gomega) {
					gate = f.rollout(g).Status.Waves[0].GateJob
					g.Expect(gate).NotTo(BeEmpty())
				})
				f.completeJob(gate, false)
			}
			ro := f.waitCondition(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonGateFailed)
			f.g.Expect(ro.Status.Phase).To(Equal(v1alpha1.RolloutHalted))
			f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted).Message).To(ContainSubstring(tt.want))
			f.g.Expect(opened(ro, "b")).To(BeEmpty())
			// Every cause halts alike: settled for its generation, not gating a Job that
			// was never created.
			f.g.Expect(apimeta.IsStatusConditionTrue(ro.Status.Conditions, pulumiv1.ConditionReconciling)).To(BeFalse(), "%v", ro.Status.Conditions)
			f.g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		})
	}
}

// A rollout whose selection cannot be rolled out stalls, saying why.
func TestReconciler_Reconcile_StallsOnASelectionItCannotRollOut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		selector metav1.LabelSelector
		other    *pulumiv1.StackSpec
		reason   string
		want     string
	}{
		{
			name:     "SelectorSelectsEveryStack",
			selector: metav1.LabelSelector{MatchLabels: map[string]string{}},
			reason:   pulumiv1.ReasonSpecInvalid, want: "spec.selector selects every Stack of the namespace",
		},
		{
			name:     "SelectorInvalid",
			selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"fleet"}}}},
			reason:   pulumiv1.ReasonSpecInvalid, want: "spec.selector is invalid",
		},
		{
			name:     "MixedSources",
			selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet"}},
			other:    &pulumiv1.StackSpec{Stack: "c", GitSource: pulumiv1.GitSource{ProjectRepo: "https://example.com/infra.git", Branch: "main"}},
			reason:   v1alpha1.ReasonMixedSources, want: "the selected Stacks deploy from more than one source",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newStacks(t, [][]string{{"a", "b"}})
			if tt.other != nil {
				f.Create(&pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"app": "fleet"}}, Spec: *tt.other})
			}
			f.createRollout(v1alpha1.StackRolloutSpec{
				Selector: tt.selector,
				Waves:    v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{{Stacks: intstr.FromInt32(1)}}},
			})
			ro := f.waitCondition(pulumiv1.ConditionStalled, metav1.ConditionTrue, tt.reason)
			f.g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, pulumiv1.ConditionStalled).Message).To(ContainSubstring(tt.want))
			f.g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation), "a stalled rollout has observed its generation")
		})
	}
}
