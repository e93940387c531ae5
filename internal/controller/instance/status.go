package instance

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// instanceGenerationAnnotation, on an instance's Stack, is the instance generation the
// Stack's spec came from.
const instanceGenerationAnnotation = "stackwright.dev/instance-generation"

// instance is a typed view of an instance, which is unstructured (its kind is a
// template's): the spec as read, and the status to write back.
type instance struct {
	obj    *unstructured.Unstructured
	spec   v1alpha1.InstanceSpec
	status v1alpha1.InstanceStatus
}

func parse(u *unstructured.Unstructured) (*instance, error) {
	in := &instance{obj: u}
	if m, ok := u.Object["spec"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &in.spec); err != nil {
			return nil, fmt.Errorf("failed to read spec of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	if m, ok := u.Object["status"].(map[string]any); ok {
		// A status this controller did not write is replaced, not trusted.
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &in.status)
	}
	return in, nil
}

// store writes the typed status back into the object.
func (in *instance) store() error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&in.status)
	if err != nil {
		return fmt.Errorf("failed to encode status of %s %s/%s: %w", in.obj.GetKind(), in.obj.GetNamespace(), in.obj.GetName(), err)
	}
	in.obj.Object["status"] = m
	return nil
}

func (in *instance) GetGeneration() int64 { return in.obj.GetGeneration() }

func (in *instance) GetConditions() []metav1.Condition { return in.status.Conditions }

func (in *instance) SetConditions(c []metav1.Condition) { in.status.Conditions = c }

// parameters are the instance's spec.parameters as a map.
func (in *instance) parameters() (map[string]any, error) {
	m, _, err := unstructured.NestedMap(in.obj.Object, "spec", "parameters")
	if err != nil {
		return nil, fmt.Errorf("failed to read spec.parameters: %w", err)
	}
	return m, nil
}

// mirror sets the instance's conditions and last update from its Stack: Ready only once
// the Stack is Ready at the spec rendered from the instance's current generation. With
// policy Reasons the Stack's messages stay the platform's, but for a policy's verdict: the
// instance gets a message of its own making for each (platformMessage).
func mirror(in *instance, st *pulumiv1.Stack, policy v1alpha1.InstanceMessagePolicy) {
	full := policy == v1alpha1.InstanceMessagesFull
	message := func(kind, reason, msg string) string { return stackMessage(st, policy, kind, reason, msg) }
	// The revision the instance has: not the one its Stack only previews for a rollout.
	if rev := v1alpha1.HeldTemplateRevision(st.Labels, st.Annotations); rev > 0 {
		in.status.TemplateRevision = rev
	}
	in.status.Approval = nil
	if sw := st.Status.Stackwright; sw != nil && sw.Approval != nil {
		a := sw.Approval
		in.status.Approval = &v1alpha1.InstanceApproval{State: string(a.State), Preview: a.Preview, Summary: a.Summary}
	}
	if lu := st.Status.LastUpdate; lu != nil {
		msg := lu.Message
		if !full && msg != "" {
			msg = platformMessage(st, "last update", string(lu.State))
		}
		in.status.LastUpdate = &v1alpha1.InstanceUpdate{Type: lu.Type, State: string(lu.State), Message: msg, Time: lu.LastResyncTime}
	}
	switch {
	case stalledAt(in, st) != nil:
		c := stalledAt(in, st)
		conditions.MarkStalled(in, c.Reason, message("stalled", c.Reason, c.Message))
	case readyAt(in, st):
		ready := conditions.Get(st, pulumiv1.ConditionReady)
		conditions.MarkReady(in, ready.Reason, message("ready", ready.Reason, ready.Message))
	default:
		reason, msg := pulumiv1.ReasonNotReadyInProgress, "the stack is being reconciled"
		if c := conditions.Get(st, pulumiv1.ConditionReconciling); c != nil && c.Status == "True" {
			reason, msg = c.Reason, message("reconciling", c.Reason, c.Message)
		}
		conditions.MarkReconciling(in, reason, msg)
	}
}

// currentAt reports whether the Stack st has seen the spec rendered from the instance's
// current generation.
func currentAt(in *instance, st *pulumiv1.Stack) bool {
	return st.Annotations[instanceGenerationAnnotation] == strconv.FormatInt(in.GetGeneration(), 10) &&
		st.Status.ObservedGeneration == st.Generation
}

// readyAt reports whether the Stack st is Ready at the spec rendered from the instance's
// current generation.
func readyAt(in *instance, st *pulumiv1.Stack) bool {
	return currentAt(in, st) && conditions.IsTrue(st, pulumiv1.ConditionReady)
}

// stalledAt is the Stalled condition of the Stack st at the spec rendered from the
// instance's current generation; nil when it is not Stalled at it.
func stalledAt(in *instance, st *pulumiv1.Stack) *metav1.Condition {
	if !currentAt(in, st) || !conditions.IsTrue(st, pulumiv1.ConditionStalled) {
		return nil
	}
	return conditions.Get(st, pulumiv1.ConditionStalled)
}

