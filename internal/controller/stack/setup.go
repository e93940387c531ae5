package stack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/predicates"
	"github.com/stackwright/stackwright/internal/source/flux"
)

// SetupWithManager registers the indexes and watches the Stack controller needs.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := registerIndexes(ctx, mgr.GetFieldIndexer(), r.Options.OneOffs); err != nil {
		return err
	}
	// Only the Flux kinds installed now are watched: a manager must start where Flux is
	// absent. Stacks on a kind installed later still converge, by faultRequeue polling,
	// and get their watch when the manager restarts.
	fluxKinds, err := flux.Watchable(mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("failed to discover Flux source kinds: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("stack").
		WithOptions(opts).
		For(&pulumiv1.Stack{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicates.DeletionStarted{}))).
		// Changed desired states before the resync of a restarted manager's fleet.
		Watches(&pulumiv1.Stack{}, changedFirst{}).
		Owns(&v1alpha1.Update{}, builder.WithPredicates(predicates.UpdatePhaseChanged{})).
		// A Program's new artifact (or its failure to render) is what its Stacks wait for.
		Watches(&pulumiv1.Program{}, r.enqueueReferrers(IndexProgramRef), builder.WithPredicates(programRendered{})).
		// Secrets' metadata only: a change of resourceVersion is all a referrer needs to
		// hear, and caching values would hold every Secret of every watched namespace.
		WatchesMetadata(&corev1.Secret{}, r.enqueueReferrers(IndexSecretRefs), builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, r.enqueueReferrers(IndexConfigMapRefs), builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// A prerequisite that succeeds (or appears, or changes its own prerequisites)
		// releases the Stacks waiting on it at once, not at their next requeue.
		Watches(&pulumiv1.Stack{}, r.enqueueReferrers(IndexPrerequisites), builder.WithPredicates(prerequisiteChanged{})).
		// A new, changed or deleted policy may release a change it (or its absence) held.
		Watches(&v1alpha1.Policy{}, r.enqueueGated(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ClusterPolicy{}, r.enqueueGated(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A rollout that opens a wave, starts, completes or aborts changes the revision its
		// Stacks may deploy.
		Watches(&v1alpha1.StackRollout{}, r.enqueueRolloutStacks())
	for _, gvk := range fluxKinds {
		src := &unstructured.Unstructured{}
		src.SetGroupVersionKind(gvk)
		b = b.Watches(src, r.enqueueReferrersBy(IndexFluxSourceRef, flux.ObjectIndexKey), builder.WithPredicates(flux.ArtifactChanged{}))
	}
	if r.Options.OneOffs {
		// A new request is the Stack's to run.
		b = b.Watches(&autov1alpha1.Update{}, handler.EnqueueRequestsFromMapFunc(requestedStack), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return true },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}))
	}
	if r.Requests != nil {
		b = b.WatchesRawSource(source.Channel(r.Requests, &handler.EnqueueRequestForObject{}))
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	return r.setupInputProtection(mgr, opts)
}

// prerequisiteChanged passes the events of a Stack that its dependents act on: creation,
// deletion, a new last update (its state or finish time), a new spec (its own
// prerequisites) and a change of Stalled.
type prerequisiteChanged struct{ predicate.Funcs }

func (prerequisiteChanged) Update(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*pulumiv1.Stack)
	n, okNew := e.ObjectNew.(*pulumiv1.Stack)
	if !okOld || !okNew {
		return true
	}
	return o.Generation != n.Generation || isStalled(o) != isStalled(n) ||
		!equality.Semantic.DeepEqual(o.Status.LastUpdate, n.Status.LastUpdate)
}

// programRendered passes the events of a Program that its Stacks act on: creation,
// deletion, and a status that settles a generation (a new artifact, or a render failure).
type programRendered struct{ predicate.Funcs }

func (programRendered) Update(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*pulumiv1.Program)
	n, okNew := e.ObjectNew.(*pulumiv1.Program)
	if !okOld || !okNew {
		return true
	}
	return o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
		!equality.Semantic.DeepEqual(o.Status.Artifact, n.Status.Artifact) ||
		!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions)
}

// requestedStack maps a request to the Stack it names.
func requestedStack(_ context.Context, o client.Object) []reconcile.Request {
	name := o.(*autov1alpha1.Update).Spec.WorkspaceName
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}
