package instance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// approvalAnnotations are the annotations an approver sets on an instance, forwarded to its
// Stack.
var approvalAnnotations = []string{pulumiv1.ApproveAnnotation, pulumiv1.RejectAnnotation}

// approvals returns the approve and reject annotations of instance u that its Stack st
// does not carry yet, to forward. An annotation's text says nothing of who wrote it, so
// they are forwarded only when the template names approvers and the install's admission
// policy, which checks the writer's groups as the API server authenticated them, is in
// force. Otherwise ignored says why they were not forwarded ("" when there was nothing
// new to forward, which asks the API server nothing).
func (c *Controller) approvals(ctx context.Context, t *v1alpha1.StackTemplate, u *unstructured.Unstructured, st *pulumiv1.Stack) (forward map[string]string, ignored string, err error) {
	forward = map[string]string{}
	for _, k := range approvalAnnotations {
		if v := u.GetAnnotations()[k]; v != "" && v != st.Annotations[k] {
			forward[k] = v
		}
	}
	if len(forward) == 0 {
		return nil, "", nil
	}
	if t.Spec.Approvers == nil || len(t.Spec.Approvers.Groups) == 0 {
		return nil, fmt.Sprintf("StackTemplate %s names no approvers: only the platform team approves, on the Stack", t.Name), nil
	}
	why, err := c.approvalPolicyMissing(ctx)
	if err != nil || why != "" {
		return nil, why, err
	}
	return forward, "", nil
}

// approvalPolicyMissing says why the admission policy that checks who approves instances
// is not known to be in force ("" when it is): it must exist, take StackTemplates as its
// parameters, and be bound with the Deny action to every template.
func (c *Controller) approvalPolicyMissing(ctx context.Context) (string, error) {
	name := c.ApprovalPolicy
	if name == "" {
		return "this install names no approval policy (--template-approval-policy), so approvals on instances are not checked and not honoured", nil
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	if err := c.APIReader.Get(ctx, client.ObjectKey{Name: name}, policy); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return fmt.Sprintf("ValidatingAdmissionPolicy %s, which checks who approves, does not exist", name), nil
		}
		return "", fmt.Errorf("failed to get ValidatingAdmissionPolicy %s: %w", name, err)
	}
	if pk := policy.Spec.ParamKind; pk == nil || pk.Kind != "StackTemplate" || !strings.HasPrefix(pk.APIVersion, v1alpha1.GroupVersion.Group+"/") {
		return fmt.Sprintf("ValidatingAdmissionPolicy %s does not take StackTemplates as parameters", name), nil
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := c.APIReader.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s, which puts the approval policy in force, does not exist", name), nil
		}
		return "", fmt.Errorf("failed to get ValidatingAdmissionPolicyBinding %s: %w", name, err)
	}
	b := binding.Spec
	if b.PolicyName != name || !slices.Contains(b.ValidationActions, admissionv1.Deny) || b.ParamRef == nil || b.ParamRef.Name != "" {
		return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s does not bind policy %s to every StackTemplate with the Deny action", name, name), nil
	}
	return "", nil
}
