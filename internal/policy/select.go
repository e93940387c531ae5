package policy

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// +kubebuilder:rbac:groups=stackwright.dev,resources=policies;clusterpolicies,verbs=get;list;watch

// Select returns the Policies of the Stack's namespace and the ClusterPolicies whose
// stackSelector selects it, ClusterPolicies first, each group by name. A selector that
// does not parse selects every Stack: a guardrail must not vanish by a typo (admission
// validates selectors, so this is a belt).
func Select(ctx context.Context, c client.Reader, stack *pulumiv1.Stack) ([]Source, error) {
	var cluster v1alpha1.ClusterPolicyList
	if err := c.List(ctx, &cluster); err != nil {
		return nil, fmt.Errorf("failed to list ClusterPolicies: %w", err)
	}
	var local v1alpha1.PolicyList
	if err := c.List(ctx, &local, client.InNamespace(stack.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list Policies: %w", err)
	}
	var out []Source
	for i := range cluster.Items {
		p := &cluster.Items[i]
		if p.DeletionTimestamp.IsZero() && selects(p.Spec.StackSelector, stack) {
			out = append(out, source("ClusterPolicy "+p.Name, &p.ObjectMeta, &p.Spec))
		}
	}
	for i := range local.Items {
		p := &local.Items[i]
		if p.DeletionTimestamp.IsZero() && selects(p.Spec.StackSelector, stack) {
			out = append(out, source("Policy "+p.Namespace+"/"+p.Name, &p.ObjectMeta, &p.Spec))
		}
	}
	return out, nil
}

func selects(sel *metav1.LabelSelector, stack *pulumiv1.Stack) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return true
	}
	return s.Matches(labels.Set(stack.Labels))
}

func source(name string, meta *metav1.ObjectMeta, spec *v1alpha1.PolicySpec) Source {
	enf := spec.Enforcement
	if enf == "" {
		enf = v1alpha1.EnforcementMandatory
	}
	return Source{
		Name: name, Enforcement: enf, Rego: spec.Rego,
		Version: fmt.Sprintf("%s/%d/%s", meta.UID, meta.Generation, enf),
	}
}
