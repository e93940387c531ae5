package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// templateStack is a Stack of generation 3 rendered from template revision rev, whose Ready
// condition is ready as of generation readyGen.
func templateStack(name, rev string, ready metav1.ConditionStatus, readyGen int64) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3, Labels: map[string]string{v1alpha1.TemplateRevisionLabel: rev}},
		Status: pulumiv1.StackStatus{
			Conditions:  []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: ready, ObservedGeneration: readyGen}},
			Stackwright: &pulumiv1.StackwrightStatus{DesiredStateKey: "k3", DesiredStateGeneration: 3},
		},
	}
}

func TestJudgeTemplate_Verdicts(t *testing.T) {
	target := &v1alpha1.RolloutRevision{Revision: "2", Digest: "sha256:2"}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	resumed := metav1.NewTime(t0.Add(time.Minute))
	failedAt := func(st *pulumiv1.Stack, attempted, reason string) *pulumiv1.Stack {
		ts := metav1.NewTime(t0)
		st.Status.LastUpdate = &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed, LastResyncTime: &ts, Message: "boom"}
		st.Status.Stackwright.LastAttemptedKey, st.Status.Stackwright.LastFailureReason = attempted, reason
		return st
	}
	tests := []struct {
		name   string
		stack  *pulumiv1.Stack
		since  *metav1.Time
		want   verdict
		reason string
	}{
		{name: "ReadyForTheSpecRenderedFromTheTarget", stack: templateStack("s", "2", metav1.ConditionTrue, 3), want: done},
		{name: "ReadyForAnEarlierSpec", stack: templateStack("s", "2", metav1.ConditionTrue, 2), want: pending},
		{name: "ReadyAtAnotherRevision", stack: templateStack("s", "1", metav1.ConditionTrue, 3), want: pending},
		{name: "PermanentFailureOfTheTargetsSpec", stack: failedAt(templateStack("s", "2", metav1.ConditionFalse, 3), "k3", v1alpha1.ReasonPermanentFailure),
			want: failed, reason: v1alpha1.ReasonStackUpdateFailed},
		{name: "PermanentFailureBeforeResumeIsForgiven", stack: failedAt(templateStack("s", "2", metav1.ConditionFalse, 3), "k3", v1alpha1.ReasonPermanentFailure), since: &resumed, want: pending},
		{name: "FailureOfAnEarlierDesiredState", stack: failedAt(templateStack("s", "2", metav1.ConditionFalse, 3), "k2", v1alpha1.ReasonPermanentFailure), want: pending},
		{name: "FailureNotYetReconciledPastTheNewSpec", stack: failedAt(templateStack("s", "2", metav1.ConditionFalse, 2), "k3", v1alpha1.ReasonPermanentFailure), want: pending},
		{name: "FailureAtAnotherRevision", stack: failedAt(templateStack("s", "1", metav1.ConditionFalse, 3), "k3", v1alpha1.ReasonPermanentFailure), want: pending},
		{name: "TransientFailureIsRetriedNotFailed", stack: failedAt(templateStack("s", "2", metav1.ConditionFalse, 3), "k3", v1alpha1.ReasonTransientFailure), want: pending},
		{
			name: "Stalled",
			stack: func() *pulumiv1.Stack {
				st := templateStack("s", "1", metav1.ConditionFalse, 3)
				st.Status.Conditions = append(st.Status.Conditions, metav1.Condition{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "UpdateFailed", LastTransitionTime: metav1.NewTime(t0)})
				return st
			}(),
			want: failed, reason: v1alpha1.ReasonStackStalled,
		},
		{
			// The Stack controller said what it does for generation 3 before it derived
			// that spec's key: the key, and the warning of its preview, are generation 2's.
			name: "PolicyWarningOfAnEarlierSpecNotYetReconciledPast",
			stack: func() *pulumiv1.Stack {
				st := templateStack("s", "2", metav1.ConditionFalse, 3)
				st.Status.Stackwright.DesiredStateKey, st.Status.Stackwright.DesiredStateGeneration = "k2", 2
				st.Status.Stackwright.Approval = &pulumiv1.ApprovalStatus{DesiredStateKey: "k2", Violations: []pulumiv1.PolicyViolation{{Policy: "p", Enforcement: "advisory", Message: "m"}}}
				return st
			}(),
			want: pending,
		},
		{
			name: "PolicyWarningOnTheTargetsSpec",
			stack: func() *pulumiv1.Stack {
				st := templateStack("s", "2", metav1.ConditionFalse, 3)
				st.Status.Stackwright.Approval = &pulumiv1.ApprovalStatus{DesiredStateKey: "k3", Violations: []pulumiv1.PolicyViolation{{Policy: "p", Enforcement: "advisory", Message: "m"}}}
				return st
			}(),
			want: failed, reason: v1alpha1.ReasonPolicyWarning,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, _ := judgeTemplate(tt.stack, target, tt.since)
			if got != tt.want || reason != tt.reason {
				t.Errorf("judgeTemplate = %v %q, want %v %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestMostRendered_TheRevisionMostStacksAreReadyAt(t *testing.T) {
	tests := []struct {
		name   string
		stacks []*pulumiv1.Stack
		want   int64
	}{
		{name: "None", want: 0},
		{name: "NoneReady", stacks: []*pulumiv1.Stack{templateStack("a", "2", metav1.ConditionFalse, 3)}, want: 0},
		{name: "ReadyForAnEarlierSpecDoesNotCount", stacks: []*pulumiv1.Stack{templateStack("a", "2", metav1.ConditionTrue, 2), templateStack("b", "1", metav1.ConditionTrue, 3)}, want: 1},
		{name: "Most", stacks: []*pulumiv1.Stack{
			templateStack("a", "2", metav1.ConditionTrue, 3), templateStack("b", "1", metav1.ConditionTrue, 3), templateStack("c", "1", metav1.ConditionTrue, 3),
		}, want: 1},
		{name: "TieTakesTheFirstByName", stacks: []*pulumiv1.Stack{templateStack("b", "1", metav1.ConditionTrue, 3), templateStack("a", "2", metav1.ConditionTrue, 3)}, want: 2},
		{name: "NotARevision", stacks: []*pulumiv1.Stack{templateStack("a", "latest", metav1.ConditionTrue, 3)}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := make([]pulumiv1.Stack, 0, len(tt.stacks))
			for _, st := range tt.stacks {
				list = append(list, *st)
			}
			if got := mostRendered(list); got != tt.want {
				t.Errorf("mostRendered() = %d, want %d", got, tt.want)
			}
		})
	}
}
