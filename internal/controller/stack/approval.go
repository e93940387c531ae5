package stack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
	"github.com/stackwright/stackwright/internal/crashpoint"
	guardrails "github.com/stackwright/stackwright/internal/policy"
)

// Approval and policy events.
const (
	EventAwaitingApproval = "AwaitingApproval"
	EventApproved         = "Approved"
	EventApprovalVoided   = "ApprovalVoided"
	EventApprovalRefused  = "ApprovalRefused"
	EventRejected         = "Rejected"
	EventPolicyViolation  = "PolicyViolation"
	EventPolicyWarning    = "PolicyWarning"
)

// gateChange holds an up until the preview of exactly this change has passed the policies
// that select the Stack and, with Manual approval, a person approved it: it starts that
// preview (which saves the update plan), waits for the approve or reject annotation, and
// then lets the up through, held to the previewed plan. A new desired state, a new try
// after a failure, or another set of policies voids an approval and makes a new preview.
// The target of a StackRollout with a preview gate is previewed so too, and while the
// rollout only asks for the preview its up waits. Stacks with Auto approval, no policy and
// no such rollout pay nothing.
func (r *Reconciler) gateChange(ctx context.Context, s *scope) (bool, error) {
	if s.next.Action != decide.Run || s.op != v1alpha1.UpdateTypeUp {
		return true, nil
	}
	stack := s.stack
	policies, err := guardrails.Select(ctx, r.Client, stack)
	if err != nil {
		markReconciling(stack, pulumiv1.ReasonStackProcessing, err.Error())
		return false, err
	}
	if len(policies) == 0 && stack.Spec.ApprovalMode() != pulumiv1.ApprovalManual && !s.rolloutPreview {
		return true, nil
	}
	s.policyKey = guardrails.Key(policies)
	// A held change is looked at again as an idle Stack is: a new commit of a git source is
	// only seen by polling, and voids what waits.
	s.requeueAfter(stack.Spec.ResyncPeriod())
	a := stackwrightStatus(stack).Approval
	if a == nil || a.DesiredStateKey != s.key || a.Attempt != s.next.Attempt || a.PolicyKey != s.policyKey {
		return r.startPreview(ctx, s, r.voidApproval(s, a))
	}
	if a.State == pulumiv1.ApprovalAwaiting {
		r.handleApprovalAnnotations(s, a)
	}
	switch a.State {
	case pulumiv1.ApprovalApproved:
		if s.previewOnly {
			markReconciling(stack, pulumiv1.ReasonWaveClosed, fmt.Sprintf("preview Update %s of %s is done (%s); the StackRollout judges it, and the up waits for the wave to open", a.Preview, a.Revision, a.Summary))
			return false, nil
		}
		s.plan = a.Preview
		return true, nil
	case pulumiv1.ApprovalPreviewing, pulumiv1.ApprovalFailed:
		// Not in flight (observeUpdate waits for one that is): it was lost before it ran.
		return r.startPreview(ctx, s, "")
	case pulumiv1.ApprovalBlocked, pulumiv1.ApprovalRejected:
		if stack.ReconcileRequested() {
			// A verdict may hang on the resources' state, which a preview reads anew. Both
			// states recorded the request pending when they were reached: only a newer one
			// counts here.
			return r.startPreview(ctx, s, "")
		}
		if a.State == pulumiv1.ApprovalRejected {
			markStalled(stack, pulumiv1.ReasonApprovalRejected, fmt.Sprintf("the change previewed by Update %s was rejected; nothing was applied. A new desired state, or the %s annotation, makes a new preview",
				a.Preview, pulumiv1.ReconcileRequestAnnotation))
			return false, nil
		}
		reason := pulumiv1.ReasonPolicyViolation
		if slices.ContainsFunc(a.Violations, func(v pulumiv1.PolicyViolation) bool { return v.Enforcement == enforcementError }) {
			reason = pulumiv1.ReasonPolicyInvalid
		}
		markStalled(stack, reason, blockedMessage(a))
		return false, nil
	}
	markReconciling(stack, pulumiv1.ReasonAwaitingApproval, awaitingMessage(stack, a))
	return false, nil
}

// handleApprovalAnnotations acts on approve and reject annotations it has not acted on yet:
// one naming the preview awaiting approval approves or rejects it (reject wins), one naming
// anything else is refused with an event.
func (r *Reconciler) handleApprovalAnnotations(s *scope, a *pulumiv1.ApprovalStatus) {
	stack := s.stack
	ann := stack.GetAnnotations()
	if v := ann[pulumiv1.RejectAnnotation]; v != "" && v != a.HandledRejection {
		a.HandledRejection = v
		if v == a.Preview {
			a.State = pulumiv1.ApprovalRejected
			// A reconcile request made before the rejection must not undo it.
			stack.Status.ObservedReconcileRequest = stack.ReconcileRequest()
			s.event(corev1.EventTypeNormal, EventRejected, "The change previewed by Update %s was rejected; nothing is applied", v)
			return
		}
		r.refuse(s, pulumiv1.RejectAnnotation, v, a)
	}
	if v := ann[pulumiv1.ApproveAnnotation]; v != "" && v != a.HandledApproval {
		a.HandledApproval = v
		if v == a.Preview {
			a.State = pulumiv1.ApprovalApproved
			s.event(corev1.EventTypeNormal, EventApproved, "The change previewed by Update %s (%s) was approved; applying exactly its plan", v, a.Summary)
			return
		}
		r.refuse(s, pulumiv1.ApproveAnnotation, v, a)
	}
}

