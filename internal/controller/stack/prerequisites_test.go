package stack_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// prereqStack is a Stack on the "chain" Program that waits for prereqs.
func (s *scenario) prereqStack(name string, prereqs ...pulumiv1.PrerequisiteRef) *pulumiv1.Stack {
	st := s.stack(name, "chain")
	st.Spec.Prerequisites = prereqs
	return st
}

func after(names ...string) []pulumiv1.PrerequisiteRef {
	refs := make([]pulumiv1.PrerequisiteRef, 0, len(names))
	for _, n := range names {
		refs = append(refs, pulumiv1.PrerequisiteRef{Name: n})
	}
	return refs
}

// A chain created last-first runs first-last: each Stack's update starts only after its
// prerequisite's has finished, and each is released by its prerequisite's success rather
// than by a periodic requeue.
func TestStackReconciler_Prerequisites_ChainConvergesInOrder(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("chain", map[string]pulumiv1.Resource{"f": fileResource("${pulumi.stack}.txt", "x")}, nil))
	const n = 10
	name := func(i int) string { return fmt.Sprintf("link-%02d", i) }
	for i := n - 1; i >= 0; i-- {
		var prereqs []pulumiv1.PrerequisiteRef
		if i > 0 {
			prereqs = after(name(i - 1))
		}
		s.create(s.prereqStack(name(i), prereqs...))
	}
	waiting := s.waitCondition(name(n-1), pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonPrerequisiteNotSatisfied)
	s.g.Expect(apimeta.FindStatusCondition(waiting.Status.Conditions, pulumiv1.ConditionReconciling).Message).To(ContainSubstring("Stack " + name(n-2)))

	for i := range n {
		s.waitReady(name(i))
	}
	for i := 1; i < n; i++ {
		prev, cur := s.updates(name(i-1)), s.updates(name(i))
		s.g.Expect(prev).To(HaveLen(1), name(i-1))
		s.g.Expect(cur).To(HaveLen(1), name(i))
		s.g.Expect(cur[0].Status.StartTime.Time).NotTo(BeTemporally("<", prev[0].Status.EndTime.Time),
			"%s started before its prerequisite %s finished", name(i), name(i-1))
		// Released by the watch: its Update is created well within the 30 s requeue of a
		// waiting Stack (it may then queue for the executor behind other tests' runs).
		s.g.Expect(cur[0].CreationTimestamp.Sub(prev[0].Status.EndTime.Time)).To(BeNumerically("<", 20*time.Second))
	}
}

func TestStackReconciler_Prerequisites_MissingWaitsThenProceeds(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("chain", map[string]pulumiv1.Resource{"f": fileResource("${pulumi.stack}.txt", "x")}, nil))
	s.create(s.prereqStack("app", after("network")...))
	st := s.waitCondition("app", pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonPrerequisiteNotSatisfied)
	s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReconciling).Message).To(ContainSubstring("Stack network does not exist"))
	s.g.Expect(s.updates("app")).To(BeEmpty())

	s.create(s.prereqStack("network"))
	s.waitReady("network")
	s.waitReady("app")
}

func TestStackReconciler_Prerequisites_CycleStalls(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("chain", map[string]pulumiv1.Resource{"f": fileResource("${pulumi.stack}.txt", "x")}, nil))
	s.create(s.prereqStack("a", after("b")...))
	s.create(s.prereqStack("b", after("a")...))
	for _, name := range []string{"a", "b"} {
		st := s.waitCondition(name, pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid)
		s.g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionStalled).Message).To(ContainSubstring("form a cycle"))
		s.g.Expect(s.updates(name)).To(BeEmpty())
	}
}

// A prerequisite whose success is older than the requirement is asked to run again (PKO's
// reconciliation-request annotation), and its dependent runs after that new success.
func TestStackReconciler_Prerequisites_StaleSuccessIsRerun(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	s.create(s.program("chain", map[string]pulumiv1.Resource{"f": fileResource("${pulumi.stack}.txt", "x")}, nil))
	s.create(s.prereqStack("base"))
	base := s.waitReady("base")
	// The window must outlast a reconcile under the load of the parallel tests, or the
	// re-run success would itself be too old by the time top looks at it. The success is
	// aged by rewriting its time, as the clock would after the window.
	const within = 10 * time.Second
	first := base.Status.LastUpdate.LastResyncTime.Add(-(within + time.Second))
	base.Status.LastUpdate.LastResyncTime = &metav1.Time{Time: first}
	s.g.Expect(env.Client.Status().Update(s.ctx(), base)).To(Succeed())

	s.create(s.prereqStack("top", pulumiv1.PrerequisiteRef{
		Name: "base", Requirement: &pulumiv1.RequirementSpec{SucceededWithinDuration: within.String()},
	}))
	s.eventually(func(g Gomega) {
		base = s.get(g, "base")
		g.Expect(base.ReconcileRequest()).NotTo(BeEmpty(), "base was not asked to run again")
		g.Expect(base.Status.LastUpdate.LastResyncTime.Time).To(BeTemporally(">", first))
	})
	s.waitReady("top")
	s.g.Expect(s.updates("base")).To(HaveLen(2))
	top := s.updates("top")
	s.g.Expect(top).To(HaveLen(1))
	s.g.Expect(top[0].Status.StartTime.Time).NotTo(BeTemporally("<", base.Status.LastUpdate.LastResyncTime.Truncate(time.Second)))
}