// stackMessage is what an instance's condition says of its Stack st's condition of the
// kind ("stalled", "ready", ...): the Stack's message with policy Full or for a policy's
// verdict (written for the author of what it judges), else platformMessage.
func stackMessage(st *pulumiv1.Stack, policy v1alpha1.InstanceMessagePolicy, kind, reason, msg string) string {
	if policy == v1alpha1.InstanceMessagesFull || reason == pulumiv1.ReasonPolicyViolation {
		return msg
	}
	return platformMessage(st, kind, reason)
}

// platformMessage stands for a Stack message an instance's owner is not shown: what state
// the Stack is in, with which reason, and where the details are.
func platformMessage(st *pulumiv1.Stack, what, reason string) string {
	return fmt.Sprintf("the platform's Stack %s/%s: %s (%s); the details are the platform team's (the template's instanceMessages is Reasons)", st.Namespace, st.Name, what, reason)
}

// The setters below are pure functions of the instance (and what the reconcile read) they
// are given; the phases decide which one applies and the deferred write persists the
// result.

// finalizeStatus derives, at the end of every reconcile, what the outcome implies: the
// generation counts as observed only once the instance is Ready or Stalled for it.
func finalizeStatus(in *instance) {
	conditions.Finalize(in, &in.status.ObservedGeneration)
}

// markTemplateNotServing records the wait for the template to serve again.
func markTemplateNotServing(in *instance, template string) {
	conditions.MarkReconciling(in, v1alpha1.ReasonTemplateNotReady, fmt.Sprintf("StackTemplate %s is not serving; the stack stays as it is", template))
}

// markNamespaceNotAllowed stalls an instance in a namespace the template does not serve.
func markNamespaceNotAllowed(in *instance, template string) {
	conditions.MarkStalled(in, v1alpha1.ReasonNamespaceNotAllowed, fmt.Sprintf(
		"StackTemplate %s does not serve namespace %s (its namespaceSelector); ask the platform team", template, in.obj.GetNamespace()))
}

// markParametersInvalid stalls an instance whose parameters cannot be rendered.
func markParametersInvalid(in *instance, err error) {
	conditions.MarkStalled(in, v1alpha1.ReasonParametersInvalid, err.Error())
}

// markStackConflict stalls an instance whose Stack's name is another's Stack.
func markStackConflict(in *instance, st *pulumiv1.Stack) {
	conditions.MarkStalled(in, v1alpha1.ReasonStackConflict, fmt.Sprintf("Stack %s/%s exists and is not this instance's", st.Namespace, st.Name))
}

// markEarlierStackDeleting records the wait for the Stack of an earlier instance of the
// name to go.
func markEarlierStackDeleting(in *instance, st *pulumiv1.Stack) {
	conditions.MarkReconciling(in, v1alpha1.ReasonDestroying, fmt.Sprintf("waiting for Stack %s/%s of an earlier instance of this name to be deleted", st.Namespace, st.Name))
}

// markRevisionMissing records the wait for revision rev of t, saying what to do when it is
// gone for good.
func markRevisionMissing(in *instance, t *v1alpha1.StackTemplate, rev int64) {
	msg := fmt.Sprintf("waiting for StackTemplateRevision %s (revision %d of StackTemplate %s)", v1alpha1.RevisionName(t.Name, rev), rev, t.Name)
	if rev < t.Status.Revision {
		msg += fmt.Sprintf(": it is gone, so the instance's Stack stays as it is; open a newer revision with the %s annotation on it", v1alpha1.OpenTemplateRevisionAnnotation)
	}
	conditions.MarkReconciling(in, v1alpha1.ReasonTemplateNotReady, msg)
}

// markRolloutConflict stalls an instance whose Stack more than one rollout of the template's
// revisions selects: the platform team must change their selectors.
func markRolloutConflict(in *instance, rollouts []string) {
	conditions.MarkStalled(in, pulumiv1.ReasonRolloutConflict, fmt.Sprintf(
		"StackRollouts %s all roll out the template's revisions to this instance's Stack: the platform team must change their selectors", strings.Join(rollouts, ", ")))
}

// markRevisionInvalid stalls an instance whose template revision holds no Stack spec.
func markRevisionInvalid(in *instance, rev string, err error) {
	conditions.MarkStalled(in, v1alpha1.ReasonTemplateNotReady, fmt.Sprintf("StackTemplateRevision %s: %v", rev, err))
}

// markAwaitingApproval says what change of the Stack st awaits approval and who approves
// it how; ignored says why approvals on the instance are not honoured.
func markAwaitingApproval(in *instance, t *v1alpha1.StackTemplate, st *pulumiv1.Stack, ignored string) {
	conditions.MarkReconciling(in, pulumiv1.ReasonAwaitingApproval, awaitingMessage(t, in.obj, st, in.status.Approval, ignored))
}

// markOutputsConflict stalls an instance whose outputs would overwrite an object of its
// namespace that is not its own.
func markOutputsConflict(in *instance, kind, name string) {
	conditions.MarkStalled(in, v1alpha1.ReasonOutputsConflict, fmt.Sprintf("%s %s exists and is not this instance's: rename it, or name another in the spec", kind, name))
}

