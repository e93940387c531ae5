package update

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
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
		v := r.Executor.Check(ctx, u)
		if v.Lost != "" || v.NotStarted != "" {
			return ctrl.Result{}, r.markRunnerGone(ctx, u, v)
		}
		return ctrl.Result{RequeueAfter: v.RecheckAfter}, nil
	}
	return ctrl.Result{}, nil
}

// ownedByItsStack reports whether u's controller is the Stack it names.
func ownedByItsStack(u *v1alpha1.Update) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.Kind == "Stack" && ref.APIVersion == pulumiv1.GroupVersion.String() && ref.Name == u.Spec.StackName
}

// markRunnerGone fails an Update whose runner is gone (its engine process died with it)
// or never started, as the verdict says. Nothing runs any more; the Stack controller
// retries with a new Update. The result is Failed either way, so that runners killed again
// and again (out of memory, evicted) count in stackwright_updates_total{result="failed"}
// like any failed run; the reason says which: RunnerLost, or TransientFailure for a runner
// that never started (no engine ran, so there is no run for the next up to look for in the
// backend's history).
func (r *Reconciler) markRunnerGone(ctx context.Context, u *v1alpha1.Update, v executor.Verdict) error {
	p := patch.New(r.Client, u, "Update", fieldManager)
	now := metav1.Now()
	runner := u.Status.Runner
	var msg string
	if v.Lost != "" {
		msg = fmt.Sprintf("runner %s lost: %s; it will be retried", runner, v.Lost)
		u.MarkRunnerLost(v1alpha1.UpdateResultFailed, msg, now)
	} else {
		msg = fmt.Sprintf("runner %s did not start: %s; it will be retried", runner, v.NotStarted)
		u.Status.Phase, u.Status.Result, u.Status.Message, u.Status.EndTime = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, msg, &now
		u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTransientFailure, Message: msg})
	}
	// The optimistic lock loses to a runner that finished in the meantime.
	if err := p.Status(ctx, u, patch.WithOptimisticLock()); err != nil {
		return fmt.Errorf("failed to mark Update %s failed: %w", u.Name, err)
	}
	crashpoint.Hit(crashpoint.UpdateRunnerLostMarked)
	var took time.Duration
	if u.Status.StartTime != nil {
		took = now.Sub(u.Status.StartTime.Time)
	}
	metrics.ObserveUpdate(u.Namespace, string(u.Spec.Type), string(u.Status.Result), took)
	ctrl.LoggerFrom(ctx).Info("Marked update failed: its runner is gone", "update", u.Name, "runner", runner, "message", msg)
	return nil
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
