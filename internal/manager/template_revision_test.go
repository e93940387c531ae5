package manager_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Under the Hold strategy a template change is a new revision that existing instances do
// not take: an instance's parameter change is rendered from its own revision, until the
// platform team opens the new one on its Stack. Then the old revision, used by no one, is
// deleted.
func TestManager_StackTemplate_HoldKeepsInstancesAtTheirRevisionUntilOpened(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := startTemplateManager(t)
	platform, tenant := env.Namespace(t), env.Namespace(t)

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: platform}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"size": {Type: "Number"}, "flavour": {Type: "String"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"${flavour} ${size}"`)}}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("held-%d", rand.Uint32())},
		Spec: v1alpha1.StackTemplateSpec{
			API:            v1alpha1.TemplateAPI{Group: group, Kind: "Queue", Plural: "queues"},
			Parameters:     &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","default":3}}}`)},
			Namespace:      platform,
			Stack:          apiextensionsv1.JSON{Raw: []byte(`{"stack":"q","programRef":{"name":"held"},"config":{"flavour":"one"}}`)},
			Config:         []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}},
			Outputs:        []string{"greeting"},
			UpdateStrategy: v1alpha1.TemplateUpdateStrategy{Type: v1alpha1.UpdateStrategyHold},
		},
	}
	createTemplate(t, tmpl)
	first := tmpl.Status.Revision

	inst := &unstructured.Unstructured{}
	inst.SetAPIVersion(group + "/v1alpha1")
	inst.SetKind("Queue")
	inst.SetNamespace(tenant)
	inst.SetName("jobs")
	g.Expect(unstructured.SetNestedField(inst.Object, "queue-info", "spec", "writeOutputsToConfigMapRef", "name")).To(Succeed())
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	greeting := func(want, why string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "queue-info"}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("greeting", want))
		}).WithTimeout(2*time.Minute).Should(Succeed(), why)
	}
	greeting("one 3", "the instance runs the first revision")

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: []byte(`{"stack":"q","programRef":{"name":"held"},"config":{"flavour":"two"}}`)}
	g.Expect(env.Client.Update(ctx, tmpl)).To(Succeed())
	waitTemplate(t, tmpl, "the new revision is served and the instance is behind", func(g Gomega, tmpl *v1alpha1.StackTemplate) {
		g.Expect(tmpl.Status.Revision).To(BeNumerically(">", first))
		g.Expect(tmpl.Status.InstancesBehind).To(BeEquivalentTo(1))
	})
	second := tmpl.Status.Revision

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	g.Expect(unstructured.SetNestedField(inst.Object, int64(4), "spec", "parameters", "size")).To(Succeed())
	g.Expect(env.Client.Update(ctx, inst)).To(Succeed())
	greeting("one 4", "a held instance's parameter change is rendered from its own revision")
	stack := instanceStack(t, tmpl)
	g.Expect(stack.Labels).To(HaveKeyWithValue(v1alpha1.TemplateRevisionLabel, strconv.FormatInt(first, 10)))

	stack.Annotations[v1alpha1.OpenTemplateRevisionAnnotation] = "latest"
	g.Expect(env.Client.Update(ctx, stack)).To(Succeed())
	greeting("two 4", "the opened instance moves to the latest revision")
	waitInstance(t, inst, pulumiv1.ConditionReady, "the instance is Ready at the new revision")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	rev, _, _ := unstructured.NestedInt64(inst.Object, "status", "templateRevision")
	g.Expect(rev).To(Equal(second))
	waitTemplate(t, tmpl, "no instance is behind, and the unused revision is gone", func(g Gomega, tmpl *v1alpha1.StackTemplate) {
		g.Expect(tmpl.Status.InstancesBehind).To(BeZero())
		err := env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, first)}, &v1alpha1.StackTemplateRevision{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "revision %d: %v", first, err)
	})
	latest := &v1alpha1.StackTemplateRevision{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, second)}, latest)).To(Succeed())
	g.Expect(metav1.IsControlledBy(latest, tmpl)).To(BeTrue())
	g.Expect(string(latest.Spec.Stack.Raw)).To(ContainSubstring(`"two"`))
	latest.Spec.Outputs = append(latest.Spec.Outputs, "tampered")
	g.Expect(apierrors.IsInvalid(env.Client.Update(ctx, latest))).To(BeTrue(), "a revision is immutable")
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
}

// instanceStack is the one Stack of the template's instances.
func instanceStack(t *testing.T, tmpl *v1alpha1.StackTemplate) *pulumiv1.Stack {
	t.Helper()
	var stacks pulumiv1.StackList
	g := NewWithT(t)
	g.Expect(env.Client.List(t.Context(), &stacks, client.InNamespace(tmpl.Spec.Namespace), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
	g.Expect(stacks.Items).To(HaveLen(1))
	return &stacks.Items[0]
}
