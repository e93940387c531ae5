package predicates

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// UpdatePhaseChanged passes Update events that change what its readers act on: creation,
// deletion and a new phase, but not each progress write of the runner (log tail, times).
type UpdatePhaseChanged struct{ predicate.Funcs }

// Update implements predicate.Predicate.
func (UpdatePhaseChanged) Update(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*v1alpha1.Update)
	n, okNew := e.ObjectNew.(*v1alpha1.Update)
	return !okOld || !okNew || o.Status.Phase != n.Status.Phase
}

// DeletionStarted passes the update that sets an object's deletionTimestamp.
type DeletionStarted struct{ predicate.Funcs }

// Update implements predicate.Predicate.
func (DeletionStarted) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}
