package instance

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Two instances whose Stacks' names collide never touch each other's parameter Secret: the
// one that is not its instance's is neither rewritten nor deleted.
func TestApplyParameterSecret_AnotherInstancesSecret_LeftAlone(t *testing.T) {
	victim := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: parameterSecretName("bucket-team-a-x-1234abcd"), Labels: map[string]string{
			v1alpha1.TemplateLabel: "bucket", v1alpha1.InstanceUIDLabel: "victim-uid",
		}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("victim's")},
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(victim).Build()
	ctrl := &Controller{Client: c}
	tmpl := &v1alpha1.StackTemplate{ObjectMeta: metav1.ObjectMeta{Name: "bucket"}, Spec: v1alpha1.StackTemplateSpec{Namespace: "platform"}}
	intruder := &unstructured.Unstructured{}
	intruder.SetUID(types.UID("intruder-uid"))

	if err := ctrl.applyParameterSecret(t.Context(), tmpl, intruder, "bucket-team-a-x-1234abcd", map[string][]byte{"password": []byte("intruder's")}); err == nil {
		t.Error("the intruder wrote the victim's parameter Secret")
	}
	if err := ctrl.applyParameterSecret(t.Context(), tmpl, intruder, "bucket-team-a-x-1234abcd", nil); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(victim), got); err != nil {
		t.Fatalf("the victim's parameter Secret is gone: %v", err)
	}
	if diff := cmp.Diff(victim.Data, got.Data); diff != "" {
		t.Errorf("victim's parameters (-want +got):\n%s", diff)
	}
}
