package stacktemplate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A template's kind is installed as a CustomResourceDefinition that Stackwright made for it
// and served by the instance controller; its spec is kept as the revision of its
// generation. The API server then checks instances' parameters against the template's
// schema and applies its defaults.
func TestReconciler_Reconcile_ServesTheTemplatesKind(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	tmpl := template("buckets", s.Namespace, `{"type":"object","properties":{"size":{"type":"integer","minimum":1,"maximum":10,"default":3},"owner":{"type":"string"}}}`)
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	waitUsable(t, tmpl)

	g.Expect(tmpl.Status.CustomResourceDefinition).To(Equal("buckets." + group))
	g.Expect(tmpl.Status.Revision).To(Equal(tmpl.Generation))
	servedFor, _ := served.state(tmpl.GVK())
	g.Expect(servedFor).To(Equal(tmpl.Name), "the instance controller serves the kind")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "buckets." + group}, crd)).To(Succeed())
	g.Expect(crd.Labels).To(HaveKeyWithValue(v1alpha1.TemplateLabel, tmpl.Name))
	rev := &v1alpha1.StackTemplateRevision{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, tmpl.Generation)}, rev)).To(Succeed())
	g.Expect(metav1.IsControlledBy(rev, tmpl)).To(BeTrue())
	g.Expect(rev.Spec).To(Equal(tmpl.Snapshot(tmpl.Generation)))

	strict := client.FieldValidation("Strict")
	for name, params := range map[string]string{
		"out of range":  `{"size":11}`,
		"wrong type":    `{"size":"big"}`,
		"unknown field": `{"colour":"red"}`,
	} {
		err := env.Client.Create(ctx, instance(s.Namespace, "bad", "Bucket", params), strict)
		g.Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "%s: %v", name, err)
	}
	inst := instance(s.Namespace, "data", "Bucket", `{"owner":"alice"}`)
	g.Expect(env.Client.Create(ctx, inst, strict)).To(Succeed())
	size, _, _ := unstructured.NestedInt64(inst.Object, "spec", "parameters", "size")
	g.Expect(size).To(BeEquivalentTo(3), "the schema's default is applied")
}

// A template whose parameters have required fields is served too (an empty default would
// make the API server refuse its definition), and its instances must set them.
func TestReconciler_Reconcile_ServesRequiredParameters(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	tmpl := template("queues", s.Namespace, `{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"size":{"type":"integer","default":3}}}`)
	tmpl.Spec.API.Kind = "Queue"
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	waitUsable(t, tmpl)

	bare := instance(s.Namespace, "bare", "Queue", `{}`)
	unstructured.RemoveNestedField(bare.Object, "spec", "parameters")
	for name, inst := range map[string]*unstructured.Unstructured{
		"no parameters":     bare,
		"no required field": instance(s.Namespace, "nameless", "Queue", `{"size":2}`),
	} {
		err := env.Client.Create(ctx, inst)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
	}
	inst := instance(s.Namespace, "orders", "Queue", `{"name":"orders"}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())
	size, _, _ := unstructured.NestedInt64(inst.Object, "spec", "parameters", "size")
	g.Expect(size).To(BeEquivalentTo(3), "the schema's default is applied")
}

// A template that the install does not allow, or whose definition's name is taken by a
// CustomResourceDefinition Stackwright did not create for it, is Stalled with the reason,
// and the taken definition is left untouched; either goes at once when deleted.
func TestReconciler_Reconcile_RefusesGroupsAndDefinitionsNotItsOwn(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	taken := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	create(t, taken)

	for _, tt := range []struct{ name, group, want string }{
		{name: "widgets-conflict", group: group, want: v1alpha1.ReasonDefinitionConflict},
		{name: "widgets-elsewhere", group: "other." + group, want: v1alpha1.ReasonAPIGroupNotAllowed},
	} {
		tmpl := template("widgets", "platform", "")
		tmpl.Name, tmpl.Spec.API.Group, tmpl.Spec.API.Kind = tt.name, tt.group, "Widget"
		create(t, tmpl)
		waitTemplate(t, tmpl, pulumiv1.ConditionStalled, tt.want)
		g.Expect(env.Client.Delete(ctx, tmpl)).To(Succeed())
		waitGone(t, tmpl, "a template that served nothing goes at once")
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
	g.Expect(taken.Labels).NotTo(HaveKey(v1alpha1.TemplateLabel), "the taken definition is untouched")
}

// A template whose spec.stack is no Stack's spec, whose parameters are no object schema,
// whose spec.stacks cannot be ordered, or whose objects are of a kind the install does not
// allow, is Stalled before anything is installed for it.
func TestReconciler_Reconcile_StallsAnInvalidTemplate(t *testing.T) {
	t.Parallel()
	const ok = `{"stack":"g","programRef":{"name":"g"}}`
	member := func(name, prefix string, dependsOn ...string) v1alpha1.TemplateStack {
		return v1alpha1.TemplateStack{Name: name, Stack: apiextensionsv1.JSON{Raw: []byte(`{"stack":"` + prefix + `","programRef":{"name":"g"}}`)}, DependsOn: dependsOn}
	}
	for _, tt := range []struct {
		name, stack, params, reason, want string
		stacks                            []v1alpha1.TemplateStack
		objects                           []v1alpha1.TemplateObject
	}{
		{name: "gadgets-unknown-field", stack: `{"stack":"g","programRef":{"name":"g"},"colour":"red"}`, want: "spec.stack is not a Stack's spec"},
		{name: "gadgets-no-prefix", stack: `{"programRef":{"name":"g"}}`, want: "spec.stack.stack is not set"},
		{name: "gadgets-not-an-object", stack: ok, params: `{"type":"string"}`, want: "must be a schema of type object"},
		{
			name: "gadgets-cycle", stack: ok, stacks: []v1alpha1.TemplateStack{member("a", "a", "b"), member("b", "b", "a")},
			want: "spec.stacks form a dependency cycle: a → b → a",
		},
		{name: "gadgets-unknown-stack", stack: ok, stacks: []v1alpha1.TemplateStack{member("a", "a", "db")}, want: "spec.stacks[a] depends on db, which is not another entry of spec.stacks"},
		{
			name: "gadgets-kind-not-allowed", stack: ok, reason: v1alpha1.ReasonObjectKindNotAllowed,
			objects: []v1alpha1.TemplateObject{{Name: "admin", Object: apiextensionsv1.JSON{Raw: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding"}`)}}},
			want:    "(--template-object-kinds): spec.objects[admin] is a RoleBinding.rbac.authorization.k8s.io",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := template("gadgets", "platform", tt.params)
			tmpl.Name, tmpl.Spec.API.Kind, tmpl.Spec.API.Plural = tt.name, "Gadget", tt.name
			tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: []byte(tt.stack)}
			tmpl.Spec.Stacks, tmpl.Spec.Objects = tt.stacks, tt.objects
			create(t, tmpl)
			reason := tt.reason
			if reason == "" {
				reason = v1alpha1.ReasonTemplateInvalid
			}
			c := waitTemplate(t, tmpl, pulumiv1.ConditionStalled, reason)
			NewWithT(t).Expect(c.Message).To(ContainSubstring(tt.want))
			err := env.Client.Get(t.Context(), client.ObjectKey{Name: tt.name + "." + group}, &apiextensionsv1.CustomResourceDefinition{})
			NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no definition is installed: %v", err)
		})
	}
}

