package job_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// The manager's own API writes for an up of a new desired state under the Job executor,
// where the claim makes Job creation exclusive (an Update is never bound to a runner
// here): the Stack's status (intent, result), the Update (created, claimed Running, its
// result with its outputs), the work Secret (created, deleted once the result is in), the
// Job, and UpdateStarted and UpdateSucceeded: 10. Not the manager's, and not counted: the
// runner Pod's (it writes nothing to the API), and the Job controller's, scheduler's and
// kubelet's writes of the Job and its Pod (here a stand-in's).
func TestExecutor_Writes_PerUpdateAreBounded(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.filesStack("w", nil)
	s.waitReady("w")
	managerWrites.Settle(t, s.Namespace, 2*time.Second)

	p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "w"}}
	s.g.Expect(s.Get(p)).To(Succeed())
	p.Program.Resources["f"].Properties["content"] = apiextensionsv1.JSON{Raw: []byte(`"from a runner, again"`)}
	s.g.Expect(env.Client.Update(t.Context(), p)).To(Succeed())
	s.Eventually(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: "w"}, st)).To(Succeed())
		g.Expect(st.Status.LastUpdate).NotTo(BeNil())
		g.Expect(st.Status.LastUpdate.LastSuccessfulCommit).To(Equal("generation/2"))
	})
	s.waitReady("w")
	counts, total := map[string]int{}, 0
	for _, w := range managerWrites.Settle(t, s.Namespace, 2*time.Second) {
		if w.Resource == "programs" || w.Regarding == "Program" {
			continue
		}
		counts[w.Kind()]++
		total++
		t.Logf("  %d. %s", total, w)
	}
	t.Logf("writes for an up of a new desired state: %d %v", total, counts)
	s.g.Expect(total).To(BeNumerically("<=", 10), "writes: %v", counts)
}
