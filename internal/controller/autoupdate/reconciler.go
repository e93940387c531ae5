package autoupdate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// FieldManager identifies the writes to requests, the Stack controller's included.
const FieldManager = "stackwright-autoupdate-controller"

// EventRefused is the reason of the event on a request that cannot run.
const EventRefused = "Refused"

// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates/status,verbs=get;update;patch

// Reconciler refuses the requests no Stack can run, says that the others wait for their
// Stack, and deletes completed ones after their spec.ttlAfterCompleted.
type Reconciler struct {
	Client client.Client
	// APIReader confirms that a Stack the cache lacks is missing (it may just have been
	// created, in the same apply as the request).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, key ctrl.Request) (ctrl.Result, error) {
	req := &autov1alpha1.Update{}
	if err := r.Client.Get(ctx, key.NamespacedName, req); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if Completed(req) {
		return r.expire(ctx, req)
	}
	if c := apimeta.FindStatusCondition(req.Status.Conditions, autov1alpha1.ConditionProgressing); c != nil && c.Reason == ReasonRunning {
		// Its Stack runs it, and records how it ends.
		return ctrl.Result{}, nil
	}
	stack, err := r.stack(ctx, req)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := patch.New(r.Client, req, "Update", FieldManager)
	if reason, msg := Refusal(req, stack); reason != "" {
		MarkRefused(req, reason, msg, r.now())
		if err := p.Status(ctx, req, patch.WithOptimisticLock()); err != nil {
			return ctrl.Result{}, err
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(req, nil, corev1.EventTypeWarning, EventRefused, "Refuse", "%s", msg)
		}
		ctrl.LoggerFrom(ctx).Info("Refused one-off operation", "reason", reason, "message", msg)
		return r.expire(ctx, req)
	}
	if apimeta.FindStatusCondition(req.Status.Conditions, autov1alpha1.ConditionProgressing) != nil {
		return ctrl.Result{}, nil
	}
	MarkQueued(req, fmt.Sprintf("waiting for Stack %s to run it: it runs once the Stack has no update in flight, is not suspended, and its spec, source and inputs resolve", stack.Name))
	return ctrl.Result{}, p.Status(ctx, req, patch.WithOptimisticLock())
}

// stack returns the Stack req names, nil if there is none.
func (r *Reconciler) stack(ctx context.Context, req *autov1alpha1.Update) (*pulumiv1.Stack, error) {
	if req.Spec.WorkspaceName == "" {
		return nil, nil
	}
	stack := &pulumiv1.Stack{}
	key := client.ObjectKey{Namespace: req.Namespace, Name: req.Spec.WorkspaceName}
	err := r.Client.Get(ctx, key, stack)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, key, stack)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get Stack %s: %w", key.Name, err)
	}
	return stack, nil
}

// expire deletes a completed request once its spec.ttlAfterCompleted has passed since it
// ended, and asks to be called back then if it has not.
func (r *Reconciler) expire(ctx context.Context, req *autov1alpha1.Update) (ctrl.Result, error) {
	ttl := req.Spec.TtlAfterCompleted
	if ttl == nil || req.Status.EndTime.IsZero() {
		return ctrl.Result{}, nil
	}
	if wait := req.Status.EndTime.Add(ttl.Duration).Sub(r.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.Client.Delete(ctx, req, client.Preconditions{UID: &req.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to delete Update %s: %w", req.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted completed one-off operation after its ttlAfterCompleted", "ttl", ttl.Duration)
	return ctrl.Result{}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller. A Stack's deletion brings back the requests
// still waiting for it, which it will never run.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("autoupdate").
		WithOptions(opts).
		For(&autov1alpha1.Update{}).
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(r.waitingFor), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
}

// waitingFor maps a Stack to the requests that name it and have not completed.
func (r *Reconciler) waitingFor(ctx context.Context, o client.Object) []reconcile.Request {
	var list autov1alpha1.UpdateList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list one-off operations of a Stack", "stack", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if req := &list.Items[i]; req.Spec.WorkspaceName == o.GetName() && !Completed(req) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(req)})
		}
	}
	return reqs
}
