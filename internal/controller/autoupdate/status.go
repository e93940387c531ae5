package autoupdate

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Reasons of a request's Progressing and Complete conditions.
const (
	ReasonQueued   = "Queued"
	ReasonRunning  = "Running"
	ReasonComplete = "Complete"
	ReasonRefused  = "Refused"
)

// set sets the three conditions PKO's clients wait on, in one place so that they always
// agree: Progressing while queued or running, then Complete with Failed saying how.
func set(req *autov1alpha1.Update, progressing, complete, failed bool, reason, failedReason, message string) {
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	req.Status.ObservedGeneration = req.Generation
	for _, c := range []metav1.Condition{
		{Type: autov1alpha1.ConditionProgressing, Status: status(progressing), Reason: reason, Message: message},
		{Type: autov1alpha1.ConditionComplete, Status: status(complete), Reason: reason, Message: message},
		{Type: autov1alpha1.ConditionFailed, Status: status(failed), Reason: failedReason, Message: message},
	} {
		c.ObservedGeneration = req.Generation
		apimeta.SetStatusCondition(&req.Status.Conditions, c)
	}
	req.Status.Message = message
}

// MarkQueued records that req was accepted and waits for its Stack to run it.
func MarkQueued(req *autov1alpha1.Update, message string) {
	set(req, true, false, false, ReasonQueued, ReasonQueued, message)
}

// MarkRunning records that Update u of the Stack runs req.
func MarkRunning(req *autov1alpha1.Update, u *v1alpha1.Update) {
	req.Status.Update = u.Name
	if t := u.Status.StartTime; t != nil {
		req.Status.StartTime = *t
	} else if req.Status.StartTime.IsZero() {
		req.Status.StartTime = u.CreationTimestamp
	}
	set(req, true, false, false, ReasonRunning, ReasonRunning, "running as Update "+u.Name)
}

// MarkFinished records the result of the finished Update u that ran req. As in PKO, the
// Failed condition's reason is the engine's result (succeeded, failed, cancelled).
func MarkFinished(req *autov1alpha1.Update, u *v1alpha1.Update, now time.Time) {
	MarkRunning(req, u)
	req.Status.EndTime = metav1.NewTime(now)
	if t := u.Status.EndTime; t != nil {
		req.Status.EndTime = *t
	}
	req.Status.Permalink = u.Status.Permalink
	req.Status.Outputs = u.Status.OutputsSecretName
	result := string(u.Status.Result)
	if result == "" {
		result = string(v1alpha1.UpdateResultFailed)
	}
	set(req, false, true, u.Status.Phase != v1alpha1.UpdatePhaseSucceeded, ReasonComplete, result, u.Status.Message)
}

// MarkRefused records that req cannot run, and why.
func MarkRefused(req *autov1alpha1.Update, reason, message string, now time.Time) {
	if req.Status.EndTime.IsZero() {
		req.Status.EndTime = metav1.NewTime(now)
	}
	set(req, false, true, true, ReasonRefused, reason, message)
}
