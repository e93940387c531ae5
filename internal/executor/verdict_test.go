package executor

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestVerdict_Apply_FailsGoneRunners(t *testing.T) {
	t.Parallel()
	start := metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	now := metav1.NewTime(start.Add(90 * time.Second))
	type outcome struct {
		Marked          bool
		Phase           v1alpha1.UpdatePhase
		Result          v1alpha1.UpdateResult
		Reason, Message string
		Duration        time.Duration
	}
	for _, tc := range []struct {
		name string
		v    Verdict
		want outcome
	}{
		{name: "AliveIsLeftRunning", v: Verdict{RecheckAfter: time.Minute}, want: outcome{Phase: v1alpha1.UpdatePhaseRunning, Reason: v1alpha1.ReasonRunning}},
		{name: "LostFailsRunnerLost", v: Verdict{Lost: "its runner Job was deleted before it reported a result"}, want: outcome{
			Marked: true, Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Reason: v1alpha1.ReasonRunnerLost,
			Message:  "runner job/team/web-1-abc lost: its runner Job was deleted before it reported a result; it will be retried",
			Duration: 90 * time.Second,
		}},
		{name: "EvictedFailsEvicted", v: Verdict{Lost: "its runner Pod was evicted by its node: Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.", LostReason: v1alpha1.ReasonEvicted}, want: outcome{
			Marked: true, Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Reason: v1alpha1.ReasonEvicted,
			Message:  "runner job/team/web-1-abc lost: its runner Pod was evicted by its node: Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.; it will be retried",
			Duration: 90 * time.Second,
		}},
		{name: "OOMKilledFailsOOMKilled", v: Verdict{Lost: "its runner ran out of memory (limit of 2Gi) and was killed", LostReason: v1alpha1.ReasonOOMKilled}, want: outcome{
			Marked: true, Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Reason: v1alpha1.ReasonOOMKilled,
			Message:  "runner job/team/web-1-abc lost: its runner ran out of memory (limit of 2Gi) and was killed; it will be retried",
			Duration: 90 * time.Second,
		}},
		{name: "OtherReasonFailsRunnerLost", v: Verdict{Lost: "its runner exited", LostReason: v1alpha1.ReasonSucceeded}, want: outcome{
			Marked: true, Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Reason: v1alpha1.ReasonRunnerLost,
			Message:  "runner job/team/web-1-abc lost: its runner exited; it will be retried",
			Duration: 90 * time.Second,
		}},
		{name: "NotStartedFailsTransient", v: Verdict{NotStarted: "its runner Pod was not scheduled within 5m0s: 0/1 nodes are available"}, want: outcome{
			Marked: true, Phase: v1alpha1.UpdatePhaseFailed, Result: v1alpha1.UpdateResultFailed, Reason: v1alpha1.ReasonTransientFailure,
			Message:  "runner job/team/web-1-abc did not start: its runner Pod was not scheduled within 5m0s: 0/1 nodes are available; it will be retried",
			Duration: 90 * time.Second,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := &v1alpha1.Update{Spec: v1alpha1.UpdateSpec{Type: v1alpha1.UpdateTypeUp}}
			u.MarkRunning("job/team/web-1-abc", start)
			got := outcome{Marked: tc.v.Apply(u, now), Phase: u.Status.Phase, Result: u.Status.Result, Message: u.Status.Message}
			if u.Status.EndTime != nil {
				got.Duration = u.Status.EndTime.Sub(u.Status.StartTime.Time)
			}
			for _, c := range u.Status.Conditions {
				if c.Type == v1alpha1.ConditionComplete || (c.Type == v1alpha1.ConditionReconciling && c.Status == metav1.ConditionTrue) {
					got.Reason = c.Reason
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
