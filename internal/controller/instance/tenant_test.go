package instance

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestTenantOf_Tenant_BelievesTheLabelOnlyInTheTemplatesNamespace(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{pulumiv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	stack := func(ns, name, template, tenant string) client.Object {
		s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}}
		if template != "" {
			s.Labels[v1alpha1.TemplateLabel] = template
		}
		if tenant != "" {
			s.Labels[v1alpha1.InstanceNamespaceLabel] = tenant
		}
		return s
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "bucket"}, Spec: v1alpha1.StackTemplateSpec{Namespace: "platform"}},
		stack("platform", "instance", "bucket", "team-a"),
		stack("platform", "unlabelled", "", ""),
		stack("platform", "no-tenant", "bucket", ""),
		stack("platform", "unknown-template", "gone", "team-a"),
		stack("team-b", "forged", "bucket", "team-a"),
	).Build()
	tests := []struct {
		name, namespace, stack, want string
	}{
		{name: "instanceStackCountsAgainstItsTenant", namespace: "platform", stack: "instance", want: "team-a"},
		{name: "plainStackCountsAgainstItsNamespace", namespace: "platform", stack: "unlabelled"},
		{name: "noTenantLabel", namespace: "platform", stack: "no-tenant"},
		{name: "templateThatDoesNotExist", namespace: "platform", stack: "unknown-template"},
		{name: "labelForgedOutsideThePlatformNamespace", namespace: "team-b", stack: "forged"},
		{name: "stackThatDoesNotExist", namespace: "platform", stack: "missing"},
	}
	tenant := TenantOf(c)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: "u"}, Spec: v1alpha1.UpdateSpec{StackName: tt.stack}}
			if got := tenant(t.Context(), u); got != tt.want {
				t.Errorf("TenantOf() = %q, want %q", got, tt.want)
			}
		})
	}
}
