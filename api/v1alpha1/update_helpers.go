package v1alpha1

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MarkRunnerLost records that the Update's runner ended without reporting a result: the
// Update failed, with reason RunnerLost, which the Stack controller retries like a
// transient failure.
func (u *Update) MarkRunnerLost(result UpdateResult, msg string, now metav1.Time) {
	u.Status.Phase, u.Status.Result, u.Status.Message, u.Status.EndTime = UpdatePhaseFailed, result, msg, &now
	apimeta.SetStatusCondition(&u.Status.Conditions, metav1.Condition{
		Type: ConditionComplete, Status: metav1.ConditionFalse, Reason: ReasonRunnerLost,
		Message: msg, ObservedGeneration: u.Generation,
	})
}
