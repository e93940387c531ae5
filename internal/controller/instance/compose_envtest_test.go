package instance_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A composed template: a network Stack whose output the instance's own Stack reads, and a
// NetworkPolicy in the tenant's namespace from that output and a parameter. The consumer
// Stack is made only once the producer is Ready with its outputs published, reading them
// where the producer publishes them; the policy only once both are Ready; the instance is
// Ready when all are. Deleting the instance deletes the policy first, then the consumer,
// and the producer only once the consumer is gone.
func TestController_Instance_ComposedStacksInOrderAndBackInReverse(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	ctx := t.Context()
	g := s.g
	tmpl := s.template(group, "Service", `{"stack":"app","programRef":{"name":"app"},"destroyOnFinalize":true}`)
	tmpl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"app":{"type":"string"},"size":{"type":"integer","default":2}}}`)}
	tmpl.Spec.Config = []v1alpha1.TemplateConfig{{Key: "cidr", StackOutput: &v1alpha1.TemplateStackOutput{Stack: "network", Output: "cidr"}}}
	tmpl.Spec.Outputs = []string{"url"}
	tmpl.Spec.Stacks = []v1alpha1.TemplateStack{{
		Name: "network", Stack: apiextensionsv1.JSON{Raw: []byte(`{"stack":"net","programRef":{"name":"net"},"destroyOnFinalize":true}`)},
		Config: []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}}, Outputs: []string{"cidr"},
	}}
	tmpl.Spec.Objects = []v1alpha1.TemplateObject{{Name: "policy", Object: apiextensionsv1.JSON{Raw: []byte(`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
		"metadata":{"labels":{"app":"${parameters.app}"}},
		"spec":{"podSelector":{"matchLabels":{"app":"${parameters.app}"}},"ingress":[{"from":[{"ipBlock":{"cidr":"${outputs.cidr}"}}]}]}}`)}}}
	s.serve(tmpl)

	inst := s.instance(tmpl, "web", `{"parameters":{"app":"web"},"writeOutputsToConfigMapRef":{"name":"web-info"}}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	stacks := func(g Gomega) map[string]*pulumiv1.Stack {
		var list pulumiv1.StackList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(s.platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
		out := map[string]*pulumiv1.Stack{}
		for i := range list.Items {
			out[list.Items[i].Labels[v1alpha1.TemplateStackLabel]] = &list.Items[i]
		}
		return out
	}
	got := s.waitInstance(inst, pulumiv1.ConditionReconciling, v1alpha1.ReasonAwaitingDependencies, "the instance waits for its network Stack")
	g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(ContainSubstring("of network is not Ready yet"))
	made := stacks(g)
	g.Expect(made).To(HaveLen(1), "only the producer exists while it is not Ready")
	net := made["network"]
	g.Expect(net).NotTo(BeNil())
	g.Expect(net.Spec.Stack).To(Equal("net." + s.Namespace + ".web"))
	g.Expect(string(net.Spec.Config["size"].Raw)).To(Equal("2"))
	g.Expect(net.Annotations).To(HaveKeyWithValue(v1alpha1.InstanceAnnotation, s.Namespace+"/web"))

	// The Stack controller's finalizer, which holds a Stack while it destroys.
	const destroying = "test.stackwright.dev/destroying"
	s.Patch(net, func() { net.Finalizers = append(net.Finalizers, destroying) })
	s.exportOutputs(net, map[string]string{"cidr": "10.0.0.0/16"}, map[string]string{"cidr": "10.0.0.0/16"})
	s.stackReady(net)
	var app *pulumiv1.Stack
	s.Eventually(func(g Gomega) {
		app = stacks(g)[""]
		g.Expect(app).NotTo(BeNil(), "the consumer is made once the producer is Ready")
	})
	g.Expect(app.Spec.ConfigRef).To(Equal(map[string]pulumiv1.ConfigMapRef{"cidr": {Name: net.Spec.Stackwright.Outputs.ConfigMapName, Key: "cidr"}}))
	g.Expect(app.Spec.Prerequisites).To(Equal([]pulumiv1.PrerequisiteRef{{Name: net.Name}}))
	policy := &networkingv1.NetworkPolicy{}
	policyKey := client.ObjectKey{Namespace: s.Namespace, Name: "web-policy"}
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, policyKey, policy))).To(BeTrue(), "no object before every Stack is Ready")

	s.Patch(app, func() { app.Finalizers = append(app.Finalizers, destroying) })
	s.exportOutputs(app, map[string]string{"url": "https://web"}, map[string]string{"url": "https://web", "internal": "x"})
	s.stackReady(app)
	got = s.waitInstance(inst, pulumiv1.ConditionReady, "", "the instance is Ready with all of its Stacks")
	outputs, _, _ := unstructured.NestedMap(got.Object, "status", "outputs")
	g.Expect(outputs).To(Equal(map[string]any{"url": "https://web", "cidr": "10.0.0.0/16"}), "the outputs of both Stacks")
	info := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: "web-info"}, info)).To(Succeed())
	g.Expect(info.Data).To(Equal(map[string]string{"url": "https://web", "cidr": "10.0.0.0/16"}))
	g.Expect(env.Client.Get(ctx, policyKey, policy)).To(Succeed())
	g.Expect(policy.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal("10.0.0.0/16"))
	g.Expect(policy.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"app": "web"}))
	g.Expect(policy.Labels).To(HaveKeyWithValue("app", "web"))
	g.Expect(metav1.IsControlledBy(policy, got)).To(BeTrue(), "the instance owns its objects")

	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	got = s.waitInstance(inst, pulumiv1.ConditionReconciling, v1alpha1.ReasonDestroying, "the consumer goes first")
	g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(ContainSubstring("waiting for Stack " + s.platform + "/" + app.Name))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, policyKey, policy))).To(BeTrue(), "the objects are deleted first")
	made = stacks(g)
	g.Expect(made[""].DeletionTimestamp.IsZero()).To(BeFalse(), "the consumer is being deleted")
	g.Expect(made["network"].DeletionTimestamp.IsZero()).To(BeTrue(), "the producer stays while its consumer exists")

	s.Patch(app, func() { app.Finalizers = nil })
	s.Eventually(func(g Gomega) {
		got := inst.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), got)).To(Succeed())
		g.Expect(condition(got, pulumiv1.ConditionReconciling)["message"]).To(ContainSubstring("waiting for Stack " + s.platform + "/" + net.Name))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(net), net)).To(Succeed())
		g.Expect(net.DeletionTimestamp.IsZero()).To(BeFalse(), "the producer is deleted once its consumer is gone")
	})
	s.Patch(net, func() { net.Finalizers = nil })
	s.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the instance is gone: %v", err)
	})
}
