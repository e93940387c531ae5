package stack

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/clip"
)

// The setters below are pure functions of the Stack they are given; the reconciler decides
// which one applies and the deferred patch persists the result.

// secretOutputValue replaces secret outputs in status, as PKO does.
const secretOutputValue = `"[secret]"`

// markReady records that the current generation is deployed.
func markReady(s *pulumiv1.Stack, msg string) {
	conditions.MarkReady(s, pulumiv1.ReasonProcessingCompleted, msg)
}

// markReconciling records progress, or a wait that clears by itself; the generation is
// not observed until its work is done.
func markReconciling(s *pulumiv1.Stack, reason, msg string) {
	conditions.MarkReconciling(s, reason, msg)
}

// markStalled records that only a human can move the Stack on.
func markStalled(s *pulumiv1.Stack, reason, msg string) { conditions.MarkStalled(s, reason, msg) }

func markSuspended(s *pulumiv1.Stack) {
	conditions.Set(s, pulumiv1.ConditionSuspended, metav1.ConditionTrue, pulumiv1.ReasonSuspended, "spec.stackwright.suspend is set: no updates run until it is cleared")
	conditions.Remove(s, pulumiv1.ConditionReconciling)
}

func clearSuspended(s *pulumiv1.Stack) { conditions.Remove(s, pulumiv1.ConditionSuspended) }

func markSourceReady(s *pulumiv1.Stack, ok bool, reason, msg string) {
	conditions.SetBool(s, pulumiv1.ConditionSourceReady, ok, reason, msg)
}

// markUpdateInFlight says which Update the Stack waits for.
func markUpdateInFlight(s *pulumiv1.Stack, u *v1alpha1.Update, detached bool) {
	verb := "Waiting to run"
	switch {
	case detached:
		verb = "Running outside the API (namespace terminating):"
	case u.Status.Phase == v1alpha1.UpdatePhaseRunning:
		verb = "Running"
	case startingBound(u):
		verb = "Starting"
	}
	msg := fmt.Sprintf("%s %s (Update %s)", verb, u.Spec.Type, u.Name)
	retry := ""
	if lu := s.Status.LastUpdate; u.Spec.Attempt > 1 && lu != nil && lu.State == pulumiv1.UpdateStateFailed && lu.Message != "" {
		// A retry may wait behind a whole fleet; meanwhile the Stack still says what is wrong.
		retry = fmt.Sprintf("; attempt %d, the last one failed: ", u.Spec.Attempt)
		msg += retry + clip.Text(lu.Message, maxFailureInMessage)
	}
	if c := conditions.Get(s, pulumiv1.ConditionReconciling); !detached && c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason == inProgressReason(u.Spec.Type) && strings.Contains(c.Message, "(Update "+u.Name+")") && strings.Contains(c.Message, retry) {
		// The condition already names the Update (and the failure it retries): a status
		// write per phase of the Update (queued, running) would double the Stack's writes
		// for what the Update itself shows.
		return
	}
	markReconciling(s, inProgressReason(u.Spec.Type), msg)
}

// startingBound reports whether u is bound to this manager's runner (spec.runner), has no
// queue position, and is not reported Running: it has started, or waits a few seconds for a
// slot (its runner says Running only once the run has lasted a while, and the Update
// controller its place in the queue only once it has waited a while).
func startingBound(u *v1alpha1.Update) bool {
	return u.Spec.Runner != "" && u.Status.Queue == nil && !u.Status.Finished() && u.Status.Phase != v1alpha1.UpdatePhaseRunning
}

// maxFailureInMessage bounds how much of the last failure a waiting retry's message repeats
// (status.lastUpdate.message has all of it).
const maxFailureInMessage = 512

// finalizeStatus derives, once at the end of every reconcile, what the outcome implies:
// the generation counts as observed only once the Stack is Ready or Stalled for it, or
// suspended with nothing in flight (all it will do until resumed; otherwise Argo CD and
// kstatus would show a suspended Stack as in progress for as long as it stays suspended),
// Reconciling never outlives the work it described, and a reconcile request counts as
// handled only when this reconcile found the desired state deployed (an Update started for
// it records the request with its intent).
func finalizeStatus(s *pulumiv1.Stack, upToDate bool) {
	if upToDate {
		s.Status.ObservedReconcileRequest = s.ReconcileRequest()
	}
	idle := conditions.IsTrue(s, pulumiv1.ConditionSuspended) && s.Status.CurrentUpdate == nil
	if !conditions.Settled(s) && !idle {
		return
	}
	s.Status.ObservedGeneration = s.Generation
	conditions.Remove(s, pulumiv1.ConditionReconciling)
}