// A deleted template waits for its last instance to go, counting them, and then removes its
// kind's definition and has the instance controller forget the kind. The instances are
// never deleted for it.
func TestReconciler_Reconcile_DeletionWaitsForTheLastInstance(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	tmpl := template("pipes", s.Namespace, "")
	tmpl.Spec.API.Kind = "Pipe"
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	waitUsable(t, tmpl)
	inst := instance(s.Namespace, "main", "Pipe", `{}`)
	g.Expect(env.Client.Create(ctx, inst)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, tmpl)).To(Succeed())
	c := waitTemplate(t, tmpl, pulumiv1.ConditionReconciling, v1alpha1.ReasonInstancesRemain)
	g.Expect(c.Message).To(ContainSubstring("1 Pipe instance(s) remain, e.g. " + s.Namespace + "/main"))
	g.Expect(tmpl.Status.Instances).To(BeEquivalentTo(1))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed(), "the instance is the tenant's: it stays")

	g.Expect(env.Client.Delete(ctx, inst)).To(Succeed())
	waitGone(t, tmpl, "the template goes after its last instance")
	waitGone(t, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "pipes." + group}}, "its CustomResourceDefinition goes")
	_, forgotten := served.state(tmpl.GVK())
	g.Expect(forgotten).To(BeTrue(), "the instance controller forgets the kind")
}

