package stacktemplate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// updateSpec changes tmpl's spec with a merge patch of the change alone, which the
// controller's status writes meanwhile do not conflict with.
func updateSpec(t *testing.T, tmpl *v1alpha1.StackTemplate, mutate func(*v1alpha1.StackTemplateSpec)) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	before := tmpl.DeepCopy()
	mutate(&tmpl.Spec)
	g.Expect(env.Client.Patch(t.Context(), tmpl, client.MergeFrom(before))).To(Succeed())
}

// A kind evolves by versions: a second version that adds an optional parameter is served
// beside the first, which is deprecated (the API server warns whoever uses it); instances
// move to the new storage version without changing, so the first version can then be
// dropped while its instances stay readable.
func TestReconciler_Reconcile_VersionsEvolveTheKind(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	const v1Params = `{"type":"object","properties":{"size":{"type":"integer","default":3}}}`
	tmpl := template("gizmos", s.Namespace, v1Params)
	tmpl.Spec.API.Kind = "Gizmo"
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	waitUsable(t, tmpl)
	g.Expect(env.Client.Create(ctx, instance(s.Namespace, "early", "Gizmo", `{"size":2}`))).To(Succeed())

	updateSpec(t, tmpl, func(spec *v1alpha1.StackTemplateSpec) {
		spec.Parameters = nil
		spec.Versions = []v1alpha1.TemplateVersion{
			{Name: "v1alpha1", Deprecated: true, DeprecationWarning: "gizmos v1alpha1 is going: use v1", Parameters: &apiextensionsv1.JSON{Raw: []byte(v1Params)}},
			{Name: "v1", Storage: true, Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","default":3},"owner":{"type":"string"}}}`)}},
		}
	})
	waitTemplateTo(t, tmpl, "serving two versions", func(g Gomega) {
		g.Expect(tmpl.Status.ObservedGeneration).To(Equal(tmpl.Generation))
		g.Expect(tmpl.GVK().Version).To(Equal("v1"))
	})
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "gizmos." + group}, crd)).To(Succeed())
		g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}), "the instances were moved to the storage version")
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed())
	type version struct {
		Name                        string
		Served, Storage, Deprecated bool
		Warning                     string
	}
	var got []version
	for _, v := range crd.Spec.Versions {
		got = append(got, version{v.Name, v.Served, v.Storage, v.Deprecated, ptr.Deref(v.DeprecationWarning, "")})
	}
	want := []version{{"v1alpha1", true, false, true, "gizmos v1alpha1 is going: use v1"}, {"v1", true, true, false, ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("definition's versions (-want +got):\n%s", diff)
	}
	servedFor, _ := served.state(tmpl.GVK())
	g.Expect(servedFor).To(Equal(tmpl.Name), "instances are read in the storage version")

	// The API server warns whoever writes the deprecated version, as kubectl shows it.
	w := &kubetest.Warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	old := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gizmos"}
	g.Eventually(func() error {
		_, err := dyn.Resource(old).Namespace(s.Namespace).Create(ctx, instance(s.Namespace, "late", "Gizmo", `{"size":4}`), metav1.CreateOptions{})
		return err
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed())
	g.Expect(strings.Join(w.Get(), "\n")).To(ContainSubstring("gizmos v1alpha1 is going: use v1"))

	// No instance is stored in v1alpha1 any more: dropping it leaves them all readable.
	updateSpec(t, tmpl, func(spec *v1alpha1.StackTemplateSpec) { spec.Versions = spec.Versions[1:] })
	waitTemplateTo(t, tmpl, "serving v1 alone", func(g Gomega) {
		g.Expect(tmpl.Status.ObservedGeneration).To(Equal(tmpl.Generation))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "gizmos." + group}, crd)).To(Succeed())
		g.Expect(crd.Spec.Versions).To(HaveLen(1))
	})
	for name, size := range map[string]int64{"early": 2, "late": 4} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(tmpl.GVK())
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, u)).To(Succeed())
		}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed())
		got, _, _ := unstructured.NestedInt64(u.Object, "spec", "parameters", "size")
		g.Expect(got).To(Equal(size), name)
	}
}

