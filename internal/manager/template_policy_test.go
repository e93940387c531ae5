package manager_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// maxLength refuses Randoms longer than 5: what a platform team might cap.
const maxLength = `package platform

deny contains msg if {
	some step in input.steps
	step.op in {"create", "update", "replace"}
	step.inputs.length > 5
	msg := sprintf("%s: length %d is over the platform's limit of 5", [step.urn, step.inputs.length])
}
`

// The platform team's ClusterPolicies select the instances' Stacks (by the template label)
// like any Stack: an instance asking for more than the policy allows is Stalled with the
// policy's message, and applies once its parameters are within it.
func TestManager_StackTemplate_PlatformPoliciesJudgeInstances(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := startTemplateManager(t)
	platform, tenant := env.Namespace(t), env.Namespace(t)

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: platform}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"length": {Type: "Number"}}
	prog.Program.Resources = map[string]pulumiv1.Resource{"token": {
		Type:       "stackwright-testing:index:Random",
		Properties: map[string]apiextensionsv1.JSON{"length": {Raw: []byte(`"${length}"`)}},
	}}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	name := fmt.Sprintf("tokens-%d", rand.Uint32())
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: group, Kind: "Token", Plural: "tokens"},
			Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"length":{"type":"integer","default":4}}}`)},
			Namespace:  platform,
			Stack:      apiextensionsv1.JSON{Raw: []byte(`{"stack":"t","programRef":{"name":"token"}}`)},
			Config:     []v1alpha1.TemplateConfig{{Key: "length", Parameter: "length"}},
		},
	}
	pol := &v1alpha1.ClusterPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PolicySpec{
			Enforcement:   v1alpha1.EnforcementMandatory,
			StackSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.TemplateLabel: name}},
			Rego:          maxLength,
		},
	}
	g.Expect(env.Client.Create(ctx, pol)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	createTemplate(t, tmpl)

	inst := &unstructured.Unstructured{}
	inst.SetAPIVersion(group + "/v1alpha1")
	inst.SetKind("Token")
	inst.SetNamespace(tenant)
	inst.SetName("long")
	g.Expect(unstructured.SetNestedField(inst.Object, int64(8), "spec", "parameters", "length")).To(Succeed())
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	waitInstance(t, inst, pulumiv1.ConditionStalled, "the policy stops the instance's change")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	g.Expect(conditionReason(inst, pulumiv1.ConditionStalled)).To(Equal(pulumiv1.ReasonPolicyViolation))
	g.Expect(conditionField(inst, pulumiv1.ConditionStalled, "message")).To(ContainSubstring("over the platform's limit of 5"))

	g.Expect(unstructured.SetNestedField(inst.Object, int64(5), "spec", "parameters", "length")).To(Succeed())
	g.Expect(env.Client.Update(ctx, inst)).To(Succeed())
	waitInstance(t, inst, pulumiv1.ConditionReady, "within the policy, the change applies")
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
}
