package manager_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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

// A Stack relabelled from one shard to the other moves over: the other shard's manager
// runs its next update (the Update's runner names that manager), exactly once, and the
// first shard leaves it alone.
func TestManager_WatchLabelSelector_RelabelledStackMovesToTheOtherShard(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	for _, shard := range []string{"a", "b"} {
		opts := testOptions(t)
		opts.WatchLabelSelector, opts.LeaderElectionID = "shard="+shard, "stackwright-relabel-"+shard
		startManager(t, env.Config, opts)
	}
	moving := createHello(t, ns, "moving", map[string]string{"shard": "a"})
	anchor := createHello(t, ns, "anchor", map[string]string{"shard": "b"})
	waitReady(t, moving, "Stack moving not reconciled by shard a")
	waitReady(t, anchor, "Stack anchor not reconciled by shard b")
	runnerOf := func(stack string) map[string]string {
		var updates v1alpha1.UpdateList
		g.Expect(env.Client.List(t.Context(), &updates, client.InNamespace(ns), client.MatchingLabels{v1alpha1.StackLabel: stack})).To(Succeed())
		out := map[string]string{}
		for _, u := range updates.Items {
			out[u.Spec.Revision] = u.Status.Runner
		}
		return out
	}
	shardA, shardB := runnerOf("moving")["generation/1"], runnerOf("anchor")["generation/1"]
	g.Expect(shardA).NotTo(Equal(shardB), "the two managers' runners tell them apart")

	st := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(moving), st)).To(Succeed())
	p := client.MergeFrom(st.DeepCopy())
	st.Labels["shard"] = "b"
	g.Expect(env.Client.Patch(t.Context(), st, p)).To(Succeed())
	prog := &pulumiv1.Program{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(moving), prog)).To(Succeed())
	prog.Program.Outputs["greeting"] = apiextensionsv1.JSON{Raw: []byte(`"moved"`)}
	g.Expect(env.Client.Update(t.Context(), prog)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(moving), st)).To(Succeed())
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
	}).WithTimeout(2*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the moved Stack deploys the new program")
	runs := runnerOf("moving")
	g.Expect(runs).To(HaveLen(2), "one Update per generation: no duplicate run")
	g.Expect(runs["generation/2"]).To(Equal(shardB), "shard b ran the moved Stack's update")
}
