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

// Two managers shard one namespace's Stacks by label: each reconciles and runs exactly
// its own, and a Stack neither selects is left alone.
func TestManager_WatchLabelSelector_ShardsTheFleet(t *testing.T) {
	g := NewWithT(t)
	bin, err := repo.Bin()
	g.Expect(err).NotTo(HaveOccurred())
	if err := repo.RequireBinaries(bin, "pulumi", "pulumi-language-yaml"); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	for _, shard := range []string{"a", "b"} {
		opts := manager.DefaultOptions()
		opts.DataDir, opts.PulumiBin = t.TempDir(), bin
		opts.MetricsAddr, opts.ProbeAddr = "0", "0"
		opts.WatchLabelSelector, opts.LeaderElectionID = "shard="+shard, "stackwright-shard-"+shard
		opts.SeveralPerProcess = true
		startManager(t, env.Config, opts)
	}

	created := map[string]*pulumiv1.Stack{}
	for name, labels := range map[string]map[string]string{"in-a": {"shard": "a"}, "in-b": {"shard": "b"}, "unsharded": nil} {
		prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello"`)}}
		stack := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       pulumiv1.StackSpec{Stack: "dev", ProgramRef: &pulumiv1.ProgramReference{Name: name}},
		}
		g.Expect(env.Client.Create(t.Context(), prog)).To(Succeed())
		g.Expect(env.Client.Create(t.Context(), stack)).To(Succeed())
		created[name] = stack
	}
	for _, name := range []string{"in-a", "in-b"} {
		g.Eventually(func(g Gomega) {
			st := &pulumiv1.Stack{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(created[name]), st)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(st.Status.Conditions, pulumiv1.ConditionReady)).To(BeTrue(), "conditions: %v", st.Status.Conditions)
		}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "Stack %s not reconciled by its shard", name)
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
