package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A platform team publishes a template; a tenant in a namespace it selects creates an
// instance with plain API calls and gets a Ready instance with the published outputs in its
// own namespace, while the Stack, its config and its secret parameter stay in the platform
// namespace. The API server checks parameters against the template's schema; a namespace
// outside the selector is refused; a parameter change re-runs the stack; the template's
// deletion waits for its last instance, whose deletion destroys its stack.
func TestManager_StackTemplate_InstanceBecomesAStackInThePlatformNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := startTemplateManager(t)

	platform, tenant, outsider := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: tenant}, ns)).To(Succeed())
	ns.Labels = map[string]string{"team": "a"}
	g.Expect(env.Client.Update(ctx, ns)).To(Succeed())

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Namespace: platform}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"size": {Type: "Number"}, "owner": {Type: "String"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{
		"greeting": {Raw: []byte(`"size ${size}"`)},
		"who":      {Raw: []byte(`"${owner}"`)},
		"internal": {Raw: []byte(`"platform only"`)},
	}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())

	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "buckets-" + strings.Split(group, ".")[0]},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: group, Kind: "Bucket", Plural: "buckets"},
			Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","minimum":1,"maximum":10,"default":3},"owner":{"type":"string"}}}`)},
			Namespace:  platform,
			Stack:      apiextensionsv1.JSON{Raw: []byte(`{"stack":"buckets","programRef":{"name":"bucket"},"destroyOnFinalize":true}`)},
			Config: []v1alpha1.TemplateConfig{
				{Key: "size", Parameter: "size"},
				{Key: "owner", Parameter: "owner", Secret: true},
			},
			Outputs:           []string{"greeting", "who"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		},
	}
	createTemplate(t, tmpl)

	bucket := func(ns, name string, params string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Bucket","metadata":{"namespace":%q,"name":%q},
			"spec":{"parameters":%s,"writeConnectionSecretToRef":{"name":"bucket-conn"},"writeOutputsToConfigMapRef":{"name":"bucket-info"}}}`,
			group, ns, name, params), &u.Object)).To(Succeed())
		return u
	}
	strict := client.FieldValidation("Strict")
	for name, params := range map[string]string{
		"out of range":  `{"size":11}`,
		"wrong type":    `{"size":"big"}`,
		"unknown field": `{"colour":"red"}`,
	} {
		err := env.Client.Create(ctx, bucket(tenant, "bad", params), strict)
		g.Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "%s: %v", name, err)
	}

	inst := bucket(tenant, "data", `{"owner":"alice"}`)
	g.Expect(env.Client.Create(ctx, inst, strict)).To(Succeed())
	waitInstance(t, inst, pulumiv1.ConditionReady, "the instance becomes Ready")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	outputs, _, _ := unstructured.NestedMap(inst.Object, "status", "outputs")
	g.Expect(outputs).To(Equal(map[string]any{"greeting": "size 3"}), "status: the non-secret published outputs only (the schema's default applied)")

	conn := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "bucket-conn"}, conn)).To(Succeed())
	g.Expect(conn.Data).To(Equal(map[string][]byte{"greeting": []byte("size 3"), "who": []byte("alice")}))
	g.Expect(metav1.IsControlledBy(conn, inst)).To(BeTrue())
	info := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "bucket-info"}, info)).To(Succeed())
	g.Expect(info.Data).To(Equal(map[string]string{"greeting": "size 3"}))

	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
	g.Expect(stacks.Items).To(HaveLen(1))
	st := &stacks.Items[0]
	g.Expect(st.Spec.Stack).To(Equal("buckets." + tenant + ".data"))
	g.Expect(st.Labels).To(HaveKeyWithValue(v1alpha1.InstanceNamespaceLabel, tenant))
	spec, err := json.Marshal(st.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(spec)).NotTo(ContainSubstring("alice"), "a secret parameter never appears in the Stack's spec")
	g.Expect(string(st.Spec.Config["size"].Raw)).To(Equal("3"))

	other := bucket(outsider, "data", `{}`)
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	waitInstance(t, other, pulumiv1.ConditionStalled, "a namespace outside the selector is refused")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
	g.Expect(conditionReason(other, pulumiv1.ConditionStalled)).To(Equal(v1alpha1.ReasonNamespaceNotAllowed))
	g.Expect(env.Client.Delete(ctx, other)).To(Succeed())

	g.Expect(unstructured.SetNestedField(inst.Object, int64(5), "spec", "parameters", "size")).To(Succeed())
	g.Expect(env.Client.Update(ctx, inst)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "bucket-info"}, info)).To(Succeed())
		g.Expect(info.Data).To(HaveKeyWithValue("greeting", "size 5"))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "a parameter change reaches the stack and its outputs")

	g.Expect(env.Client.Delete(ctx, tmpl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		c := apimeta.FindStatusCondition(tmpl.Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ReasonInstancesRemain))
	}).WithTimeout(time.Minute).Should(Succeed(), "the template waits for its instances")

	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(st), &pulumiv1.Stack{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Stack is gone: %v", err)
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), &v1alpha1.StackTemplate{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the template is gone: %v", err)
		err = env.Client.Get(ctx, client.ObjectKey{Name: "buckets." + group}, &apiextensionsv1.CustomResourceDefinition{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "its CustomResourceDefinition is gone: %v", err)
	}).WithTimeout(3*time.Minute).Should(Succeed(), "deleting the instance destroys its stack, then the template goes")
	g.Expect(st.Spec.DestroyOnFinalize).To(BeTrue())
}

// startTemplateManager starts a manager that serves templates of a group of its own, and
// returns the group.
func startTemplateManager(t *testing.T) string {
	t.Helper()
	group := fmt.Sprintf("t%d.test.stackwright.dev", rand.Uint32())
	opts := testOptions(t)
	opts.TemplateAPIGroups = []string{group}
	startManager(t, env.Config, opts)
	return group
}

// createTemplate creates tmpl, deletes it when the test ends (if the test has not), and
// waits until its kind is served.
func createTemplate(t *testing.T, tmpl *v1alpha1.StackTemplate) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	waitTemplate(t, tmpl, "the template is served", nil)
}

// waitTemplate waits until tmpl is Ready and check, if any, holds of it.
func waitTemplate(t *testing.T, tmpl *v1alpha1.StackTemplate, why string, check func(Gomega, *v1alpha1.StackTemplate)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", tmpl.Status.Conditions)
		if check != nil {
			check(g, tmpl)
		}
	}).WithTimeout(2*time.Minute).Should(Succeed(), why)
}

// waitInstance waits until the instance's condition is True.
func waitInstance(t *testing.T, inst *unstructured.Unstructured, cond, why string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		u := inst.DeepCopy()
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(inst), u)).To(Succeed())
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		g.Expect(conditionStatus(u, cond)).To(Equal("True"), "status: %v", status)
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), why)
}

func conditionStatus(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "status")
}

func conditionReason(u *unstructured.Unstructured, typ string) string {
	return conditionField(u, typ, "reason")
}

func conditionField(u *unstructured.Unstructured, typ, field string) string {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range list {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m[field].(string)
			return s
		}
	}
	return ""
}

// A template that the install does not allow, or whose definition's name is taken by a
// CustomResourceDefinition Stackwright did not create for it, is Stalled with the reason,
// and the taken definition is left untouched.
func TestManager_StackTemplate_RefusesGroupsAndDefinitionsNotItsOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := startTemplateManager(t)

	taken := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, taken)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), taken) })

	stack := apiextensionsv1.JSON{Raw: []byte(`{"stack":"w","programRef":{"name":"w"}}`)}
	for _, tt := range []struct{ name, group, want string }{
		{name: "conflict-" + strings.Split(group, ".")[0], group: group, want: v1alpha1.ReasonDefinitionConflict},
		{name: "elsewhere-" + strings.Split(group, ".")[0], group: "other." + group, want: v1alpha1.ReasonAPIGroupNotAllowed},
	} {
		tmpl := &v1alpha1.StackTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: tt.name},
			Spec:       v1alpha1.StackTemplateSpec{API: v1alpha1.TemplateAPI{Group: tt.group, Kind: "Widget", Plural: "widgets"}, Namespace: "platform", Stack: stack},
		}
		g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
			c := apimeta.FindStatusCondition(tmpl.Status.Conditions, pulumiv1.ConditionStalled)
			g.Expect(c).NotTo(BeNil(), "conditions: %v", tmpl.Status.Conditions)
			g.Expect(c.Reason).To(Equal(tt.want))
		}).WithTimeout(time.Minute).Should(Succeed(), tt.name)
		g.Expect(env.Client.Delete(ctx, tmpl)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl))
		}).WithTimeout(time.Minute).Should(BeTrue(), "a template that served nothing goes at once")
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
	g.Expect(taken.Labels).NotTo(HaveKey(v1alpha1.TemplateLabel), "the taken definition is untouched")
}
