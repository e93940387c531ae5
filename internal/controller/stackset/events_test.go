package stackset_test

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stackset"
)

// Every event the controller emits announces a status that a reader can already find: the
// recorder reads the set from the API server as it receives each event and checks that
// the status shows what the event says (see announced). The scenario makes the controller
// emit every reason it has; each reason is checked at least once.
func TestReconciler_Events_FollowTheStatusTheyAnnounce(t *testing.T) {
	t.Parallel()
	s := newScenario(t)

	// An Orphan set creates its Stacks, holds removals beyond its bound, and orphans
	// within it.
	envs, _, _ := s.heldSet()
	s.update(envs, func(spec *v1alpha1.StackSetSpec) { spec.Generator.List.Elements = listElements("dev", "qa", "stage") })
	s.waitReady(envs, "dev", "qa", "stage")

	// A Destroy set deletes the Stack of an element that goes, and the rest when it is
	// deleted, waiting for them.
	review := s.listSet("review", "a", "b", "c")
	review.Spec.DeletionPolicy = v1alpha1.StackSetDestroy
	s.Create(review)
	stacks := s.waitReady(review, "a", "b", "c")
	s.update(review, func(spec *v1alpha1.StackSetSpec) { spec.Generator.List.Elements = listElements("a", "b") })
	s.waitReady(review, "a", "b")
	s.hold(stacks["a"].Name)
	s.g.Expect(env.Client.Delete(s.t.Context(), review)).To(Succeed())
	s.Eventually(func(g Gomega) {
		c := apimeta.FindStatusCondition(s.set(g, review).Status.Conditions, pulumiv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.ReasonDestroyInProgress))
	})
	s.release(stacks["a"].Name)
	s.WaitGone(review)

	all := []string{stackset.EventStackCreated, stackset.EventRemovalsHeld, stackset.EventStackOrphaned, stackset.EventStackDeleted}
	var seen []string
	for _, e := range append(recorder.Of(s.Namespace, "envs"), recorder.Of(s.Namespace, "review")...) {
		seen = append(seen, e.Reason)
		if !slices.Contains(all, e.Reason) {
			t.Errorf("event %s is not in the list of reasons this test checks", e.Reason)
		}
	}
	for _, r := range all {
		s.g.Expect(seen).To(ContainElement(r), "every reason is emitted and checked")
	}
	s.g.Expect(recorder.Unwritten(s.Namespace)).To(BeEmpty(), "events emitted before the status they announce was written")
}

// Held removals are announced once per set of Stacks held: reconciles that find the same
// Stacks held announce nothing, a change of what is held is announced again.
func TestReconciler_Events_RemovalsHeldOncePerHold(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	set, stacks, _ := s.heldSet()

	// Two more reconciles, each seen in the status: the one Stack the set still wants
	// falls out of Ready, and comes back.
	dev := stacks["dev"].Name
	s.setReady(dev, metav1.ConditionFalse)
	s.Eventually(func(g Gomega) { g.Expect(s.set(g, set).Status.Ready).To(BeZero()) })
	s.ready(dev)
	s.Eventually(func(g Gomega) { g.Expect(s.set(g, set).Status.Ready).To(BeEquivalentTo(1)) })
	if n := recorder.Count(s.Namespace, set.Name, stackset.EventRemovalsHeld); n != 1 {
		t.Fatalf("%d RemovalsHeld events while the same Stacks were held; want 1", n)
	}

	// qa comes back: stage and prod are still more than the bound allows.
	s.update(set, func(spec *v1alpha1.StackSetSpec) { spec.Generator.List.Elements = listElements("dev", "qa") })
	s.Eventually(func(g Gomega) {
		c := apimeta.FindStatusCondition(s.set(g, set).Status.Conditions, pulumiv1.ConditionStalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(HavePrefix("2 of the set's 4 Stacks lost their element at once"))
		g.Expect(recorder.Count(s.Namespace, set.Name, stackset.EventRemovalsHeld)).To(Equal(2), "a new hold is announced")
	})
}