// Every generation of a template is a revision; a revision is kept while an instance's
// Stack runs it or a newer one before the latest, counted as behind, or while a rollout of
// the template's revisions would return to it on abort, and deleted once none does.
func TestReconciler_Reconcile_KeepsTheRevisionsItsInstancesRun(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	tmpl := template("queues", s.Namespace, "")
	tmpl.Spec.API.Kind = "Queue"
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	first := tmpl.Status.Revision

	// An instance's Stack, as the instance controller labels it.
	st := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Labels: map[string]string{
			v1alpha1.TemplateLabel: tmpl.Name, v1alpha1.TemplateRevisionLabel: strconv.FormatInt(first, 10),
		}},
		Spec: pulumiv1.StackSpec{Stack: "q", ProgramRef: &pulumiv1.ProgramReference{Name: "q"}},
	}
	s.Create(st)
	s.Patch(tmpl, func() {
		tmpl.Spec.Stack = apiextensionsv1.JSON{Raw: []byte(`{"stack":"q","programRef":{"name":"q2"}}`)}
	})
	waitTemplateTo(t, tmpl, "the new revision is served and the Stack is behind", func(g Gomega) {
		g.Expect(tmpl.Status.Revision).To(BeNumerically(">", first))
		g.Expect(tmpl.Status.InstancesBehind).To(BeEquivalentTo(1))
	})
	second := tmpl.Status.Revision
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, first)}, &v1alpha1.StackTemplateRevision{})).
		To(Succeed(), "the revision a Stack runs is kept")

	// A rollout of the template's revisions whose Stacks would return to the first on abort.
	ro := &v1alpha1.StackRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "queues"},
		Spec: v1alpha1.StackRolloutSpec{Template: &v1alpha1.RolloutTemplate{Name: tmpl.Name},
			Waves: v1alpha1.RolloutWaves{Steps: []v1alpha1.RolloutStep{{Stacks: intstr.FromInt32(1)}}}},
	}
	s.Create(ro)
	stable := func(rev int64) {
		t.Helper()
		ro.Status.Stable = &v1alpha1.RolloutRevision{Revision: strconv.FormatInt(rev, 10), Digest: "sha256:x"}
		g.Expect(env.Client.Status().Update(ctx, ro)).To(Succeed())
	}
	stable(first)
	s.Patch(st, func() { st.Labels[v1alpha1.TemplateRevisionLabel] = strconv.FormatInt(second, 10) })
	waitTemplateTo(t, tmpl, "no Stack is behind", func(g Gomega) { g.Expect(tmpl.Status.InstancesBehind).To(BeZero()) })
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, first)}, &v1alpha1.StackTemplateRevision{})).
		To(Succeed(), "the revision a rollout's Stacks return to on abort is kept")

	stable(second)
	waitTemplateTo(t, tmpl, "the unused revision is gone", func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, first)}, &v1alpha1.StackTemplateRevision{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "revision %d: %v", first, err)
	})
	latest := &v1alpha1.StackTemplateRevision{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: v1alpha1.RevisionName(tmpl.Name, second)}, latest)).To(Succeed())
	g.Expect(string(latest.Spec.Stack.Raw)).To(ContainSubstring(`"q2"`))
	latest.Spec.Outputs = append(latest.Spec.Outputs, "tampered")
	g.Expect(apierrors.IsInvalid(env.Client.Update(ctx, latest))).To(BeTrue(), "a revision is immutable")
}

// Waits as long as kubetest's: the package's tests run in parallel on a shared machine.
const (
	waitTimeout = 3 * time.Minute
	waitPolling = 250 * time.Millisecond
)

// template is a template of the package's group whose kind's plural is plural, named
// after it, with its Stacks in namespace and parameters the schema params ("" for none).
func template(plural, namespace, params string) *v1alpha1.StackTemplate {
	tmpl := &v1alpha1.StackTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: plural},
		Spec: v1alpha1.StackTemplateSpec{
			API:       v1alpha1.TemplateAPI{Group: group, Kind: "Bucket", Plural: plural},
			Namespace: namespace,
			Stack:     apiextensionsv1.JSON{Raw: []byte(`{"stack":"s","programRef":{"name":"p"}}`)},
		},
	}
	if params != "" {
		tmpl.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(params)}
	}
	return tmpl
}

// instance is an instance of kind in the package's group with the given parameters.
func instance(namespace, name, kind, params string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"%s/v1alpha1","kind":%q,"metadata":{"namespace":%q,"name":%q},"spec":{"parameters":%s}}`,
		group, kind, namespace, name, params), &u.Object); err != nil {
		panic(err)
	}
	return u
}

// create creates a cluster-scoped obj and deletes it when the test ends (if the test has
// not).
func create(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
}

// waitTemplate waits until tmpl's condition typ is True with reason, and returns it.
func waitTemplate(t *testing.T, tmpl *v1alpha1.StackTemplate, typ, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	waitTemplateTo(t, tmpl, typ+" "+reason, func(g Gomega) {
		c = apimeta.FindStatusCondition(tmpl.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "conditions: %v", tmpl.Status.Conditions)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	})
	return c
}

// waitTemplateTo waits until check holds of tmpl, as read from the API server.
func waitTemplateTo(t *testing.T, tmpl *v1alpha1.StackTemplate, why string, check func(Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		check(g)
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), why)
}

// waitUsable waits until the test's client can use tmpl's kind: the API server may announce
// a definition established before its discovery lists the kind.
func waitUsable(t *testing.T, tmpl *v1alpha1.StackTemplate) {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tmpl.GVK().GroupVersion().WithKind(tmpl.Spec.API.Kind + "List"))
	NewWithT(t).Eventually(func() error { return env.Client.List(t.Context(), list) }).
		WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed(), "the kind is served")
}

// waitGone waits until the cluster-scoped obj is deleted.
func waitGone(t *testing.T, obj client.Object, why string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj))
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(BeTrue(), why)
}
