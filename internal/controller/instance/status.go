package instance

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

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
	message := func(kind, reason, msg string) string {
		if full || reason == pulumiv1.ReasonPolicyViolation {
			// A policy's verdict is written for the author of what it judges.
			return msg
		}
		return platformMessage(st, kind, reason)
	}
	if rev, err := strconv.ParseInt(st.Labels[v1alpha1.TemplateRevisionLabel], 10, 64); err == nil {
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
	current := st.Annotations[instanceGenerationAnnotation] == strconv.FormatInt(in.GetGeneration(), 10) &&
		st.Status.ObservedGeneration == st.Generation
	ready := conditions.Get(st, pulumiv1.ConditionReady)
	switch {
	case current && conditions.IsTrue(st, pulumiv1.ConditionStalled):
		c := conditions.Get(st, pulumiv1.ConditionStalled)
		conditions.MarkStalled(in, c.Reason, message("stalled", c.Reason, c.Message))
	case current && ready != nil && ready.Status == "True":
		conditions.MarkReady(in, ready.Reason, message("ready", ready.Reason, ready.Message))
	default:
		reason, msg := pulumiv1.ReasonNotReadyInProgress, "the stack is being reconciled"
		if c := conditions.Get(st, pulumiv1.ConditionReconciling); c != nil && c.Status == "True" {
			reason, msg = c.Reason, message("reconciling", c.Reason, c.Message)
		}
		conditions.MarkReconciling(in, reason, msg)
	}
}

// platformMessage stands for a Stack message an instance's owner is not shown: what state
// the Stack is in, with which reason, and where the details are.
func platformMessage(st *pulumiv1.Stack, what, reason string) string {
	return fmt.Sprintf("the platform's Stack %s/%s: %s (%s); the details are the platform team's (the template's instanceMessages is Reasons)", st.Namespace, st.Name, what, reason)
}

// publicOutputs are the listed outputs the Stack's status holds that are not secret.
func publicOutputs(st *pulumiv1.Stack, listed []string, public map[string]string) map[string]apiextensionsv1.JSON {
	out := map[string]apiextensionsv1.JSON{}
	for _, k := range listed {
		if _, ok := public[k]; !ok {
			continue
		}
		if v, ok := st.Status.Outputs[k]; ok {
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