// inProgressReason is the Reconciling reason while an operation is queued or running.
func inProgressReason(op v1alpha1.UpdateType) string {
	if op == v1alpha1.UpdateTypeDestroy {
		return pulumiv1.ReasonDestroyInProgress
	}
	return pulumiv1.ReasonUpdateInProgress
}

// failedReason is the Stalled reason once an operation failed for good.
func failedReason(op v1alpha1.UpdateType) string {
	if op == v1alpha1.UpdateTypeDestroy {
		return pulumiv1.ReasonDestroyFailed
	}
	return pulumiv1.ReasonUpdateFailed
}

func isStalled(s *pulumiv1.Stack) bool { return conditions.IsTrue(s, pulumiv1.ConditionStalled) }

func stackwrightStatus(s *pulumiv1.Stack) *pulumiv1.StackwrightStatus {
	if s.Status.Stackwright == nil {
		s.Status.Stackwright = &pulumiv1.StackwrightStatus{}
	}
	return s.Status.Stackwright
}

// recordStart records the intent to run u before it exists, so that a crash between this
// status write and the Update's creation re-creates the same Update instead of a second one.
func recordStart(s *pulumiv1.Stack, u *v1alpha1.Update) {
	sw := stackwrightStatus(s)
	if u.Spec.Attempt <= 1 || sw.LastAttemptedKey != u.Spec.DesiredStateKey {
		// A new desired state starts with a clean slate: earlier failures were about
		// something else.
		sw.PermanentFailures = 0
		sw.LostUpdates = nil
		if s.Status.LastUpdate != nil {
			s.Status.LastUpdate.Failures = 0
		}
	}
	sw.LastAttemptedKey = u.Spec.DesiredStateKey
	sw.Attempt = u.Spec.Attempt
	sw.RemediateDrift = false
	if u.Spec.Type == v1alpha1.UpdateTypeUp {
		// From here on resources may exist that only this artifact describes.
		sw.LastArtifact = &pulumiv1.ArtifactRef{Revision: u.Spec.Revision, Digest: u.Spec.ArtifactDigest, Dir: u.Spec.ProjectDir}
	}
	s.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{
		Generation:       s.Generation,
		ReconcileRequest: s.ReconcileRequest(),
		Name:             u.Name,
		Commit:           u.Spec.Revision,
	}
	s.Status.ObservedReconcileRequest = s.ReconcileRequest()
}

// failureCountsAsPermanent reports whether a failed Update counts towards stalling: only a
// failure the Update calls permanent (or one it gave no reason for) does, and running out
// of memory: the runner's limit is in the Stack's spec, and a retry under the same limit
// most likely runs out again, so after a few (each after its backoff, which also lets a
// node short of memory recover) a person must raise it. A lock conflict never does: the
// lock is another update in progress, or one whose holder Stackwright could not prove
// gone, and either way waiting is right and stalling is not.
func failureCountsAsPermanent(c *metav1.Condition) bool {
	return c == nil || c.Reason == v1alpha1.ReasonPermanentFailure || c.Reason == v1alpha1.ReasonOOMKilled || v1alpha1.FailsEveryRun(c.Reason)
}

// recordFinish mirrors a finished Update into the Stack's status: PKO's lastUpdate, the
// outputs (secret ones masked) and Stackwright's retry bookkeeping.
func recordFinish(s *pulumiv1.Stack, u *v1alpha1.Update, outputs map[string]apiextensionsv1.JSON, now time.Time) {
	sw := stackwrightStatus(s)
	prev := s.Status.LastUpdate
	lu := &pulumiv1.StackUpdateState{
		Name:                u.Name,
		Type:                string(u.Spec.Type),
		Message:             u.Status.Message,
		LastAttemptedCommit: u.Spec.Revision,
		Permalink:           u.Status.Permalink,
		LastResyncTime:      &metav1.Time{Time: now},
	}
	if u.Status.EndTime != nil {
		lu.LastResyncTime = u.Status.EndTime.DeepCopy()
	}
	if cu := s.Status.CurrentUpdate; cu != nil {
		lu.Generation, lu.ReconcileRequest = cu.Generation, cu.ReconcileRequest
	}
	if prev != nil {
		lu.LastSuccessfulCommit = prev.LastSuccessfulCommit
	}
	if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
		lu.State = pulumiv1.UpdateStateSucceeded
		lu.LastSuccessfulCommit = u.Spec.Revision
		sw.LastSuccessfulKey = u.Spec.DesiredStateKey
		sw.LastSuccessTime = lu.LastResyncTime.DeepCopy()
		sw.PermanentFailures = 0
		sw.LostUpdates = nil
		sw.LastFailureReason = ""
		if outputs != nil {
			s.Status.Outputs = outputs
		}
	} else {
		lu.State = pulumiv1.UpdateStateFailed
		lu.Failures = 1
		if prev != nil {
			lu.Failures = prev.Failures + 1
		}
		c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete)
		if failureCountsAsPermanent(c) {
			sw.PermanentFailures++
		}
		sw.LastFailureReason = ""
		if c != nil {
			sw.LastFailureReason = c.Reason
		}
		// A taken-over up that failed (a lock its bound runner still held, say) may have
		// been applied by that runner all the same: the next up looks for it too.
		if ((c != nil && v1alpha1.RunnerLostReason(c.Reason)) || u.TakenOver()) && u.Spec.Type == v1alpha1.UpdateTypeUp {
			sw.LostUpdates = append(sw.LostUpdates, u.Name)
			sw.LostUpdates = sw.LostUpdates[max(len(sw.LostUpdates)-maxLostUpdates, 0):]
		}
	}
	s.Status.LastUpdate = lu
	s.Status.CurrentUpdate = nil
}