func (r *Reconciler) refuse(s *scope, annotation, value string, a *pulumiv1.ApprovalStatus) {
	s.event(corev1.EventTypeWarning, EventApprovalRefused, "%s=%s refused: Update %s is not the preview awaiting approval, which is %s",
		annotation, value, value, a.Preview)
}

// voidApproval says why the approval state a (of an earlier change or try) no longer
// counts, announcing it when a preview was awaiting approval or an approved plan failed;
// "" when there is nothing to say.
func (r *Reconciler) voidApproval(s *scope, a *pulumiv1.ApprovalStatus) string {
	if a == nil {
		return ""
	}
	var why string
	lu, sw := s.stack.Status.LastUpdate, stackwrightStatus(s.stack)
	// recordStart of the up held to the plan sets the attempted key and attempt.
	ran := a.State == pulumiv1.ApprovalApproved && sw.LastAttemptedKey == a.DesiredStateKey && sw.Attempt == a.Attempt
	failed := lu != nil && lu.State == pulumiv1.UpdateStateFailed
	switch {
	case a.State != pulumiv1.ApprovalAwaiting && a.State != pulumiv1.ApprovalApproved:
		return ""
	case ran && !failed:
		// Its up succeeded; what follows is a new change, not a voided approval.
		return ""
	case ran:
		why = "the update held to its plan failed: " + lu.Message
	case a.Revision != s.artifact.Revision:
		why = fmt.Sprintf("the source moved from revision %s to %s", a.Revision, s.artifact.Revision)
	case a.DesiredStateKey != s.key:
		why = "the spec, its config or a referenced Secret or ConfigMap changed"
	case a.PolicyKey != s.policyKey:
		why = "the policies that select the Stack changed"
	default:
		why = "a new try of the change was started"
	}
	msg := fmt.Sprintf("the approval of preview Update %s is void: %s", a.Preview, why)
	s.event(corev1.EventTypeNormal, EventApprovalVoided, "%s; previewing again", msg)
	return msg
}

// startPreview starts the approval preview of the change scope decided to apply. voided
// says why an earlier approval no longer counts ("" if none did).
func (r *Reconciler) startPreview(ctx context.Context, s *scope, voided string) (bool, error) {
	sw := stackwrightStatus(s.stack)
	prev := sw.Approval
	a := &pulumiv1.ApprovalStatus{State: pulumiv1.ApprovalPreviewing, DesiredStateKey: s.key, Attempt: s.next.Attempt,
		Revision: s.artifact.Revision, Message: voided, Previews: 1, PolicyKey: s.policyKey}
	if prev != nil {
		a.Previews, a.HandledApproval, a.HandledRejection = prev.Previews+1, prev.HandledApproval, prev.HandledRejection
	}
	a.Preview = previewName(s.stack.Name, s.key, a.Previews)
	sw.Approval = a
	s.previewName = a.Preview
	return r.createUpdate(ctx, s, func(st *pulumiv1.Stack, u *v1alpha1.Update) {
		st.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{
			Generation: st.Generation, ReconcileRequest: st.ReconcileRequest(), Name: u.Name, Commit: u.Spec.Revision,
			Type: string(v1alpha1.UpdateTypePreview),
		}
		markReconciling(st, pulumiv1.ReasonPreviewInProgress, fmt.Sprintf("Previewing the change before applying it: %s (Update %s)", s.next.Why, u.Name))
	})
}

// isApprovalPreview reports whether the recorded Update in flight is an approval preview.
func isApprovalPreview(s *pulumiv1.Stack) bool {
	cu, sw := s.Status.CurrentUpdate, s.Status.Stackwright
	return cu != nil && cu.Type == string(v1alpha1.UpdateTypePreview) && sw != nil && sw.Approval != nil && sw.Approval.Preview == cu.Name
}

