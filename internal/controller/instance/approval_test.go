package instance

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestController_ApprovalPolicyMissing_TrustsOnlyAPolicyInForce(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := admissionv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	policy := func(kind string) *admissionv1.ValidatingAdmissionPolicy {
		return &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "approvals"},
			Spec:       admissionv1.ValidatingAdmissionPolicySpec{ParamKind: &admissionv1.ParamKind{APIVersion: "stackwright.dev/v1alpha1", Kind: kind}},
		}
	}
	binding := func(policy string, action admissionv1.ValidationAction, ref *admissionv1.ParamRef) *admissionv1.ValidatingAdmissionPolicyBinding {
		return &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "approvals"},
			Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: []admissionv1.ValidationAction{action}, ParamRef: ref},
		}
	}
	all := &admissionv1.ParamRef{Selector: &metav1.LabelSelector{}}
	tests := []struct {
		name    string
		flag    string
		objects []client.Object
		want    string
	}{
		{name: "inForce", flag: "approvals", objects: []client.Object{policy("StackTemplate"), binding("approvals", admissionv1.Deny, all)}},
		{name: "noFlag", want: "names no approval policy"},
		{name: "noPolicy", flag: "approvals", objects: []client.Object{binding("approvals", admissionv1.Deny, all)}, want: "does not exist"},
		{name: "policyOfOtherParameters", flag: "approvals", objects: []client.Object{policy("ConfigMap"), binding("approvals", admissionv1.Deny, all)}, want: "does not take StackTemplates"},
		{name: "noBinding", flag: "approvals", objects: []client.Object{policy("StackTemplate")}, want: "ValidatingAdmissionPolicyBinding approvals, which puts"},
		{name: "bindingOfAnotherPolicy", flag: "approvals", objects: []client.Object{policy("StackTemplate"), binding("other", admissionv1.Deny, all)}, want: "does not bind"},
		{name: "bindingThatOnlyWarns", flag: "approvals", objects: []client.Object{policy("StackTemplate"), binding("approvals", admissionv1.Warn, all)}, want: "does not bind"},
		{name: "bindingToOneTemplate", flag: "approvals", objects: []client.Object{policy("StackTemplate"), binding("approvals", admissionv1.Deny, &admissionv1.ParamRef{Name: "one"})}, want: "does not bind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{APIReader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.objects...).Build(), ApprovalPolicy: tt.flag}
			got, err := c.approvalPolicyMissing(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("approvalPolicyMissing() = %q, want %q", got, tt.want)
			}
		})
	}
}
