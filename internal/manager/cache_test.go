package manager_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/manager"
	"github.com/stackwright/stackwright/internal/testing/repo"
)

// The manager caches Updates without their log tail and managedFields, and every object
// without managedFields, while the API server keeps them all: the runner's merge patches
// write what the trimmed cache does not hold, and the Stack still converges.
func TestManager_Cache_TrimsWhatTheManagerNeverReads(t *testing.T) {
	g := NewWithT(t)
	bin, err := repo.Bin()
	g.Expect(err).NotTo(HaveOccurred())
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml"); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	opts := manager.DefaultOptions()
	opts.DataDir, opts.PulumiBin = t.TempDir(), bin
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.WatchNamespaces, opts.LeaderElectionID, opts.SeveralPerProcess = []string{ns}, "stackwright-cache-test", true
	mgr := startManager(t, env.Config, opts)

	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "trim", Namespace: ns}}
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello"`)}}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "trim", Namespace: ns},
		Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: "trim"}},
	}
	g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), stack)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", st.Status.Conditions)
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

	var stored v1alpha1.UpdateList
	g.Expect(env.Client.List(t.Context(), &stored, client.InNamespace(ns))).To(Succeed())
	g.Expect(stored.Items).To(HaveLen(1))
	u := stored.Items[0]
	g.Expect(u.Status.LogTail).NotTo(BeEmpty(), "the API server lost the log tail")
	g.Expect(u.ManagedFields).NotTo(BeEmpty())

	var cached v1alpha1.Update
	g.Eventually(func(g Gomega) {
		g.Expect(mgr.GetCache().Get(t.Context(), client.ObjectKeyFromObject(&u), &cached)).To(Succeed())
		g.Expect(cached.ResourceVersion).To(Equal(u.ResourceVersion))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(cached.Status.LogTail).To(BeEmpty(), "the cache holds the log tail")
	g.Expect(cached.ManagedFields).To(BeEmpty(), "the cache holds managedFields")
	g.Expect(cached.Status.Phase).To(Equal(u.Status.Phase))
	g.Expect(cached.Status.Conditions).To(Equal(u.Status.Conditions))

	var cachedStack pulumiv1.Stack
	g.Expect(mgr.GetCache().Get(t.Context(), client.ObjectKeyFromObject(stack), &cachedStack)).To(Succeed())
	g.Expect(cachedStack.ManagedFields).To(BeEmpty(), "the cache holds a Stack's managedFields")
}
