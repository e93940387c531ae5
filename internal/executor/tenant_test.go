package executor

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The namespaces of one tenant (by the platform's label) share one fair-share key; a
// namespace without the label, or one that cannot be read, is its own; an instance's
// tenant, asked first, wins.
func TestNamespaceLabelTenant_NamespacesOfATenantShareAKey(t *testing.T) {
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		ns("acme-dev", map[string]string{"stackwright.dev/tenant": "acme"}),
		ns("acme-prod", map[string]string{"stackwright.dev/tenant": "acme"}),
		ns("globex", nil),
	).Build()
	instances := TenantOf(func(_ context.Context, u *v1alpha1.Update) string {
		if u.Spec.StackName == "instance" {
			return "requester"
		}
		return ""
	})
	tenantOf := FirstTenant(instances, NamespaceLabelTenant(c, "stackwright.dev/tenant"))
	got := map[string]string{}
	for _, key := range []struct{ ns, stack string }{{"acme-dev", "a"}, {"acme-prod", "b"}, {"globex", "c"}, {"missing", "d"}, {"acme-dev", "instance"}} {
		u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: key.ns}, Spec: v1alpha1.UpdateSpec{StackName: key.stack}}
		got[key.ns+"/"+key.stack] = tenantOf.Tenant(t.Context(), u)
	}
	want := map[string]string{"acme-dev/a": "tenant:acme", "acme-prod/b": "tenant:acme", "globex/c": "", "missing/d": "", "acme-dev/instance": "requester"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tenants (-want +got):\n%s", diff)
	}
}
