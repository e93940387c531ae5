package v1alpha1

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
)

// MarkRunning records that runner has started the Update. Reconciling=True is what kstatus
// (Flux health checks, cli-utils appliers) reads as "in progress".
func (u *Update) MarkRunning(runner string, now metav1.Time) {
	u.Status.Phase, u.Status.Runner, u.Status.StartTime = UpdatePhaseRunning, runner, &now
	u.Status.Queue = nil
	u.Status.ObservedGeneration = u.Generation
	conditions.Set(u, ConditionReconciling, metav1.ConditionTrue, ReasonRunning, fmt.Sprintf("Running %s on %s", u.Spec.Type, runner))
}

// MarkFinished records the Complete condition of a finished Update. A failed Update never
// runs again (the Stack decides whether a new one does), so it is also Stalled, which
// kstatus reads as Failed; a succeeded one reads as Current.
func (u *Update) MarkFinished(complete metav1.Condition) {
	conditions.Remove(u, ConditionReconciling)
	conditions.Set(u, ConditionComplete, complete.Status, complete.Reason, complete.Message)
	if complete.Status == metav1.ConditionTrue {
		return
	}
	conditions.Set(u, ConditionStalled, metav1.ConditionTrue, complete.Reason, complete.Message)
}

// CompleteReason is the reason of the Update's Complete condition: how it ended, "" while
// it has not.
func (u *Update) CompleteReason() string {
	if c := apimeta.FindStatusCondition(u.Status.Conditions, ConditionComplete); c != nil {
		return c.Reason
	}
	return ""
}

// MarkRunnerLost records that the Update's runner ended without reporting a result: the
// Update failed, with reason RunnerLost (or Evicted, when its node evicted it, or
// OOMKilled, when the kernel killed it out of memory), which the Stack controller retries.
func (u *Update) MarkRunnerLost(result UpdateResult, reason, msg string, now metav1.Time) {
	u.Status.Phase, u.Status.Result, u.Status.Message, u.Status.EndTime = UpdatePhaseFailed, result, msg, &now
	u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg})
}

// RunnerLostReason reports whether reason says an Update's runner may have been lost
// before it reported (RunnerLost, Evicted, OOMKilled): its run may have completed all the
// same, so the next up looks for it in the backend's history. OOMKilled is also what a
// runner that did report says when a process of it was killed; such a run failed, and
// looking for it finds it failed, so the up runs as usual.
func RunnerLostReason(reason string) bool {
	return reason == ReasonRunnerLost || reason == ReasonEvicted || reason == ReasonOOMKilled
}

// RunnerFailureReasons are the Complete condition's reasons a runner may report for a
// failed run: those runner.Finish gives. RunnerLost, Evicted and Recovered are the
// manager's findings, never a runner's; OOMKilled is both (the manager's when the runner's
// container was killed, the runner's when one of its processes was).
func RunnerFailureReasons() []string {
	return []string{
		ReasonTransientFailure, ReasonUpdateConflict, ReasonPermanentFailure, ReasonCancelled,
		ReasonPlanInvalid, ReasonMissingPlugin, ReasonBackendUnsupported, ReasonOOMKilled,
	}
}

// FailsEveryRun reports whether an Update that failed for reason would fail the same way
// on every run of the same spec (MissingPlugin, BackendUnsupported): its Stack stalls at
// once, without retries, until something a person controls changes.
func FailsEveryRun(reason string) bool {
	return reason == ReasonMissingPlugin || reason == ReasonBackendUnsupported
}

// MarkRecovered corrects the record of a lost Update whose engine run the backend's history
// shows succeeded: by names the Update that found it.
func (u *Update) MarkRecovered(by string, version int64) {
	where := "the backend's history"
	if version > 0 {
		where = fmt.Sprintf("stack version %d in the backend's history", version)
	}
	msg := fmt.Sprintf("the run succeeded (%s), but runner %s was lost before it reported; Update %s recovered the result", where, u.Status.Runner, by)
	u.Status.Phase, u.Status.Result, u.Status.Message = UpdatePhaseSucceeded, UpdateResultSucceeded, msg
	conditions.Remove(u, ConditionStalled)
	u.MarkFinished(metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonRecovered, Message: msg})
}

// TakenOver reports whether a runner other than the one the Update was bound to at its
// creation claimed it: the bound runner may have run it (it writes nothing before it
// starts) before its manager stopped.
func (u *Update) TakenOver() bool {
	return u.Spec.Runner != "" && u.Status.Runner != "" && u.Status.Runner != u.Spec.Runner
}
