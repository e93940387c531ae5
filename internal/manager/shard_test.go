package manager_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Two managers shard one namespace's Stacks by label: each reconciles and runs exactly
// its own, and a Stack neither selects is left alone.
func TestManager_WatchLabelSelector_ShardsTheFleet(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	for _, shard := range []string{"a", "b"} {
		opts := testOptions(t)
		opts.WatchLabelSelector, opts.LeaderElectionID = "shard="+shard, "stackwright-shard-"+shard
		startManager(t, env.Config, opts)
	}

	created := map[string]*pulumiv1.Stack{}
	for name, labels := range map[string]map[string]string{"in-a": {"shard": "a"}, "in-b": {"shard": "b"}, "unsharded": nil} {
		created[name] = createHello(t, ns, name, labels)
	}
	for _, name := range []string{"in-a", "in-b"} {
		waitReady(t, created[name], "Stack "+name+" not reconciled by its shard")
	}
	// Exactly one run each: two shards running one Stack would show as two Updates or a
	// claim lost and retried.
	var updates v1alpha1.UpdateList
	g.Expect(env.Client.List(t.Context(), &updates, client.InNamespace(ns))).To(Succeed())
	perStack := map[string]int{}
	for _, u := range updates.Items {
		perStack[u.Spec.StackName]++
		g.Expect(u.Status.Phase).To(Equal(v1alpha1.UpdatePhaseSucceeded))
	}
	g.Expect(perStack).To(Equal(map[string]int{"in-a": 1, "in-b": 1}))
	g.Consistently(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(created["unsharded"]), st)).To(Succeed())
		g.Expect(st.Finalizers).To(BeEmpty())
		g.Expect(st.ResourceVersion).To(Equal(created["unsharded"].ResourceVersion))
	}).WithTimeout(3*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "a Stack no shard selects was touched")
}
