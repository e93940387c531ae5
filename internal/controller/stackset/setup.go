package stackset

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// SetupWithManager registers the controller; it watches the Stacks it owns, and the
// requests of a forge's webhook.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("stackset").
		WithOptions(opts).
		For(&v1alpha1.StackSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&pulumiv1.Stack{})
	if r.Requests != nil {
		b = b.WatchesRawSource(source.Channel(r.Requests, &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}
