package update

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/controller/predicates"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/executor"
)

// fieldManager identifies the Update controller's writes.
const fieldManager = "stackwright-update-controller"

// Reconciler reconciles Updates.
type Reconciler struct {
	Client   client.Client
	Executor executor.Executor
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &v1alpha1.Update{}
	if err := r.Client.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A Stack this manager does not see is another shard's (--watch-label-selector): its
	// Updates are that shard's to run and to watch.
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, &pulumiv1.Stack{}); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch u.Status.Phase {
	case "", v1alpha1.UpdatePhasePending:
		if !ownedByItsStack(u) {
			// Only the Stack controller decides what runs: an Update anyone could create
			// by hand would let them destroy a stack they cannot edit.
			ctrl.LoggerFrom(ctx).V(1).Info("Ignoring Update not created by its Stack", "update", u.Name, "stack", u.Spec.StackName)
			return ctrl.Result{}, nil
		}
		r.Executor.Submit(u)
	case v1alpha1.UpdatePhaseRunning:
		if r.Executor.Owns(u.Status.Runner) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.markLost(ctx, u)
	}
	return ctrl.Result{}, nil
}

// ownedByItsStack reports whether u's controller is the Stack it names.
func ownedByItsStack(u *v1alpha1.Update) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.Kind == "Stack" && ref.APIVersion == pulumiv1.GroupVersion.String() && ref.Name == u.Spec.StackName
}

// markLost fails an Update whose runner is gone. The engine process died with it, so
// nothing is running; the Stack controller retries with a new Update.
func (r *Reconciler) markLost(ctx context.Context, u *v1alpha1.Update) error {
	p := patch.New(r.Client, u, "Update", fieldManager)
	now := metav1.Now()
	runner := u.Status.Runner
	msg := fmt.Sprintf("runner %s stopped while the update was running (the manager restarted); it will be retried", runner)
	u.MarkRunnerLost(v1alpha1.UpdateResultCancelled, msg, now)
	// The optimistic lock loses to a runner that finished in the meantime.
	if err := p.Status(ctx, u, patch.WithOptimisticLock()); err != nil {
		return fmt.Errorf("failed to mark Update %s lost: %w", u.Name, err)
	}
	crashpoint.Hit(crashpoint.UpdateRunnerLostMarked)
	ctrl.LoggerFrom(ctx).Info("Marked update lost", "update", u.Name, "runner", runner)
	return nil
}

// SetupWithManager registers the controller. Only creations and phase changes matter.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("update").
		WithOptions(opts).
		For(&v1alpha1.Update{}, builder.WithPredicates(predicates.UpdatePhaseChanged{}, predicate.Funcs{
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(r)
}
