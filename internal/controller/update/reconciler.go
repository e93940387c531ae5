package update

import (
	"cmp"
	"context"
	"errors"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/controller/predicates"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/executor"
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
	// QueueReportAfter is how long a submitted Update waits before its status says where
	// it stands in the executor's queue; 0 means 15 s.
	QueueReportAfter time.Duration
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
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.StackName}, stack); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := patch.New(r.Client, u, "Update", fieldManager)
	runner, gone := u.Status.Runner, false
	defer func() {
		retErr = errors.Join(retErr, r.writeStatus(ctx, p, u, runner, gone))
		ctrl.LoggerFrom(ctx).Info("Reconciled Update", "duration", time.Since(start).Round(time.Millisecond), "phase", u.Status.Phase, "requeueAfter", result.RequeueAfter)
	}()
	switch u.Status.Phase {
	case "", v1alpha1.UpdatePhasePending:
		return r.submit(ctx, u, stack), nil
	case v1alpha1.UpdatePhaseRunning:
		v := r.Executor.Check(ctx, u)
		gone = v.Apply(u, metav1.NewTime(r.now()))
		return ctrl.Result{RequeueAfter: v.RecheckAfter}, nil
	}
	return ctrl.Result{}, nil
}

// writeStatus writes u's status and, once an Update whose runner is gone is recorded
// failed, counts it. The optimistic lock loses to a runner that recorded its result
// meanwhile; the retry then finds the Update finished.
func (r *Reconciler) writeStatus(ctx context.Context, p *patch.Patcher, u *v1alpha1.Update, runner string, gone bool) error {
	if err := p.Status(ctx, u, patch.WithOptimisticLock()); err != nil || !gone {
		return err
	}
	crashpoint.Hit(crashpoint.UpdateRunnerLostMarked)
	reason := u.CompleteReason()
	metrics.ObserveUpdate(u.Namespace, string(u.Spec.Type), string(u.Status.Result), reason, runDuration(u))
	if v1alpha1.RunnerLostReason(reason) {
		metrics.ObserveRunnerLost(u.Namespace, reason)
	}
	ctrl.LoggerFrom(ctx).Info("Marked update failed: its runner is gone", "runner", runner, "message", u.Status.Message)
	return nil
}

// submit hands a Pending Update its Stack decided to the executor. Only the Stack
// controller decides what runs: an Update anyone could create by hand would let them
// destroy a stack they cannot edit. One the Stack is about to record is looked at again
// when it does (the Stack watch).
func (r *Reconciler) submit(ctx context.Context, u *v1alpha1.Update, stack *pulumiv1.Stack) ctrl.Result {
	if !decidedByItsStack(u, stack) {
		ctrl.LoggerFrom(ctx).V(1).Info("Ignoring Update not created by its Stack", "stack", u.Spec.StackName)
		return ctrl.Result{}
	}
	r.Executor.Submit(u)
	return r.reportQueue(u)
}

// Most Updates start within seconds, and each report of a queue position is a write: an
// Update's status says where it stands only once it has waited QueueReportAfter, and
// again every queueReportEvery while it waits (when that changed).
const (
	defaultQueueReportAfter = 15 * time.Second
	queueReportEvery        = 30 * time.Second
)

// reportQueue records where a submitted Update stands in its executor's queue
// (setQueue), and when to look again.
func (r *Reconciler) reportQueue(u *v1alpha1.Update) ctrl.Result {
	p, ok := r.Executor.(executor.Positioner)
	if !ok {
		return ctrl.Result{}
	}
	pos, queued := p.Position(client.ObjectKeyFromObject(u))
	if !queued {
		return ctrl.Result{}
	}
	after := cmp.Or(r.QueueReportAfter, defaultQueueReportAfter)
	if waited := r.now().Sub(u.CreationTimestamp.Time); waited < after {
		return ctrl.Result{RequeueAfter: after - waited}
	}
	setQueue(u, pos)
	return ctrl.Result{RequeueAfter: queueReportEvery}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// decidedByItsStack reports whether u is the Update its Stack decided to run: its
// controller is that Stack (by UID, not only by name, which anyone could write), and the
// Stack recorded it as its update in flight before creating it.
func decidedByItsStack(u *v1alpha1.Update, stack *pulumiv1.Stack) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.Kind == "Stack" && ref.APIVersion == pulumiv1.GroupVersion.String() && ref.Name == u.Spec.StackName &&
		ref.UID == stack.UID && stack.Status.CurrentUpdate != nil && stack.Status.CurrentUpdate.Name == u.Name
}

// SetupWithManager registers the controller. Only creations and phase changes matter.
// currentUpdateName is the name of the Update a Stack has in flight, or "".
func currentUpdateName(o client.Object) string {
	if st, ok := o.(*pulumiv1.Stack); ok && st.Status.CurrentUpdate != nil {
		return st.Status.CurrentUpdate.Name
	}
	return ""
}

// currentUpdate maps a Stack to the Update it has in flight.
func currentUpdate(_ context.Context, o client.Object) []reconcile.Request {
	name := currentUpdateName(o)
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("update").
		WithOptions(opts).
		For(&v1alpha1.Update{}, builder.WithPredicates(predicates.UpdatePhaseChanged{}, predicate.Funcs{
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		}))
	// The Update controller may see a new Update before its cache sees the Stack's
	// record of it: the Stack's recording it brings the Update back.
	b = b.Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(currentUpdate), builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return currentUpdateName(e.Object) != "" },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return currentUpdateName(e.ObjectNew) != currentUpdateName(e.ObjectOld) && currentUpdateName(e.ObjectNew) != ""
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}))
	if r.RunnerJobs {
		b = b.Owns(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedBy
		})))
	}
	return b.Complete(r)
}