// observePreview folds the approval preview u (nil: it was never created) into the status:
// awaiting approval once it succeeded (approved at once if it plans no change), a failed
// try of the change if it failed.
func (r *Reconciler) observePreview(s *scope, u *v1alpha1.Update) (bool, error) {
	stack := s.stack
	a := stack.Status.Stackwright.Approval
	switch {
	case u == nil:
		// Lost between recording and creating it; gateChange starts another.
		stack.Status.CurrentUpdate = nil
		return true, nil
	case !u.Status.Finished():
		markReconciling(stack, pulumiv1.ReasonPreviewInProgress, fmt.Sprintf("Previewing the change before applying it (Update %s, %s)", u.Name, phaseWord(u)))
		return false, nil
	}
	stack.Status.CurrentUpdate = nil
	crashpoint.Hit(crashpoint.StackPreviewObserved)
	if u.Status.Phase != v1alpha1.UpdatePhaseSucceeded {
		// A failed preview is a failed try of the change: retried, and stalled, as one.
		a.State = pulumiv1.ApprovalFailed
		recordStart(stack, u)
		recordFinish(stack, u, nil, r.Now())
		s.eventAbout(u, corev1.EventTypeWarning, EventUpdateFailed, "preview for approval failed (Update %s): %s", u.Name, u.Status.Message)
		return true, nil
	}
	a.Summary = u.Status.Message
	a.Violations = violations(u.Status.Policy)
	switch {
	case u.Status.Policy.Blocking():
		a.State = pulumiv1.ApprovalBlocked
		// A reconcile request made before the verdict must not undo it.
		stack.Status.ObservedReconcileRequest = stack.ReconcileRequest()
		s.eventAbout(u, corev1.EventTypeWarning, EventPolicyViolation, "%s", blockedMessage(a))
		return true, nil
	case len(a.Violations) > 0:
		s.eventAbout(u, corev1.EventTypeWarning, EventPolicyWarning, "advisory policies found in preview Update %s: %s", u.Name, listViolations(a.Violations))
	}
	switch {
	case !hasChanges(u.Status.Changes):
		a.State = pulumiv1.ApprovalApproved
		s.eventAbout(u, corev1.EventTypeNormal, EventApproved, "Preview Update %s plans no change; applying it needs no approval", u.Name)
		return true, nil
	case stack.Spec.ApprovalMode() != pulumiv1.ApprovalManual:
		a.State = pulumiv1.ApprovalApproved
		// A rollout's preview gate previews Stacks no policy selects: their preview
		// reports no policy results at all.
		if p := u.Status.Policy; p != nil && len(p.Evaluated) > 0 {
			s.eventAbout(u, corev1.EventTypeNormal, EventApproved, "Preview Update %s passed the policies (%s); applying exactly its plan", u.Name, strings.Join(p.Evaluated, ", "))
		} else {
			s.eventAbout(u, corev1.EventTypeNormal, EventApproved, "Preview Update %s is judged by no policy; applying exactly its plan", u.Name)
		}
		return true, nil
	}
	a.State = pulumiv1.ApprovalAwaiting
	s.eventAbout(u, corev1.EventTypeNormal, EventAwaitingApproval, "%s", awaitingMessage(stack, a))
	return true, nil
}

// awaitingMessage tells what awaits approval and how to give it.
func awaitingMessage(stack *pulumiv1.Stack, a *pulumiv1.ApprovalStatus) string {
	msg := fmt.Sprintf("preview Update %s at revision %s awaits approval (%s); approve with: kubectl annotate stack %s -n %s --overwrite %s=%s",
		a.Preview, a.Revision, a.Summary, stack.Name, stack.Namespace, pulumiv1.ApproveAnnotation, a.Preview)
	if a.Message != "" {
		msg += " (" + a.Message + ")"
	}
	return msg
}

func phaseWord(u *v1alpha1.Update) string {
	switch {
	case u.Status.Phase == v1alpha1.UpdatePhaseRunning:
		return "running"
	case startingBound(u):
		return "starting"
	}
	return "waiting to run"
}

// enforcementError marks, in a Stack's violations, a policy that could not be judged.
const enforcementError = "error"

// violations lists, for the Stack's status, the errors and violations of a preview.
func violations(p *v1alpha1.PolicyResults) []pulumiv1.PolicyViolation {
	if p == nil {
		return nil
	}
	var out []pulumiv1.PolicyViolation
	for _, e := range p.Errors {
		out = append(out, pulumiv1.PolicyViolation{Policy: e.Policy, Enforcement: enforcementError, Message: e.Message})
	}
	for _, v := range p.Violations {
		out = append(out, pulumiv1.PolicyViolation{Policy: v.Policy, Enforcement: string(v.Enforcement), Message: v.Message})
	}
	return out[:min(len(out), v1alpha1.MaxViolations)]
}

// blockedMessage says why the previewed change is not applied.
func blockedMessage(a *pulumiv1.ApprovalStatus) string {
	var blocking []pulumiv1.PolicyViolation
	for _, v := range a.Violations {
		if v.Enforcement != string(v1alpha1.EnforcementAdvisory) {
			blocking = append(blocking, v)
		}
	}
	return fmt.Sprintf("policies stopped the change previewed by Update %s at revision %s; nothing was applied: %s. A new desired state, or a change of the policies, makes a new preview",
		a.Preview, a.Revision, listViolations(blocking))
}

func listViolations(vs []pulumiv1.PolicyViolation) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		word := v.Enforcement
		if word == enforcementError {
			word = "cannot be evaluated"
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s", v.Policy, word, v.Message))
	}
	return strings.Join(parts, "; ")
}