// maxLostUpdates bounds status.stackwright.lostUpdates: a chain of lost runners that long
// means something else is wrong, and the oldest runs are the least likely to be the
// backend's latest entry.
const maxLostUpdates = 10

// maskOutputs turns an outputs Secret's data into status.outputs, with secret values
// replaced by "[secret]".
func maskOutputs(data map[string][]byte, secret map[string]bool) map[string]apiextensionsv1.JSON {
	out := make(map[string]apiextensionsv1.JSON, len(data))
	for k, v := range data {
		switch {
		case secret[k]:
			out[k] = apiextensionsv1.JSON{Raw: []byte(secretOutputValue)}
		case json.Valid(v):
			out[k] = apiextensionsv1.JSON{Raw: append([]byte(nil), v...)}
		default:
			b, _ := json.Marshal(string(v)) // a string always marshals
			out[k] = apiextensionsv1.JSON{Raw: b}
		}
	}
	return out
}

// recordDrift folds a finished drift check into the status: DriftDetected, when it ran, and
// whether to remediate. It never touches status.lastUpdate, which describes the Stack's
// own updates (a failed check must not look like a failed deployment).
func recordDrift(s *pulumiv1.Stack, u *v1alpha1.Update, now time.Time) (found bool) {
	end := metav1.NewTime(now)
	if u.Status.EndTime != nil {
		end = *u.Status.EndTime
	}
	s.Status.DriftDetection = &pulumiv1.DriftDetectionStatus{LastCheck: &end, LastUpdate: u.Name}
	s.Status.CurrentUpdate = nil
	switch {
	case u.Status.Phase != v1alpha1.UpdatePhaseSucceeded:
		conditions.Set(s, pulumiv1.ConditionDriftDetected, metav1.ConditionUnknown, reasonDriftCheckFailed,
			fmt.Sprintf("drift check failed (Update %s): %s", u.Name, u.Status.Message))
	case hasChanges(u.Status.Changes):
		found = true
		msg := fmt.Sprintf("%s (Update %s)", u.Status.Message, u.Name)
		if autoRemediate(&s.Spec) {
			stackwrightStatus(s).RemediateDrift = true
			msg += "; remediating with an update"
		}
		conditions.Set(s, pulumiv1.ConditionDriftDetected, metav1.ConditionTrue, pulumiv1.ReasonDriftFound, msg)
	default:
		conditions.Set(s, pulumiv1.ConditionDriftDetected, metav1.ConditionFalse, pulumiv1.ReasonNoDrift, fmt.Sprintf("%s (Update %s)", u.Status.Message, u.Name))
	}
	return found
}

// markHeldBack records that a StackRollout holds the Stack back, and why.
func markHeldBack(stack *pulumiv1.Stack, reason, msg string) {
	conditions.Set(stack, pulumiv1.ConditionHeldBack, metav1.ConditionTrue, reason, msg)
}

// clearHeldBack records that no StackRollout holds the Stack back.
func clearHeldBack(stack *pulumiv1.Stack) { conditions.Remove(stack, pulumiv1.ConditionHeldBack) }

// clearReconciling records that nothing is in progress any more (a released Stack).
func clearReconciling(stack *pulumiv1.Stack) { conditions.Remove(stack, pulumiv1.ConditionReconciling) }

// markProgress says what a slow phase is doing (conditions.MarkProgress).
func markProgress(stack *pulumiv1.Stack, msg string) { conditions.MarkProgress(stack, msg) }
