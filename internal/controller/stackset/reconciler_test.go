package stackset

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/scheme"
)

// A set whose generator yields more elements than the cap stalls naming both counts, and
// creates no Stack: a repository's branches are the tenant's to multiply.
func TestReconciler_Reconcile_TooManyElementsStalls(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "envs"}}
	set.Spec.Generator.List = &v1alpha1.ListGenerator{Elements: []v1alpha1.ListElement{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	set.Spec.Template.Spec = apiextensionsv1.JSON{Raw: []byte(`{"stack":"{{name}}","projectRepo":"https://example.com/x.git","branch":"main"}`)}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(set).WithStatusSubresource(set).Build()
	r := &Reconciler{Client: c, MaxElements: 2}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(set)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(set), set); err != nil {
		t.Fatal(err)
	}
	cond := apimeta.FindStatusCondition(set.Status.Conditions, pulumiv1.ConditionStalled)
	if cond == nil || cond.Reason != v1alpha1.ReasonTooManyElements {
		t.Fatalf("Stalled = %+v; want reason %s", cond, v1alpha1.ReasonTooManyElements)
	}
	const want = "the generator yields 3 elements, more than the 2 a StackSet may have (the manager's --max-stackset-elements)"
	if len(cond.Message) < len(want) || cond.Message[:len(want)] != want {
		t.Errorf("message = %q; want it to start %q", cond.Message, want)
	}
	var stacks pulumiv1.StackList
	if err := c.List(t.Context(), &stacks); err != nil {
		t.Fatal(err)
	}
	if len(stacks.Items) != 0 {
		t.Errorf("%d Stacks created; want none", len(stacks.Items))
	}
}
