package instance

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor"
)

// TenantOf counts the runs of an instance's Stack against the instance's namespace, so
// that instances share their tenant's fair share of runner slots and not the platform
// namespace's. The Stack's instance-namespace label is believed only in the platform
// namespace of the template it names: only the platform team and the manager write
// there, while a tenant labelling a Stack of its own namespace would otherwise spend
// another tenant's share.
func TenantOf(c client.Reader) executor.TenantOf {
	return func(ctx context.Context, u *v1alpha1.Update) string {
		st := &pulumiv1.Stack{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, st); err != nil {
			return ""
		}
		name, tenant := st.Labels[v1alpha1.TemplateLabel], st.Labels[v1alpha1.InstanceNamespaceLabel]
		if name == "" || tenant == "" {
			return ""
		}
		t := &v1alpha1.StackTemplate{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, t); err != nil || t.Spec.Namespace != st.Namespace {
			return ""
		}
		return tenant
	}
}
