package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
)

// The composed example of docs/self-service.md, with the real engine: an instance becomes
// a network Stack, whose output cidr the instance's own Stack reads as config, and a
// NetworkPolicy in the tenant's namespace from that output. The consumer's stack is
// created only once the producer's has run, and its outputs show it read the producer's;
// the instance is Ready with both Stacks' outputs. Deleting it deletes the policy and
// destroys the consumer, and the producer only once the consumer is gone. kubectl
// stackwright trace shows the instance's two Stacks.
func TestManager_StackTemplate_ComposedStacksInOrderAndBackInReverse(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := fmt.Sprintf("t%d.test.stackwright.dev", rand.Uint32())
	opts := testOptions(t)
	opts.TemplateAPIGroups = []string{group}
	startManager(t, env.Config, opts)
	platform, tenant := env.Namespace(t), env.Namespace(t)

	network := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "network", Namespace: platform}}
	network.Program.Configuration = map[string]pulumiv1.Configuration{"size": {Type: "Number"}}
	network.Program.Outputs = map[string]apiextensionsv1.JSON{"cidr": {Raw: []byte(`"10.${size}.0.0/16"`)}}
	app := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: platform}}
	app.Program.Configuration = map[string]pulumiv1.Configuration{"cidr": {Type: "String"}}
	app.Program.Outputs = map[string]apiextensionsv1.JSON{"url": {Raw: []byte(`"https://app, reachable from ${cidr}"`)}}
	g.Expect(env.Client.Create(ctx, network)).To(Succeed())
	g.Expect(env.Client.Create(ctx, app)).To(Succeed())
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "services-" + strings.Split(group, ".")[0]},
		Spec: v1alpha1.StackTemplateSpec{
			API:        v1alpha1.TemplateAPI{Group: group, Kind: "Service", Plural: "services"},
			Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"app":{"type":"string"},"size":{"type":"integer","minimum":1,"maximum":200,"default":2}}}`)},
			Namespace:  platform,
			Stack:      apiextensionsv1.JSON{Raw: []byte(`{"stack":"app","programRef":{"name":"app"},"destroyOnFinalize":true}`)},
			Config:     []v1alpha1.TemplateConfig{{Key: "cidr", StackOutput: &v1alpha1.TemplateStackOutput{Stack: "network", Output: "cidr"}}},
			Outputs:    []string{"url"},
			Stacks: []v1alpha1.TemplateStack{{
				Name: "network", Stack: apiextensionsv1.JSON{Raw: []byte(`{"stack":"network","programRef":{"name":"network"},"destroyOnFinalize":true}`)},
				Config: []v1alpha1.TemplateConfig{{Key: "size", Parameter: "size"}}, Outputs: []string{"cidr"},
			}},
			Objects: []v1alpha1.TemplateObject{{Name: "ingress", Object: apiextensionsv1.JSON{Raw: []byte(`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
				"spec":{"podSelector":{"matchLabels":{"app":"${parameters.app}"}},"ingress":[{"from":[{"ipBlock":{"cidr":"${outputs.cidr}"}}]}]}}`)}}},
		},
	}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tmpl) })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tmpl.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", tmpl.Status.Conditions)
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the template is served")

	inst := &unstructured.Unstructured{}
	g.Expect(json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":"Service","metadata":{"namespace":%q,"name":"web"},
		"spec":{"parameters":{"app":"web"},"writeOutputsToConfigMapRef":{"name":"web-info"}}}`, group, tenant), &inst.Object)).To(Succeed())
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(inst.Object, "status", "conditions")
		g.Expect(conditions).To(ContainElement(And(HaveKeyWithValue("type", pulumiv1.ConditionReady), HaveKeyWithValue("status", "True"))), "status: %v", inst.Object["status"])
	}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the instance becomes Ready")

	outputs, _, _ := unstructured.NestedMap(inst.Object, "status", "outputs")
	g.Expect(outputs).To(Equal(map[string]any{"cidr": "10.2.0.0/16", "url": "https://app, reachable from 10.2.0.0/16"}), "the consumer read the producer's output")
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(platform), client.MatchingLabels{v1alpha1.TemplateLabel: tmpl.Name})).To(Succeed())
	g.Expect(stacks.Items).To(HaveLen(2))
	var producer, consumer *pulumiv1.Stack
	for i := range stacks.Items {
		if stacks.Items[i].Labels[v1alpha1.TemplateStackLabel] == "network" {
			producer = &stacks.Items[i]
		} else {
			consumer = &stacks.Items[i]
		}
	}
	g.Expect(producer).NotTo(BeNil())
	g.Expect(consumer).NotTo(BeNil())
	finished := producer.Status.LastUpdate.LastResyncTime.Truncate(time.Second)
	g.Expect(consumer.CreationTimestamp.Time).NotTo(BeTemporally("<", finished), "the consumer is created after the producer's stack ran")
	// kubectl stackwright trace shows the instance with both of its Stacks.
	var out bytes.Buffer
	trace := kubectlplugin.NewCommand(env.Scheme, &out, func() (*kubectlplugin.Env, error) {
		c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
		return &kubectlplugin.Env{Client: c, Namespace: tenant, Out: &out, Now: time.Now}, err
	})
	trace.SetArgs([]string{"trace", "services." + group + "/web"})
	trace.SetContext(ctx)
	g.Expect(trace.Execute()).To(Succeed())
	for _, node := range []string{"Service/web", "Stack/" + producer.Name, "Stack/" + consumer.Name} {
		g.Expect(out.String()).To(MatchRegexp(regexp.QuoteMeta(node)+`\s+Ready\s`), "trace:\n%s", out.String())
	}
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "web-ingress"}, policy)).To(Succeed())
	g.Expect(policy.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal("10.2.0.0/16"))
	g.Expect(policy.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"app": "web"}))
	info := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "web-info"}, info)).To(Succeed())
	g.Expect(info.Data).To(HaveKeyWithValue("cidr", "10.2.0.0/16"))

	// Watched while the instance goes: the producer must not be deleted while its consumer
	// exists.
	early := false
	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p, c := &pulumiv1.Stack{}, &pulumiv1.Stack{}
		pErr, cErr := env.Client.Get(ctx, client.ObjectKeyFromObject(producer), p), env.Client.Get(ctx, client.ObjectKeyFromObject(consumer), c)
		if pErr == nil && !p.DeletionTimestamp.IsZero() && cErr == nil {
			early = true
		}
		g.Expect(apierrors.IsNotFound(cErr)).To(BeTrue(), "the consumer is gone: %v", cErr)
		g.Expect(apierrors.IsNotFound(pErr)).To(BeTrue(), "the producer is gone: %v", pErr)
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the instance is gone: %v", err)
	}).WithTimeout(4*time.Minute).WithPolling(100*time.Millisecond).Should(Succeed(), "deleting the instance destroys its Stacks")
	g.Expect(early).To(BeFalse(), "the producer was deleted while its consumer existed")
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the policy is deleted with the instance: %v", err)
}
