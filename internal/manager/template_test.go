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
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The wiring of templates, on docs/self-service.md's worked example: with the manager's
// StackTemplate, instance and Stack controllers and a real engine, a tenant's instance
// becomes a Stack in the platform namespace that runs, the instance is Ready with the
// published outputs in its own namespace, and deleting it destroys its Stack. The example
// also publishes the program's size, and declares typed status fields: the real outputs
// fill them (a number as an integer), kubectl get shows them as the definition's columns,
// and the secret output who (it is the secret parameter owner's) fills none. What each
// controller does is tested in its package (internal/controller/stacktemplate, instance).
func TestManager_StackTemplate_InstanceBecomesAStackInThePlatformNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := fmt.Sprintf("t%d.test.stackwright.dev", rand.Uint32())
	opts := testOptions(t)
	opts.TemplateAPIGroups = []string{group}
	startManager(t, env.Config, opts)
	platform, tenant := env.Namespace(t), env.Namespace(t)
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: tenant}, ns)).To(Succeed())
	ns.Labels = map[string]string{"team": "a"}
	g.Expect(env.Client.Update(ctx, ns)).To(Succeed())

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Namespace: platform}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"size": {Type: "Number"}, "owner": {Type: "String"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{
		"greeting": {Raw: []byte(`"size ${size}"`)}, "who": {Raw: []byte(`"${owner}"`)}, "internal": {Raw: []byte(`"platform only"`)},
		"size": {Raw: []byte(`"${size}"`)},
	}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "buckets-" + strings.Split(group, ".")[0]},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: group, Kind: "Bucket", Plural: "buckets"},
			Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","minimum":1,"maximum":10,"default":3},"owner":{"type":"string"}}}`)},
			Namespace:  platform,
			Stack:      apiextensionsv1.JSON{Raw: []byte(`{"stack":"buckets","programRef":{"name":"bucket"},"destroyOnFinalize":true}`)},
			Config:     []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}, {Key: "owner", Parameter: "owner", Secret: true}},
			Outputs:    []string{"greeting", "who", "size"},
			StatusFields: []v1alpha1.TemplateStatusField{
				{Name: "greeting", Type: v1alpha1.StatusFieldString, Output: "greeting", PrinterColumn: v1alpha1.PrinterColumnStandard},
				{Name: "size", Type: v1alpha1.StatusFieldInteger, Output: "size", PrinterColumn: v1alpha1.PrinterColumnWide},
				{Name: "owner", Type: v1alpha1.StatusFieldString, Output: "who"},
			},
			ReadyWhen:         []string{"greeting", "size"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		},
	}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", tmpl.Status.Conditions)
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the template is served")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: tmpl.DefinitionName()}, crd)).To(Succeed())
	columns := map[string]int32{}
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		columns[c.Name+" "+c.Type+" "+c.JSONPath] = c.Priority
	}
	g.Expect(columns).To(HaveKeyWithValue("Greeting string .status.fields.greeting", int32(0)))
	g.Expect(columns).To(HaveKeyWithValue("Size integer .status.fields.size", int32(1)))

	bucket := func(params string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Bucket","metadata":{"namespace":%q,"name":"data"},
			"spec":{"parameters":%s,"writeConnectionSecretToRef":{"name":"bucket-conn"},"writeOutputsToConfigMapRef":{"name":"bucket-info"}}}`,
			group, tenant, params), &u.Object)).To(Succeed())
		return u
	}
	err := env.Client.Create(ctx, bucket(`{"size":11}`))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a parameter outside the schema is refused: %v", err)
	inst := bucket(`{"owner":"alice"}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(inst.Object, "status", "conditions")
		g.Expect(conditions).To(ContainElement(And(HaveKeyWithValue("type", pulumiv1.ConditionReady), HaveKeyWithValue("status", "True"))), "status: %v", inst.Object["status"])
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the instance becomes Ready")
	outputs, _, _ := unstructured.NestedMap(inst.Object, "status", "outputs")
	g.Expect(outputs).To(HaveKeyWithValue("greeting", "size 3"), "status: the non-secret published outputs")
	g.Expect(outputs).To(HaveLen(2), "status: the non-secret published outputs")
	fields, _, _ := unstructured.NestedMap(inst.Object, "status", "fields")
	g.Expect(fields).To(Equal(map[string]any{"greeting": "size 3", "size": int64(3)}), "status: the typed fields")
	status, err := json.Marshal(inst.Object["status"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring("alice"), "the secret output fills no field")
	conn := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "bucket-conn"}, conn)).To(Succeed())
	g.Expect(conn.Data).To(Equal(map[string][]byte{"greeting": []byte("size 3"), "who": []byte("alice"), "size": []byte("3")}))
	info := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "bucket-info"}, info)).To(Succeed())
	g.Expect(info.Data).To(Equal(map[string]string{"greeting": "size 3", "size": "3"}))

	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
	g.Expect(stacks.Items).To(HaveLen(1))
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(&stacks.Items[0]), &pulumiv1.Stack{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Stack is gone: %v", err)
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the instance is gone: %v", err)
	}).WithTimeout(3*time.Minute).Should(Succeed(), "deleting the instance destroys its Stack")
}
