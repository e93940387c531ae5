package update

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor"
)

// markRunnerGone fails u when the verdict on its runner says it is gone (its engine
// process died with it) or never started, and reports whether it did. Nothing runs any
// more; the Stack controller retries with a new Update. The result is Failed either way, so
// that runners killed again and again (out of memory, evicted) count in
// stackwright_updates_total{result="failed"} like any failed run; the reason says which:
// RunnerLost, or TransientFailure for a runner that never started (no engine ran, so there
// is no run for the next up to look for in the backend's history).
func markRunnerGone(u *v1alpha1.Update, v executor.Verdict, now metav1.Time) bool {
	runner := u.Status.Runner
	switch {
	case v.Lost != "":
		u.MarkRunnerLost(v1alpha1.UpdateResultFailed, fmt.Sprintf("runner %s lost: %s; it will be retried", runner, v.Lost), now)
	case v.NotStarted != "":
		msg := fmt.Sprintf("runner %s did not start: %s; it will be retried", runner, v.NotStarted)
		u.Status.Phase, u.Status.Result, u.Status.Message, u.Status.EndTime = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, msg, &now
		u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTransientFailure, Message: msg})
	default:
		return false
	}
	return true
}

// runDuration is how long u ran, for the metric: zero when it has no start (a claim
// always sets one).
func runDuration(u *v1alpha1.Update) time.Duration {
	if u.Status.StartTime == nil || u.Status.EndTime == nil {
		return 0
	}
	return u.Status.EndTime.Sub(u.Status.StartTime.Time)
}
