package stack

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/metrics"
	"github.com/stackwright/stackwright/internal/source"
)

// Event reasons. Events are emitted on transitions only.
const (
	EventUpdateStarted   = "UpdateStarted"
	EventUpdateSucceeded = "UpdateSucceeded"
	EventUpdateFailed    = "UpdateFailed"
	// EventPendingOperations: an up warned of operations an interrupted update left
	// pending; a person must check them (Pulumi does not clear pending creates by itself).
	EventPendingOperations = "PendingOperations"
	EventStalled           = "Stalled"
	EventDestroyed         = "Destroyed"
	EventResourcesKept     = "ResourcesKept"
	EventOutputsExported   = "OutputsExported"
	EventFieldsIgnored     = "FieldsIgnored"
)

// eventAction is the action of every event the Stack controller emits.
const eventAction = "Reconcile"

// fieldManager identifies the Stack controller's writes.
const fieldManager = "stackwright-stack-controller"

// Options are the manager-wide settings of the Stack controller.
type Options struct {
	// MaxBackoff caps the retry delay when a Stack sets no retryMaxBackoffDurationSeconds.
	MaxBackoff time.Duration
	// RetryBase is the first retry delay; zero means the documented 10s.
	RetryBase time.Duration
	// StallAfter is how many consecutive permanent failures stall a Stack.
	StallAfter int32
	// UpdateHistory is how many finished Updates are kept per Stack.
	UpdateHistory int
	// UpdateMaxAge is how long a finished Update is kept (0: no limit); the ones the
	// status names are kept whatever their age.
	UpdateMaxAge time.Duration
	// Inputs configures how config and environment references are resolved.
	Inputs inputs.Options
	// RunnerPods is set when Updates run in runner Pods (the Job executor). Only there can
	// the API server's identity tokens be projected; elsewhere a Stack asking for them is
	// stalled rather than run without them.
	RunnerPods bool
	// DetachedTenantImages is set when the destroy of a Stack in a terminating namespace
	// may run the Stack's own workspace image in the manager's namespace; otherwise a
	// Stack whose program is baked into its image is released with its resources kept.
	DetachedTenantImages bool
	// OneOffs runs the one-off operations requested of a Stack as auto.pulumi.com
	// Updates (PKO's kind): set when that kind is served.
	OneOffs bool
	// Runner, when set, is the runner of this manager's process (the local executor's),
	// which every Update is bound to as it is created (spec.runner): it runs it without
	// first writing a claim.
	Runner string
}

// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks/finalizers,verbs=update
// +kubebuilder:rbac:groups=stackwright.dev,resources=updates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=stackwright.dev,resources=stackrollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates,verbs=get;list;watch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch

// Reconciler reconciles Stacks: it resolves their source and inputs, decides whether an
// engine operation is due, and records it as an Update for an executor to run. It never
// runs the engine itself.
type Reconciler struct {
	Client client.Client
	// APIReader bypasses the cache, to tell "not created" from "not in the cache yet"
	// before deciding that an Update was lost.
	APIReader client.Reader
	Sources   source.Resolver
	// Detached runs destroys that cannot be recorded as Updates (terminating namespaces).
	Detached executor.Detacher
	Recorder events.EventRecorder
	// Requests carries reconcile requests from outside the cluster's objects (pushes
	// announced by git hosts' webhooks); nil means none.
	Requests <-chan event.GenericEvent
	// Store is the artifact store, to tell that an artifact a rollout holds a Stack at is
	// gone; nil skips the check.
	Store   ArtifactStore
	Options Options
	// Now is the clock; tests replace it.
	Now func() time.Time

	// starts are the Updates whose start is yet to be announced (started.go).
	starts startAnnouncements
}

