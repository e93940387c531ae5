package stacktemplate_test

import (
	"strings"
	"sync"
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
)

// warnings records the warnings the API server sends.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.seen, "\n")
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
	tmpl := template("gadgets", s.Namespace, v1Params)
	create(t, tmpl)
	waitTemplate(t, tmpl, pulumiv1.ConditionReady, v1alpha1.ReasonServing)
	waitUsable(t, tmpl)
	g.Expect(env.Client.Create(ctx, instance(s.Namespace, "early", "Bucket", `{"size":2}`))).To(Succeed())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	tmpl.Spec.Parameters = nil
	tmpl.Spec.Versions = []v1alpha1.TemplateVersion{
		{Name: "v1alpha1", Deprecated: true, DeprecationWarning: "gadgets v1alpha1 is going: use v1", Parameters: &apiextensionsv1.JSON{Raw: []byte(v1Params)}},
		{Name: "v1", Storage: true, Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer","default":3},"owner":{"type":"string"}}}`)}},
	}
	g.Expect(env.Client.Update(ctx, tmpl)).To(Succeed())
	waitTemplateTo(t, tmpl, "serving two versions", func(g Gomega) {
		g.Expect(tmpl.Status.ObservedGeneration).To(Equal(tmpl.Generation))
		g.Expect(tmpl.GVK().Version).To(Equal("v1"))
	})
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "gadgets." + group}, crd)).To(Succeed())
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
	want := []version{{"v1alpha1", true, false, true, "gadgets v1alpha1 is going: use v1"}, {"v1", true, true, false, ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("definition's versions (-want +got):\n%s", diff)
	}
	servedFor, _ := served.state(tmpl.GVK())
	g.Expect(servedFor).To(Equal(tmpl.Name), "instances are read in the storage version")

	// The API server warns whoever writes the deprecated version, as kubectl shows it.
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	old := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gadgets"}
	g.Eventually(func() error {
		_, err := dyn.Resource(old).Namespace(s.Namespace).Create(ctx, instance(s.Namespace, "late", "Bucket", `{"size":4}`), metav1.CreateOptions{})
		return err
	}).WithTimeout(waitTimeout).WithPolling(waitPolling).Should(Succeed())
	g.Expect(w.all()).To(ContainSubstring("gadgets v1alpha1 is going: use v1"))

	// No instance is stored in v1alpha1 any more: dropping it leaves them all readable.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	tmpl.Spec.Versions = tmpl.Spec.Versions[1:]
	g.Expect(env.Client.Update(ctx, tmpl)).To(Succeed())
	waitTemplateTo(t, tmpl, "serving v1 alone", func(g Gomega) {
		g.Expect(tmpl.Status.ObservedGeneration).To(Equal(tmpl.Generation))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "gadgets." + group}, crd)).To(Succeed())
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
