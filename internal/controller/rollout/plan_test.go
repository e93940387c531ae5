package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func stackWith(name string, labels map[string]string) pulumiv1.Stack {
	return pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestPlanWaves_Divide(t *testing.T) {
	ring := func(v string) map[string]string { return map[string]string{"ring": v} }
	stacks := []pulumiv1.Stack{
		stackWith("c", ring("1")), stackWith("a", ring("0")), stackWith("b", ring("1")),
		stackWith("d", ring("2")), stackWith("e", nil), stackWith("f", ring("9")),
	}
	tests := []struct {
		name string
		spec v1alpha1.StackRolloutSpec
		want [][]string
		as   []string
	}{
		{
			name: "ByLabelInValueOrderWithTheRestLast",
			spec: v1alpha1.StackRolloutSpec{Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"0", "1", "2"}}}},
			want: [][]string{{"a"}, {"b", "c"}, {"d"}, {"e", "f"}},
			as:   []string{"0", "1", "2", otherWave},
		},
		{
			name: "ByLabelDropsEmptyWavesAndRepeatedValues",
			spec: v1alpha1.StackRolloutSpec{Waves: v1alpha1.RolloutWaves{ByLabel: &v1alpha1.RolloutWavesByLabel{Key: "ring", Values: []string{"1", "7", "1", "0", "2", "9"}}}},
			want: [][]string{{"b", "c"}, {"a"}, {"d"}, {"f"}, {"e"}},
			as:   []string{"1", "0", "2", "9", otherWave},
		},
		{
			name: "StepsAreCumulativeByName",
			spec: v1alpha1.StackRolloutSpec{Waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{{Stacks: intstr.FromInt32(1)}, {Stacks: intstr.FromString("50%")}}}},
			want: [][]string{{"a"}, {"b", "c"}, {"d", "e", "f"}},
			as:   []string{"step-0", "step-1", "step-2"},
		},
		{
			name: "PercentagesRoundUpAndStepsNeverShrink",
			spec: v1alpha1.StackRolloutSpec{Waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{{Stacks: intstr.FromString("1%")}, {Stacks: intstr.FromInt32(0)}, {Stacks: intstr.FromString("100%")}}}},
			want: [][]string{{"a"}, {"b", "c", "d", "e", "f"}},
			as:   []string{"step-0", "step-2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waves := planWaves(&tt.spec, stacks)
			var got [][]string
			var as []string
			for _, w := range waves {
				got = append(got, w.Stacks)
				as = append(as, w.Name)
				if w.State != v1alpha1.WavePending {
					t.Errorf("wave %s state %s, want Pending", w.Name, w.State)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stacks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.as, as); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRelease_Limit(t *testing.T) {
	tests := []struct {
		name     string
		released int32
		done     []string
		limit    int32
		want     int32
	}{
		{name: "StartsWithTheLimit", limit: 2, want: 2},
		{name: "OneDoneReleasesOneMore", released: 2, done: []string{"a"}, limit: 2, want: 3},
		{name: "DoneAheadAreSkippedNotCounted", released: 1, done: []string{"b", "c"}, limit: 2, want: 4},
		{name: "NeverShrinks", released: 4, limit: 1, want: 4},
		{name: "TheWaveReleasesAll", limit: 5, want: 5},
		{name: "ZeroHolds", limit: 0, want: 0},
		{name: "ZeroKeepsThoseReleased", released: 2, limit: 0, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &v1alpha1.RolloutWaveStatus{Stacks: []string{"a", "b", "c", "d", "e"}, Released: tt.released}
			release(w.Stacks, &w.Released, func(n string) bool {
				for _, d := range tt.done {
					if d == n {
						return true
					}
				}
				return false
			}, tt.limit)
			if w.Released != tt.want {
				t.Errorf("released %d, want %d", w.Released, tt.want)
			}
		})
	}
}

func TestJudge_Verdicts(t *testing.T) {
	target := &v1alpha1.RolloutRevision{Revision: "generation/2", Digest: "sha256:2"}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	resumed := metav1.NewTime(t0.Add(time.Minute))
	ready := metav1.Condition{Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue}
	failedAt := func(rev, reason string, at time.Time) pulumiv1.StackStatus {
		ts := metav1.NewTime(at)
		return pulumiv1.StackStatus{
			LastUpdate:  &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed, LastAttemptedCommit: rev, LastResyncTime: &ts, Message: "boom"},
			Stackwright: &pulumiv1.StackwrightStatus{LastFailureReason: reason},
		}
	}
	tests := []struct {
		name   string
		status pulumiv1.StackStatus
		since  *metav1.Time
		want   verdict
		reason string
	}{
		{name: "ReadyAtTarget", status: pulumiv1.StackStatus{Conditions: []metav1.Condition{ready}, LastUpdate: &pulumiv1.StackUpdateState{LastSuccessfulCommit: "generation/2"}}, want: done},
		{name: "ReadyAtAnotherRevision", status: pulumiv1.StackStatus{Conditions: []metav1.Condition{ready}, LastUpdate: &pulumiv1.StackUpdateState{LastSuccessfulCommit: "generation/1"}}, want: pending},
		{name: "PermanentFailureAtTarget", status: failedAt("generation/2", v1alpha1.ReasonPermanentFailure, t0), want: failed, reason: v1alpha1.ReasonStackUpdateFailed},
		{name: "PermanentFailureBeforeResumeIsForgiven", status: failedAt("generation/2", v1alpha1.ReasonPermanentFailure, t0), since: &resumed, want: pending},
		{name: "TransientFailureIsRetriedNotFailed", status: failedAt("generation/2", v1alpha1.ReasonTransientFailure, t0), want: pending},
		{name: "RunnerLostIsRetriedNotFailed", status: failedAt("generation/2", v1alpha1.ReasonRunnerLost, t0), want: pending},
		{name: "FailureAtAnotherRevision", status: failedAt("generation/1", v1alpha1.ReasonPermanentFailure, t0), want: pending},
		{
			name:   "Stalled",
			status: pulumiv1.StackStatus{Conditions: []metav1.Condition{{Type: pulumiv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "SpecInvalid", LastTransitionTime: metav1.NewTime(t0)}}},
			want:   failed, reason: v1alpha1.ReasonStackStalled,
		},
		{
			name: "PolicyWarningOnTheTarget",
			status: pulumiv1.StackStatus{Stackwright: &pulumiv1.StackwrightStatus{DesiredStateKey: "k", Approval: &pulumiv1.ApprovalStatus{
				DesiredStateKey: "k", Revision: "generation/2", Violations: []pulumiv1.PolicyViolation{{Policy: "p", Enforcement: "advisory", Message: "m"}},
			}}},
			want: failed, reason: v1alpha1.ReasonPolicyWarning,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Status: tt.status}
			got, reason, _ := judge(st, target, tt.since)
			if got != tt.want || reason != tt.reason {
				t.Errorf("judge = %v %q, want %v %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestGateJobName_ValidAndStable(t *testing.T) {
	long := "a-very-long-rollout-name-that-goes-on-and-on-and-on-beyond-any-limit"
	n := gateJobName(long, 3, "main@sha1:abc")
	if len(n) > 63 {
		t.Errorf("%q is %d characters", n, len(n))
	}
	if n != gateJobName(long, 3, "main@sha1:abc") || n == gateJobName(long, 3, "main@sha1:abd") || n == gateJobName(long, 2, "main@sha1:abc") {
		t.Errorf("names must be stable per wave and revision and differ otherwise: %q", n)
	}
}

func TestMixedSources_NamesEachSource(t *testing.T) {
	a := stackWith("a", nil)
	a.Spec.ProgramRef = &pulumiv1.ProgramReference{Name: "p"}
	b := stackWith("b", nil)
	b.Spec.ProgramRef = &pulumiv1.ProgramReference{Name: "p"}
	c := stackWith("c", nil)
	c.Spec.ProjectRepo, c.Spec.Branch = "https://example.com/x.git", "main"
	if msg := mixedSources([]pulumiv1.Stack{a, b}); msg != "" {
		t.Errorf("one source: %q", msg)
	}
	msg := mixedSources([]pulumiv1.Stack{a, b, c})
	for _, want := range []string{"Program/p (e.g. Stack a)", "(e.g. Stack c)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}
