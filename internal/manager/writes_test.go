package manager_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/kubetest"
)

// settleWrites waits until no object of namespace ns was written for 2 s, then logs and
// returns the writes made there since the last call, counted by kind, without those of the
// Program controller (its status and its events), which are not the Update's.
func settleWrites(t *testing.T, w *kubetest.Writes, ns, what string) (map[string]int, int) {
	t.Helper()
	counts, total := map[string]int{}, 0
	var list []string
	for _, write := range w.Settle(t, ns, 2*time.Second) {
		if write.Resource == "programs" || write.Regarding == "Program" {
			continue
		}
		counts[write.Kind()]++
		total++
		list = append(list, write.String())
	}
	t.Logf("writes for %s: %d %v", what, total, counts)
	for i, write := range list {
		t.Logf("  %d. %s", i+1, write)
	}
	return counts, total
}

// The API writes an Update costs, which at fleet scale are etcd's load. An up of a new
// desired state (local executor, a run shorter than 10 s, no secret output) writes 5:
//
//  1. the Stack's status, recording the intent (status.currentUpdate) before the Update
//     exists, so that a crash cannot start a second one;
//  2. the Update, created bound to this manager's runner (spec.runner), so no claim is
//     written before it starts;
//  3. the Update's status, once: its result, with its runner, start and end times and its
//     outputs (none is secret, so no outputs Secret);
//  4. the Stack's status, the result folded in;
//  5. one event, UpdateSucceeded (a run this short has no UpdateStarted).
//
// A resync that changes nothing writes the same but the event: 4.
func TestManager_Writes_PerUpdateAreBounded(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	w := &kubetest.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = w.Wrap
	opts := testOptions(t)
	opts.WatchNamespaces, opts.LeaderElectionID = []string{ns}, "stackwright-writes-test"
	startManager(t, cfg, opts)
	stack := createHello(t, ns, "w", nil)
	waitReady(t, stack, "the first update")
	settle := func(what string) (map[string]int, int) { return settleWrites(t, w, ns, what) }
	settle("the first update")

	prog := &pulumiv1.Program{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "w"}, prog)).To(Succeed())
	prog.Program.Outputs = map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello again"`)}}
	g.Expect(env.Client.Update(t.Context(), prog)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
		g.Expect(st.Status.Conditions).To(ContainElement(HaveField("Type", pulumiv1.ConditionReady)))
	}).WithTimeout(time.Minute).Should(Succeed())
	waitReady(t, stack, "the new program")
	counts, total := settle("an up of a new desired state")
	g.Expect(total).To(BeNumerically("<=", 5), "writes: %v", counts)

	st := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
	p := client.MergeFrom(st.DeepCopy())
	st.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "resync-1"}
	g.Expect(env.Client.Patch(t.Context(), st, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stack), st)).To(Succeed())
		g.Expect(st.Status.LastUpdate.ReconcileRequest).To(Equal("resync-1"))
	}).WithTimeout(time.Minute).Should(Succeed())
	waitReady(t, stack, "the resync")
	counts, total = settle("a resync that changes nothing")
	g.Expect(total).To(BeNumerically("<=", 4), "writes: %v", counts)
	g.Expect(counts).NotTo(HaveKey("POST events"), fmt.Sprintf("a resync that changed nothing is no event: %v", counts))
}
