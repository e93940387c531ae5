package manager_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The manager caches Updates without their log tail and managedFields, and every object
// without managedFields, while the API server keeps them all: the runner's merge patches
// write what the trimmed cache does not hold, and the Stack still converges.
func TestManager_Cache_TrimsWhatTheManagerNeverReads(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	opts := testOptions(t)
	opts.WatchNamespaces, opts.LeaderElectionID = []string{ns}, "stackwright-cache-test"
	mgr := startManager(t, env.Config, opts)
	stack := createHello(t, ns, "trim", nil)
	waitReady(t, stack, "the Stack never became Ready")

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