// Reconcile implements reconcile.Reconciler: get, defer the status patch, handle deletion,
// ensure the finalizer, then run the phases of the normal path.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, req.NamespacedName, stack); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetStack(req.Namespace, req.Name)
			r.starts.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{stack: stack, patcher: patch.New(r.Client, stack, "Stack", fieldManager), events: kit.NewEvents(r.Recorder, eventAction)}
	stalledBefore := stalledReason(stack)
	defer func() {
		finalizeStatus(stack, s.upToDate)
		err := s.patcher.Status(ctx, stack)
		if err != nil && !errors.Is(retErr, err) {
			retErr = errors.Join(retErr, err)
		}
		// Once the status they announce is recorded, so that a failed write is announced
		// by the retry, never twice.
		s.events.Flush(err)
		if err == nil {
			r.announceStall(stack, stalledBefore)
		}
		logEnd(ctx, stack, start, result, retErr)
	}()

	if !stack.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(stack, pulumiv1.StackFinalizer) {
		// Persisted before anything else happens, so no resource can exist that a
		// deletion would not destroy.
		if err := s.patcher.Finalizers(ctx, stack); err != nil {
			return ctrl.Result{}, err
		}
		crashpoint.Hit(crashpoint.StackFinalizerAdded)
	}
	return r.reconcileNormal(ctx, s)
}

// reconcileNormal drives the Stack toward its spec's operation.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.op = operation(&s.stack.Spec)
	return s.run(ctx,
		// Whatever else happens, a namespace deletion must find the inputs the destroy needs.
		r.protectInputs,
		// An Update in flight is observed even when suspended: its result must not be lost.
		r.observeUpdate,
		r.checkSuspended,
		r.checkExpiry,
		r.reviewSpec,
		r.checkExecutor,
		r.resolveSource,
		r.holdForRollout,
		r.previewForTemplateRollout,
		r.resolveInputs,
		r.runRequested,
		r.decideNext,
		r.awaitPrerequisites,
		r.gateChange,
		r.startUpdate,
		r.exportOutputs,
		r.checkDrift,
		r.markUpToDate,
	)
}

// logEnd logs one line per reconcile: how long it took and when the Stack is looked at next.
func logEnd(ctx context.Context, stack *pulumiv1.Stack, start time.Time, res ctrl.Result, err error) {
	kv := []any{"duration", time.Since(start).Round(time.Millisecond), "requeueAfter", res.RequeueAfter}
	if c := conditions.Get(stack, pulumiv1.ConditionReady); c != nil {
		reason := c.Reason
		// Ready=False only says NotReadyInProgress or NotReadyStalled; the other condition says why.
		for _, typ := range []string{pulumiv1.ConditionReconciling, pulumiv1.ConditionStalled} {
			if conditions.IsTrue(stack, typ) {
				reason = conditions.Get(stack, typ).Reason
			}
		}
		kv = append(kv, "ready", c.Status, "reason", reason)
	}
	if err != nil {
		kv = append(kv, "error", err.Error())
	}
	ctrl.LoggerFrom(ctx).Info("Reconciled Stack", kv...)
}

// emit records an event at once: for announcements made after the status they announce
// was written (announceStall). Every other event goes through the scope's (scope.event).
func (r *Reconciler) emit(stack *pulumiv1.Stack, typ, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(stack, nil, typ, reason, eventAction, note, args...)
	}
}

// stalledReason is the reason of the Stack's Stalled=True condition, "" when not stalled.
func stalledReason(stack *pulumiv1.Stack) string {
	if !conditions.IsTrue(stack, pulumiv1.ConditionStalled) {
		return ""
	}
	return conditions.Get(stack, pulumiv1.ConditionStalled).Reason
}

// announceStall records one Stalled event when the Stack has just stalled, for whatever
// reason, or stalled anew for another reason: a person must act, and this is what alerts
// them.
func (r *Reconciler) announceStall(stack *pulumiv1.Stack, before string) {
	now := stalledReason(stack)
	if now == "" || now == before {
		return
	}
	r.emit(stack, corev1.EventTypeWarning, EventStalled, "Stalled (%s): %s", now, conditions.Get(stack, pulumiv1.ConditionStalled).Message)
}
