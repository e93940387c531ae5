package stack

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// The Stack controller's queue is controller-runtime's priority queue. It serves the
// initial list of a starting manager at low priority, and whatever an event brings at
// normal priority; a Stack at rest also comes back for its periodic resync at low
// priority (markUpToDate). So a change is served before the resyncs of a fleet, except
// one the initial list itself delivers: a Stack changed while the manager was down, or
// in the seconds before its caches were filled. changedFirst raises those.

// changedFirst queues, at normal priority, a Stack the initial list delivers with work
// due (see workDue); the For handler queues every Stack of that list at low priority, and
// the queue keeps the higher of the two.
type changedFirst struct{}

var _ handler.EventHandler = changedFirst{}

func (changedFirst) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	st, ok := e.Object.(*pulumiv1.Stack)
	if !ok || !e.IsInInitialList || !workDue(st) {
		return
	}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(0)}, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(st)})
}

func (changedFirst) Update(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (changedFirst) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (changedFirst) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// workDue says, from the Stack alone, that a reconcile has work to do: a spec not yet
// observed (a new or changed desired state), a reconcile request not yet handled, or a
// deletion. What it cannot see (a new source revision, a changed input) waits for its
// turn, as it would have without a restart.
func workDue(st *pulumiv1.Stack) bool {
	return st.Generation != st.Status.ObservedGeneration || st.ReconcileRequested() || !st.DeletionTimestamp.IsZero()
}