// markStackProtected stalls a deleted instance whose Stack the platform team protects from
// deletion: a person must lift the protection.
func markStackProtected(in *instance, st *pulumiv1.Stack) {
	conditions.MarkStalled(in, pulumiv1.ReasonDeletionProtected, fmt.Sprintf(
		"Stack %s/%s, which this instance became, is protected from deletion (%s=true): the platform team must remove the annotation for the instance to go",
		st.Namespace, st.Name, pulumiv1.ProtectedAnnotation))
}

// markAwaitingDependencies records which Stacks (or objects) of a composed template's
// instance wait for what.
func markAwaitingDependencies(in *instance, waiting []string) {
	conditions.MarkReconciling(in, v1alpha1.ReasonAwaitingDependencies, strings.Join(waiting, "; "))
}

// markObjectConflict stalls an instance whose object would overwrite one of its namespace
// that is not its own.
func markObjectConflict(in *instance, kind, name string) {
	conditions.MarkStalled(in, v1alpha1.ReasonObjectConflict, fmt.Sprintf("%s %s exists and is not this instance's: the template's object is never written over it", kind, name))
}

// markObjectInvalid stalls an instance whose template object cannot be made.
func markObjectInvalid(in *instance, entry string, err error) {
	conditions.MarkStalled(in, v1alpha1.ReasonObjectInvalid, fmt.Sprintf("object %s of the template: %v", entry, err))
}

// markAwaitingStatusFields keeps an instance whose Stack is Ready from being Ready while
// status fields its template's readyWhen names are unset, naming each and why.
func markAwaitingStatusFields(in *instance, unset []fieldGap) {
	names := make([]string, len(unset))
	for i, g := range unset {
		names[i] = g.String()
	}
	conditions.MarkReconciling(in, v1alpha1.ReasonAwaitingStatusFields, "the stack is ready; waiting for the status fields "+strings.Join(names, ", "))
}

// markDestroying records the wait for the deleted instance's Stack st to go, saying what
// the Stack does in its own words only where the template's policy repeats them.
func markDestroying(in *instance, st *pulumiv1.Stack, policy v1alpha1.InstanceMessagePolicy) {
	msg := fmt.Sprintf("waiting for Stack %s/%s to be deleted", st.Namespace, st.Name)
	if c := conditions.Get(st, pulumiv1.ConditionReady); c != nil && c.Message != "" {
		if policy == v1alpha1.InstanceMessagesFull {
			msg += ": " + c.Message
		} else {
			msg += " (" + c.Reason + ")"
		}
	}
	conditions.MarkReconciling(in, v1alpha1.ReasonDestroying, msg)
}

// updateChanged reports whether the Stack's last operation, as mirrored, is another than
// before: a new one is news, the same one seen again is not.
func updateChanged(before, after *v1alpha1.InstanceUpdate) bool {
	return after != nil && (before == nil || !before.Time.Equal(after.Time) || before.State != after.State || before.Type != after.Type)
}

// updateEvent is the type and reason of the event that announces the last operation u.
func updateEvent(u *v1alpha1.InstanceUpdate) (typ, reason string) {
	if u.State == string(pulumiv1.UpdateStateFailed) {
		return corev1.EventTypeWarning, EventUpdateFailed
	}
	return corev1.EventTypeNormal, EventUpdateSucceeded
}

// publicOutputs are the listed outputs the Stacks' status holds that are not secret.
func publicOutputs(p published, listed []string) map[string]apiextensionsv1.JSON {
	out := map[string]apiextensionsv1.JSON{}
	for _, k := range listed {
		if _, ok := p.public[k]; !ok {
			continue
		}
		if v, ok := p.values[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// awaitingMessage says, to the instance's owner, what the change awaiting approval is and
// who approves it how. ignored says why approvals on the instance are not honoured.
func awaitingMessage(t *v1alpha1.StackTemplate, u *unstructured.Unstructured, st *pulumiv1.Stack, a *v1alpha1.InstanceApproval, ignored string) string {
	msg := fmt.Sprintf("the change previewed by Update %s (%s) awaits approval", a.Preview, cmp.Or(a.Summary, "no summary"))
	switch {
	case t.Spec.Approvers == nil || len(t.Spec.Approvers.Groups) == 0:
		return fmt.Sprintf("%s by the platform team, on Stack %s/%s: StackTemplate %s names no approvers", msg, st.Namespace, st.Name, t.Name)
	case ignored != "":
		return fmt.Sprintf("%s by the platform team, on Stack %s/%s: approvals on this %s are ignored, because %s", msg, st.Namespace, st.Name, u.GetKind(), ignored)
	}
	return fmt.Sprintf("%s by a member of %s: kubectl annotate %s.%s %s -n %s %s=%s (or %s=%s to reject it)", msg,
		strings.Join(t.Spec.Approvers.Groups, " or "), t.Spec.API.Plural, t.Spec.API.Group, u.GetName(), u.GetNamespace(),
		pulumiv1.ApproveAnnotation, a.Preview, pulumiv1.RejectAnnotation, a.Preview)
}
