package rollout

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// SetupWithManager registers the controller. A rollout moves when its spec or annotations
// change, when one of its Stacks changes (its status says how far it got), when its gate
// Job finishes, and, for a rollout of template revisions, when its template serves a new
// revision.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("stackrollout").
		WithOptions(opts).
		For(&v1alpha1.StackRollout{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&batchv1.Job{}).
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOf))
	if r.Templates {
		b = b.Watches(&v1alpha1.StackTemplate{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfTemplate), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, ok1 := e.ObjectOld.(*v1alpha1.StackTemplate)
				n, ok2 := e.ObjectNew.(*v1alpha1.StackTemplate)
				return ok1 && ok2 && o.Status.Revision != n.Status.Revision
			},
		}))
	}
	return b.Complete(r)
}

// rolloutsOf maps a Stack to the rollouts of its namespace that select it or list it in a
// wave (a relabelled Stack leaves its wave's count).
func (r *Reconciler) rolloutsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.StackRolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list StackRollouts", "namespace", o.GetNamespace())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		ro := &list.Items[i]
		if ro.Selects(o.GetLabels()) || ro.WaveOf(o.GetName()) != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ro)})
		}
	}
	return out
}

// rolloutsOfTemplate maps a StackTemplate to the rollouts of its revisions, in its platform
// namespace.
func (r *Reconciler) rolloutsOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	t, ok := o.(*v1alpha1.StackTemplate)
	if !ok {
		return nil
	}
	var list v1alpha1.StackRolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(t.Spec.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list StackRollouts", "namespace", t.Spec.Namespace)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if ro := &list.Items[i]; ro.RollsOutTemplate(t.Name) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ro)})
		}
	}
	return out
}