// A change that would break instances is refused, naming it, and the definition keeps
// serving what it served; an additive one is applied. Both a change of a served version's
// schema and a new version that does not read an earlier one's instances count.
func TestReconciler_Reconcile_BreakingChangesAreRefused(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	const served = `{"type":"object","properties":{"size":{"type":"integer"},"tier":{"type":"string","enum":["bronze","gold"]}}}`
	tmpl := template("widgetries", s.Namespace, served)
	tmpl.Spec.API.Kind = "Widgetry"
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	schemaOf := func() string {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "widgetries." + group}, crd)).To(Succeed())
		b, err := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["parameters"].Properties)
		g.Expect(err).NotTo(HaveOccurred())
		return string(b)
	}
	before := schemaOf()
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.StackTemplateSpec)
		want   string
	}{
		{"typeChanged", func(spec *v1alpha1.StackTemplateSpec) {
			spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"string"},"tier":{"type":"string","enum":["bronze","gold"]}}}`)}
		}, "version v1alpha1: spec.parameters.size: type changed from integer to string"},
		{"enumNarrowed", func(spec *v1alpha1.StackTemplateSpec) {
			spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer"},"tier":{"type":"string","enum":["bronze"]}}}`)}
		}, `version v1alpha1: spec.parameters.tier: enum no longer allows "gold"`},
		{"newVersionDropsAProperty", func(spec *v1alpha1.StackTemplateSpec) {
			spec.Parameters = nil
			spec.Versions = []v1alpha1.TemplateVersion{
				{Name: "v1alpha1", Parameters: &apiextensionsv1.JSON{Raw: []byte(served)}},
				{Name: "v1", Storage: true, Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer"}}}`)}},
			}
		}, "version v1 does not read what v1alpha1 wrote: spec.parameters.tier: "},
		{"storedVersionRemoved", func(spec *v1alpha1.StackTemplateSpec) {
			spec.Parameters = nil
			spec.Versions = []v1alpha1.TemplateVersion{{Name: "v1", Storage: true, Parameters: &apiextensionsv1.JSON{Raw: []byte(served)}}}
		}, "version v1alpha1 is removed while instances are stored in it"},
	} {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
		good := tmpl.Spec.DeepCopy()
		updateSpec(t, tmpl, tc.mutate)
		c := waitTemplate(t, tmpl, pulumiv1.ConditionStalled, v1alpha1.ReasonBreakingChange)
		g.Expect(c.Message).To(ContainSubstring(tc.want), tc.name)
		g.Expect(schemaOf()).To(Equal(before), "%s: the definition changed", tc.name)
		updateSpec(t, tmpl, func(spec *v1alpha1.StackTemplateSpec) { *spec = *good })
		waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	}

	updateSpec(t, tmpl, func(spec *v1alpha1.StackTemplateSpec) {
		spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer"},"tier":{"type":"string","enum":["bronze","gold","silver"]},"owner":{"type":"string"}}}`)}
	})
	waitTemplateTo(t, tmpl, "an additive change is served", func(g Gomega) {
		g.Expect(tmpl.Status.ObservedGeneration).To(Equal(tmpl.Generation))
		g.Expect(schemaOf()).To(ContainSubstring(`"owner"`))
	})
}

// A version that renames parameters needs the manager's conversion webhook: without one
// (this suite serves none) the template Stalls saying so, and a rename that cannot be
// converted is refused as invalid, naming it; the definition keeps serving what it served.
func TestReconciler_Reconcile_RenamesNeedTheConversionWebhook(t *testing.T) {
	t.Parallel()
	s := env.Scenario(t)
	g := NewWithT(t)
	ctx := t.Context()
	const v1Params = `{"type":"object","properties":{"size":{"type":"integer"}}}`
	tmpl := template("sprockets", s.Namespace, v1Params)
	tmpl.Spec.API.Kind = "Sprocket"
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	versions := func(renames ...v1alpha1.ParameterRename) func(*v1alpha1.StackTemplateSpec) {
		return func(spec *v1alpha1.StackTemplateSpec) {
			spec.Parameters = nil
			spec.Versions = []v1alpha1.TemplateVersion{
				{Name: "v1alpha1", Parameters: &apiextensionsv1.JSON{Raw: []byte(v1Params)}},
				{Name: "v1", Storage: true, Renames: renames, Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"replicas":{"type":"integer"}}}`)}},
			}
		}
	}
	updateSpec(t, tmpl, versions(v1alpha1.ParameterRename{From: "size", To: "replicas"}))
	c := waitTemplate(t, tmpl, pulumiv1.ConditionStalled, v1alpha1.ReasonConversionUnavailable)
	g.Expect(c.Message).To(ContainSubstring("--conversion-webhook-bind-address"))

	updateSpec(t, tmpl, versions(v1alpha1.ParameterRename{From: "count", To: "replicas"}))
	c = waitTemplate(t, tmpl, pulumiv1.ConditionStalled, v1alpha1.ReasonTemplateInvalid)
	g.Expect(c.Message).To(ContainSubstring("version v1 renames count to replicas: version v1alpha1 has no parameter count"))

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "sprockets." + group}, crd)).To(Succeed())
	g.Expect(crd.Spec.Versions).To(HaveLen(1), "the definition changed")
	g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter))
}
