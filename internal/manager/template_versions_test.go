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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// With the whole manager, its conversion webhook and a real engine: a kind gains a version
// v1 that renames the parameter size to replicas and adds an optional one, and becomes its
// storage version; v1alpha1 is deprecated. Both are served: the API server converts through
// the webhook, and warns whoever uses v1alpha1. The instances move to v1 without an update
// of their Stacks, since what they render did not change; an instance created in v1alpha1
// after the change deploys what it asked for.
func TestManager_StackTemplate_NewStorageVersionRunsNoUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := fmt.Sprintf("v%d.test.stackwright.dev", rand.Uint32())
	opts := testOptions(t)
	opts.TemplateAPIGroups = []string{group}
	opts.ConversionWebhookAddr = "127.0.0.1:0"
	startManager(t, env.Config, opts)
	platform, tenant := env.Namespace(t), env.Namespace(t)

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "queue", Namespace: platform}}
	prog.Program.Configuration = map[string]pulumiv1.Configuration{"size": {Type: "Number"}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"capacity": {Raw: []byte(`"${size}"`)}}
	g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
	const v1alpha1Params = `{"type":"object","properties":{"size":{"type":"integer","default":3}}}`
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "queues-" + strings.Split(group, ".")[0]},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: group, Kind: "Queue", Plural: "queues"},
			Parameters: &apiextensionsv1.JSON{Raw: []byte(v1alpha1Params)},
			Namespace:  platform,
			Stack:      apiextensionsv1.JSON{Raw: []byte(`{"stack":"queues","programRef":{"name":"queue"}}`)},
			Config:     []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}},
		},
	}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	ready := func(g Gomega, gen int64) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", tmpl.Status.Conditions)
		g.Expect(tmpl.Status.ObservedGeneration).To(BeNumerically(">=", gen))
	}
	g.Eventually(func(g Gomega) { ready(g, 1) }).WithTimeout(2*time.Minute).Should(Succeed(), "the template is served")

	inst := &unstructured.Unstructured{}
	g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Queue","metadata":{"namespace":%q,"name":"jobs"},"spec":{"parameters":{"size":5}}}`,
		group, tenant), &inst.Object)).To(Succeed())
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	instanceReady := func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(inst.Object, "status", "conditions")
		g.Expect(conditions).To(ContainElement(And(HaveKeyWithValue("type", pulumiv1.ConditionReady), HaveKeyWithValue("status", "True"))), "status: %v", inst.Object["status"])
	}
	g.Eventually(instanceReady).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the instance becomes Ready")
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
	g.Expect(stacks.Items).To(HaveLen(1))
	before := stacks.Items[0]
	updates := func() int {
		var list v1alpha1.UpdateList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(platform), client.MatchingLabels{v1alpha1.StackLabel: before.Name})).To(Succeed())
		return len(list.Items)
	}
	ran := updates()

	patch := client.MergeFrom(tmpl.DeepCopy())
	tmpl.Spec.Parameters = nil
	tmpl.Spec.Versions = []v1alpha1.TemplateVersion{
		{Name: "v1alpha1", Deprecated: true, DeprecationWarning: "queues v1alpha1 is going: use v1 (size is now replicas)", Parameters: &apiextensionsv1.JSON{Raw: []byte(v1alpha1Params)}},
		{
			Name: "v1", Storage: true, Renames: []v1alpha1.ParameterRename{{From: "size", To: "replicas"}},
			Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"replicas":{"type":"integer","default":3},"region":{"type":"string"}}}`)},
		},
	}
	tmpl.Spec.Config = []v1alpha1.TemplateConfig{{Key: "size", Parameter: "replicas"}}
	g.Expect(env.Client.Patch(ctx, tmpl, patch)).To(Succeed())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Eventually(func(g Gomega) {
		ready(g, tmpl.Generation)
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "queues." + group}, crd)).To(Succeed())
		g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the instances move to v1")
	g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter))

	// Read in either version, the instance holds its value under that version's name.
	w := &kubetest.Warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	queues := func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: "queues"}).Namespace(tenant)
	}
	params := func(version, name string) map[string]any {
		u, err := queues(version).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		p, _, _ := unstructured.NestedMap(u.Object, "spec", "parameters")
		return p
	}
	g.Expect(params("v1", "jobs")).To(Equal(map[string]any{"replicas": int64(5)}))
	g.Expect(params("v1alpha1", "jobs")).To(Equal(map[string]any{"size": int64(5)}))
	g.Expect(strings.Join(w.Get(), "\n")).To(ContainSubstring("queues v1alpha1 is going: use v1 (size is now replicas)"))

	inst.SetAPIVersion(group + "/v1")
	g.Eventually(instanceReady).WithTimeout(time.Minute).Should(Succeed(), "the instance, read in v1, stays Ready")
	g.Consistently(updates).WithTimeout(5*time.Second).WithPolling(500*time.Millisecond).Should(Equal(ran), "a new storage version ran an update")
	after := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&before), after)).To(Succeed())
	g.Expect(after.Generation).To(Equal(before.Generation), "the instance's Stack was rendered anew")

	// An instance written in the deprecated version deploys its size, renamed.
	late := &unstructured.Unstructured{}
	g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Queue","metadata":{"name":"late"},"spec":{"parameters":{"size":7}}}`, group), &late.Object)).To(Succeed())
	_, err = queues("v1alpha1").Create(ctx, late, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(params("v1", "late")).To(Equal(map[string]any{"replicas": int64(7)}))
	g.Eventually(func(g Gomega) {
		var list pulumiv1.StackList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(2))
		for _, st := range list.Items {
			if st.Name == before.Name {
				continue
			}
			g.Expect(st.Status.Outputs).To(HaveKeyWithValue("capacity", apiextensionsv1.JSON{Raw: []byte(`7`)}), "outputs: %v", st.Status.Outputs)
		}
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the late instance's Stack deploys size 7")
}
