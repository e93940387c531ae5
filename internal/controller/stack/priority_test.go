package stack

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// A restarted manager's initial list delivers a fleet at rest and, among it, Stacks with
// work due: those are served first, by controller-runtime's own priority queue, whatever
// their place in the list.
func TestChangedFirst_Create_DueStacksServedBeforeTheInitialList(t *testing.T) {
	at := func(name string, mutate func(*pulumiv1.Stack)) *pulumiv1.Stack {
		st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Generation: 3}}
		st.Status.ObservedGeneration = 3
		if mutate != nil {
			mutate(st)
		}
		return st
	}
	var list []*pulumiv1.Stack
	for i := range 60 {
		list = append(list, at(fmt.Sprintf("rest-%02d", i), nil))
	}
	due := []*pulumiv1.Stack{
		at("changed", func(st *pulumiv1.Stack) { st.Generation = 4 }),
		at("new", func(st *pulumiv1.Stack) { st.Generation, st.Status.ObservedGeneration = 1, 0 }),
		at("requested", func(st *pulumiv1.Stack) {
			st.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "now"}
		}),
		at("deleted", func(st *pulumiv1.Stack) { st.DeletionTimestamp = &metav1.Time{Time: time.Now()} }),
	}
	// Spread through the list, the last one last.
	list = slices.Insert(list, 50, due[0])
	list = slices.Insert(list, 20, due[1])
	list = slices.Insert(list, 40, due[2])
	list = append(list, due[3])

	q := priorityqueue.New[reconcile.Request]("stack")
	defer q.ShutDown()
	// What the builder's For gives the controller.
	forHandler := handler.WithLowPriorityWhenUnchanged(&handler.EnqueueRequestForObject{})
	for _, st := range list {
		e := event.CreateEvent{Object: st, IsInInitialList: true}
		forHandler.Create(t.Context(), e, q)
		changedFirst{}.Create(t.Context(), e, q)
	}
	NewWithT(t).Eventually(q.Len).Should(Equal(len(list)))

	var first []string
	for range due {
		req, priority, _ := q.GetWithPriority()
		first = append(first, fmt.Sprintf("%s@%d", req.Name, priority))
		q.Done(req)
	}
	want := []string{"new@0", "requested@0", "changed@0", "deleted@0"}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("served first (-want +got):\n%s", diff)
	}
	req, priority, _ := q.GetWithPriority()
	if priority != handler.LowPriority || req.Name != "rest-00" {
		t.Errorf("then %s at priority %d, want rest-00 at %d", req.Name, priority, handler.LowPriority)
	}
}

// Outside the initial list, and for a Stack with nothing due, changedFirst adds nothing:
// the For handler's own priority stands.
func TestChangedFirst_Create_OnlyTheInitialListsDueStacks(t *testing.T) {
	changed := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "changed", Generation: 2}}
	rest := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "rest", Generation: 2}}
	rest.Status.ObservedGeneration = 2
	for _, tc := range []struct {
		name   string
		e      event.CreateEvent
		queued int
	}{
		{"due, initial list", event.CreateEvent{Object: changed, IsInInitialList: true}, 1},
		{"due, created later", event.CreateEvent{Object: changed}, 0},
		{"at rest, initial list", event.CreateEvent{Object: rest, IsInInitialList: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("stack")
			defer q.ShutDown()
			changedFirst{}.Create(t.Context(), tc.e, q)
			NewWithT(t).Consistently(q.Len).WithTimeout(100 * time.Millisecond).Should(Equal(tc.queued))
		})
	}
}

// A Stack at rest comes back for its resync at low priority, behind any change; one with
// work under way comes back at normal priority, whichever priority brought it.
func TestStackReconciler_Reconcile_OnlyRestingStacksResyncAtLowPriority(t *testing.T) {
	h := newStackSim(t)
	h.st.Spec.ResyncFrequencySeconds = 60
	h.deploy()
	var got []string
	record := func(when string) {
		got = append(got, fmt.Sprintf("%s: %v", when, ptr.Deref(h.result.Priority, 99)))
	}
	h.reconcile()
	record("at rest")
	h.edit(func(spec *pulumiv1.StackSpec) { spec.Stack = "prod" })
	h.reconcile()
	record("update started")
	h.run()
	record("update running")
	h.succeed()
	record("deployed")
	want := []string{"at rest: -100", "update started: 0", "update running: 0", "deployed: -100"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requeue priorities (-want +got):\n%s", diff)
	}
}
