package update

import (
	"context"
	"errors"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/stackwright/stackwright/internal/executor/job"
	"github.com/stackwright/stackwright/internal/metrics"
)

// fieldManager identifies the Update controller's writes.
const fieldManager = "stackwright-update-controller"

// Reconciler reconciles Updates: it hands Pending ones to the executor, and marks failed,
// once and here only, a Running one whose runner the executor finds gone or never started.
type Reconciler struct {
	Client   client.Client
	Executor executor.Executor
	// RunnerJobs watches the runner Jobs (the Job executor), so that a runner's end is
	// looked at when it happens.
	RunnerJobs bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	u := &v1alpha1.Update{}
	if err := r.Client.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A Stack this manager does not see is another shard's (--watch-label-selector): its
	// Updates are that shard's to run and to watch.
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, &pulumiv1.Stack{}); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := patch.New(r.Client, u, "Update", fieldManager)
	runner, gone := u.Status.Runner, false
	defer func() {
		log := ctrl.LoggerFrom(ctx)
		// The optimistic lock loses to a runner that recorded its result meanwhile; the
		// retry then finds the Update finished.
		if err := p.Status(ctx, u, patch.WithOptimisticLock()); err != nil {
			retErr = errors.Join(retErr, err)
		} else if gone {
			crashpoint.Hit(crashpoint.UpdateRunnerLostMarked)
			metrics.ObserveUpdate(u.Namespace, string(u.Spec.Type), string(u.Status.Result), runDuration(u))
			if c := apimeta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionComplete); c != nil && v1alpha1.RunnerLostReason(c.Reason) {
				metrics.ObserveRunnerLost(u.Namespace, c.Reason)
			}
			log.Info("Marked update failed: its runner is gone", "runner", runner, "message", u.Status.Message)
		}
		log.Info("Reconciled Update", "duration", time.Since(start).Round(time.Millisecond), "phase", u.Status.Phase, "requeueAfter", result.RequeueAfter)
	}()
	switch u.Status.Phase {
	case "", v1alpha1.UpdatePhasePending:
		if !ownedByItsStack(u) {
			// Only the Stack controller decides what runs: an Update anyone could create
			// by hand would let them destroy a stack they cannot edit.
			ctrl.LoggerFrom(ctx).V(1).Info("Ignoring Update not created by its Stack", "stack", u.Spec.StackName)
			return ctrl.Result{}, nil
		}
		r.Executor.Submit(u)
	case v1alpha1.UpdatePhaseRunning:
		v := r.Executor.Check(ctx, u)
		gone = v.Apply(u, metav1.NewTime(r.now()))
		return ctrl.Result{RequeueAfter: v.RecheckAfter}, nil
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// ownedByItsStack reports whether u's controller is the Stack it names.
func ownedByItsStack(u *v1alpha1.Update) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.Kind == "Stack" && ref.APIVersion == pulumiv1.GroupVersion.String() && ref.Name == u.Spec.StackName
}

// SetupWithManager registers the controller. Only creations and phase changes matter.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("update").
		WithOptions(opts).
		For(&v1alpha1.Update{}, builder.WithPredicates(predicates.UpdatePhaseChanged{}, predicate.Funcs{
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		}))
	if r.RunnerJobs {
		b = b.Owns(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[job.LabelManagedBy] == job.ManagedBy
		})))
	}
	return b.Complete(r)
}
