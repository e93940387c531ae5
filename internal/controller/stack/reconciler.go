package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/source"
)

// Event reasons. Events are emitted on transitions only.
const (
	EventUpdateStarted   = "UpdateStarted"
	EventUpdateSucceeded = "UpdateSucceeded"
	EventUpdateFailed    = "UpdateFailed"
	EventStalled         = "Stalled"
	EventDestroyed       = "Destroyed"
	EventResourcesKept   = "ResourcesKept"
)

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
	// Inputs configures how config and environment references are resolved.
	Inputs inputs.Options
	// RunnerPods is set when Updates run in runner Pods (the Job executor). Only there can
	// the API server's identity tokens be projected; elsewhere a Stack asking for them is
	// stalled rather than run without them.
	RunnerPods bool
}

// identityTokensNeedJob is why a Stack with identity tokens does not run under the local
// executor.
const identityTokensNeedJob = "spec.stackwright.identityTokens needs the job executor: the local executor runs the engine in the manager, where no ServiceAccount token of the Stack can be mounted; run the manager with --executor=job, or remove identityTokens"

// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks/finalizers,verbs=update
// +kubebuilder:rbac:groups=stackwright.dev,resources=updates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
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
	Options  Options
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, req.NamespacedName, stack); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := newPatcher(r.Client, stack)
	defer func() {
		if err := p.patchStatus(ctx, stack); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	if !stack.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, stack, p)
	}
	if controllerutil.AddFinalizer(stack, pulumiv1.StackFinalizer) {
		// Persisted before anything else happens, so no resource can exist that a
		// deletion would not destroy.
		if err := p.patchFinalizers(ctx, stack); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.reconcileNormal(ctx, stack, p)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, stack *pulumiv1.Stack, p *patcher) (ctrl.Result, error) {
	// An Update in flight is observed even when suspended: its result must not be lost.
	current, res, err := r.observeCurrentUpdate(ctx, stack)
	if err != nil || current != nil && current.Status.Phase != "" {
		return res, err
	}
	if stack.Spec.Suspended() {
		markSuspended(stack)
		return ctrl.Result{}, nil
	}
	clearSuspended(stack)
	if len(stack.Spec.IdentityTokens()) > 0 && !r.Options.RunnerPods {
		markStalled(stack, pulumiv1.ReasonInvalidSpec, identityTokensNeedJob)
		return ctrl.Result{}, nil
	}

	art, in, res, err := r.resolve(ctx, stack)
	if err != nil || in == nil {
		return res, err
	}
	d, res, err := r.advance(ctx, stack, p, current, operation(&stack.Spec), art, in)
	if d.action != actionIdle {
		return res, err
	}
	stack.Status.ObservedReconcileRequest = stack.ReconcileRequest()
	markReady(stack, readyMessage(stack))
	return ctrl.Result{RequeueAfter: minPositive(stack.Spec.ResyncPeriod(), d.requeueAfter)}, nil
}

// reconcileDelete destroys the stack's resources when destroyOnFinalize asks for it, with
// the artifact of the last update that may have created them, and releases the finalizer
// only once that destroy succeeded.
func (r *Reconciler) reconcileDelete(ctx context.Context, stack *pulumiv1.Stack, p *patcher) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(stack, pulumiv1.StackFinalizer) {
		return ctrl.Result{}, nil
	}
	current, res, err := r.observeCurrentUpdate(ctx, stack)
	if err != nil || current != nil && current.Status.Phase != "" {
		return res, err
	}
	var last *pulumiv1.ArtifactRef
	if sw := stack.Status.Stackwright; sw != nil {
		last = sw.LastArtifact
	}
	switch {
	case !stack.Spec.DestroyOnFinalize:
		return r.releaseFinalizer(ctx, stack, p, func() {
			r.event(stack, corev1.EventTypeNormal, EventResourcesKept, "destroyOnFinalize is not set: the stack's resources are left in place")
		})
	case last == nil:
		return r.releaseFinalizer(ctx, stack, p, func() {
			r.event(stack, corev1.EventTypeNormal, EventDestroyed, "No update ever ran: nothing to destroy")
		})
	}
	if why := runnerPodOnly(stack, last); why != "" {
		// A destroy without the tokens the Stack asks for, or without its image, is not the
		// destroy it asked for. No runner Pod can be created in a terminating namespace, so
		// there it can never run: as with missing Secrets, holding the finalizer would only
		// block the namespace forever.
		if r.namespaceTerminating(ctx, stack.Namespace) {
			msg := fmt.Sprintf("Namespace %s is being deleted and destroy cannot run (%s, and none can be created there): the stack's resources were left in place; its state remains in the backend", stack.Namespace, why)
			return r.releaseFinalizer(ctx, stack, p, func() {
				ctrl.LoggerFrom(ctx).Info("Released finalizer without destroy", "reason", EventResourcesKept, "detail", msg)
				r.event(stack, corev1.EventTypeWarning, EventResourcesKept, "%s", msg)
			})
		}
		if !r.Options.RunnerPods {
			markStalled(stack, pulumiv1.ReasonInvalidSpec, why+": run the manager with --executor=job")
			return ctrl.Result{}, nil
		}
	}
	in, err := inputs.Resolve(ctx, r.Client, stack, r.Options.Inputs)
	if err != nil {
		if _, isFault := fault.As(err); isFault && r.namespaceTerminating(ctx, stack.Namespace) {
			// Nothing can be created in a terminating namespace, so what is missing now
			// stays missing: holding the finalizer would only block the namespace forever.
			// The event may be refused there too, so the log says it as well.
			msg := fmt.Sprintf("Namespace %s is being deleted and destroy cannot run (%v): the stack's resources were left in place; its state remains in the backend", stack.Namespace, err)
			return r.releaseFinalizer(ctx, stack, p, func() {
				ctrl.LoggerFrom(ctx).Info("Released finalizer without destroy", "reason", EventResourcesKept, "detail", msg)
				r.event(stack, corev1.EventTypeWarning, EventResourcesKept, "%s", msg)
			})
		}
		return r.handleFault(stack, err, false)
	}
	art := source.Artifact{Revision: last.Revision, Digest: last.Digest, Dir: last.Dir}
	d, res, err := r.advance(ctx, stack, p, current, v1alpha1.UpdateTypeDestroy, art, in)
	if d.action != actionIdle {
		return res, err
	}
	return r.releaseFinalizer(ctx, stack, p, func() {
		r.event(stack, corev1.EventTypeNormal, EventDestroyed, "Destroyed the stack's resources (Update %s)", stack.Status.LastUpdate.Name)
	})
}

// releaseFinalizer removes the Stack's finalizer and then calls announce, only if this
// reconcile was the one that removed it: a reconcile working from a cache that has not yet
// seen the removal finds the Stack gone and says nothing twice.
func (r *Reconciler) releaseFinalizer(ctx context.Context, stack *pulumiv1.Stack, p *patcher, announce func()) (ctrl.Result, error) {
	// The status is written first: once the finalizer is gone the Stack may be too.
	apimeta.RemoveStatusCondition(&stack.Status.Conditions, pulumiv1.ConditionReconciling)
	if err := p.patchStatus(ctx, stack); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(stack, pulumiv1.StackFinalizer)
	if err := p.patchFinalizers(ctx, stack); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	announce()
	return ctrl.Result{}, nil
}

// advance moves a Stack toward having run op on art with the given inputs: it starts an
// Update, waits out a backoff, or stalls. actionIdle means op already succeeded for exactly
// this desired state.
func (r *Reconciler) advance(ctx context.Context, stack *pulumiv1.Stack, p *patcher, current *v1alpha1.Update, op v1alpha1.UpdateType, art source.Artifact, in *inputs.Inputs) (decision, ctrl.Result, error) {
	key := desiredStateKey(stack, op, art, in.Fingerprint)
	stackwrightStatus(stack).DesiredStateKey = key
	if current != nil {
		// Recorded but never created (a crash, or a cache not caught up): create it under
		// the recorded name, so that whichever happened, exactly one exists.
		current.Spec.Type = op
		res, err := r.startUpdate(ctx, stack, p, current, art, key, "resuming recorded update")
		return decision{action: actionRun}, res, err
	}
	d := decide(r.Now(), stack, key, policy{base: r.Options.RetryBase, maxBackoff: r.Options.MaxBackoff, stallAfter: r.Options.StallAfter})
	lu := stack.Status.LastUpdate
	switch d.action {
	case actionRun:
		if op != v1alpha1.UpdateTypeDestroy {
			if wait, res, err := r.awaitPrerequisites(ctx, stack); wait || err != nil {
				return decision{action: actionWait}, res, err
			}
		}
		u := r.newUpdate(stack, op, art, key, d.attempt)
		res, err := r.startUpdate(ctx, stack, p, u, art, key, d.why)
		return d, res, err
	case actionBackoff:
		markReconciling(stack, pulumiv1.ReasonRetryingAfterFailure, fmt.Sprintf("%s failed, retrying in %s: %s",
			lu.Type, d.requeueAfter.Round(time.Second), lu.Message))
		return d, ctrl.Result{RequeueAfter: d.requeueAfter}, nil
	case actionStalled:
		reason := pulumiv1.ReasonStackUpdateFailed
		if op == v1alpha1.UpdateTypeDestroy {
			reason = pulumiv1.ReasonDestroyFailed
		}
		if !isStalled(stack) {
			r.event(stack, corev1.EventTypeWarning, EventStalled, "%s stalled after %d permanent failures", op, stack.Status.Stackwright.PermanentFailures)
		}
		markStalled(stack, reason, fmt.Sprintf("%s failed %d times in a row with a permanent error; change the spec, its references or the source, or set the %s annotation to retry. Last error: %s",
			op, stack.Status.Stackwright.PermanentFailures, pulumiv1.ReconcileRequestAnnotation, lu.Message))
		return d, ctrl.Result{}, nil
	}
	return d, ctrl.Result{}, nil
}

func readyMessage(s *pulumiv1.Stack) string {
	lu := s.Status.LastUpdate
	if lu == nil {
		return "up to date"
	}
	return fmt.Sprintf("%s succeeded at revision %s", lu.Type, lu.LastSuccessfulCommit)
}

// resolve resolves the Stack's source and inputs. A nil Inputs with a nil error means the
// status already explains why the Stack cannot proceed.
func (r *Reconciler) resolve(ctx context.Context, stack *pulumiv1.Stack) (source.Artifact, *inputs.Inputs, ctrl.Result, error) {
	setProgress(stack, "Fetching source")
	art, err := r.Sources.Resolve(ctx, stack)
	if err != nil {
		res, err := r.handleFault(stack, err, true)
		return art, nil, res, err
	}
	markSourceReady(stack, true, pulumiv1.ReasonArtifactReady, artifactMessage(art))
	in, err := inputs.Resolve(ctx, r.Client, stack, r.Options.Inputs)
	if err != nil {
		res, err := r.handleFault(stack, err, false)
		return art, nil, res, err
	}
	return art, in, ctrl.Result{}, nil
}

// faultRequeue is how soon a Stack waiting for a missing object looks again, in case the
// watch that should announce the object is not in place (another namespace, a Flux CRD
// installed later).
const faultRequeue = 30 * time.Second

// handleFault turns a resolution failure into conditions: Stalled for faults that need a
// human, Reconciling with a requeue for those that clear by themselves, and a returned error
// (retried with the controller's backoff) for anything unexpected.
func (r *Reconciler) handleFault(stack *pulumiv1.Stack, err error, fromSource bool) (ctrl.Result, error) {
	f, ok := fault.As(err)
	if !ok {
		markReconciling(stack, pulumiv1.ReasonProgressing, err.Error())
		return ctrl.Result{}, err
	}
	if fromSource {
		markSourceReady(stack, false, f.Reason, f.Error())
	}
	if f.Stalled {
		markStalled(stack, f.Reason, f.Error())
		return ctrl.Result{}, nil
	}
	markReconciling(stack, f.Reason, f.Error())
	return ctrl.Result{RequeueAfter: faultRequeue}, nil
}

// detachedPoll is how often a Stack checks on a detached Update, which no watch announces.
const detachedPoll = 2 * time.Second

// observeCurrentUpdate looks at the Update recorded in status.currentUpdate. It returns nil
// when there is none or it finished (its result then folded into the status). Otherwise it
// returns the Update: one with a phase is in flight and the reconcile should end; one
// without (never created: a crash between recording and creating it) must be created.
func (r *Reconciler) observeCurrentUpdate(ctx context.Context, stack *pulumiv1.Stack) (*v1alpha1.Update, ctrl.Result, error) {
	cu := stack.Status.CurrentUpdate
	if cu == nil {
		return nil, ctrl.Result{}, nil
	}
	u, res, err := r.getCurrentUpdate(ctx, stack, cu.Name)
	if err != nil || u == nil || !u.Status.Finished() {
		return u, res, err
	}
	outputs, err := r.readOutputs(ctx, u)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	recordFinish(stack, u, outputs, r.Now())
	if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
		r.event(stack, corev1.EventTypeNormal, EventUpdateSucceeded, "%s succeeded at revision %s (Update %s)", u.Spec.Type, u.Spec.Revision, u.Name)
	} else {
		r.event(stack, corev1.EventTypeWarning, EventUpdateFailed, "%s failed (Update %s): %s", u.Spec.Type, u.Name, u.Status.Message)
	}
	if err := r.pruneUpdates(ctx, stack); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to prune Update history")
	}
	return nil, ctrl.Result{}, nil
}

// getCurrentUpdate finds the recorded Update: in the cache, on the API server (the cache
// may lag), or among the detached ones. Not found anywhere, it returns a phaseless Update
// of that name for the caller to create.
func (r *Reconciler) getCurrentUpdate(ctx context.Context, stack *pulumiv1.Stack, name string) (*v1alpha1.Update, ctrl.Result, error) {
	u := &v1alpha1.Update{}
	key := client.ObjectKey{Namespace: stack.Namespace, Name: name}
	err := r.Client.Get(ctx, key, u)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, u)
	}
	switch {
	case apierrors.IsNotFound(err):
		if d, ok := r.detached(stack.Namespace, name); ok {
			if !d.Status.Finished() {
				markReconciling(stack, pulumiv1.ReasonDestroyInProgress, fmt.Sprintf("Running %s outside the API (namespace terminating), as Update %s", d.Spec.Type, d.Name))
				d.Status.Phase = nonEmpty(d.Status.Phase, v1alpha1.UpdatePhasePending)
				return d, ctrl.Result{RequeueAfter: detachedPoll}, nil
			}
			return d, ctrl.Result{}, nil
		}
		sw := stackwrightStatus(stack)
		return &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stack.Namespace}, Spec: v1alpha1.UpdateSpec{Attempt: max(sw.Attempt, 1)}}, ctrl.Result{}, nil
	case err != nil:
		return nil, ctrl.Result{}, fmt.Errorf("failed to get Update %s: %w", name, err)
	}
	if !u.Status.Finished() {
		verb := "Running"
		if u.Status.Phase != v1alpha1.UpdatePhaseRunning {
			verb = "Waiting to run"
			// Keep "in flight" distinguishable from "never created".
			u.Status.Phase = v1alpha1.UpdatePhasePending
		}
		reason := pulumiv1.ReasonUpdateInProgress
		if u.Spec.Type == v1alpha1.UpdateTypeDestroy {
			reason = pulumiv1.ReasonDestroyInProgress
		}
		markReconciling(stack, reason, fmt.Sprintf("%s %s (Update %s)", verb, u.Spec.Type, u.Name))
	}
	return u, ctrl.Result{}, nil
}

func (r *Reconciler) detached(namespace, name string) (*v1alpha1.Update, bool) {
	if r.Detached == nil {
		return nil, false
	}
	return r.Detached.Detached(namespace, name)
}

// namespaceTerminating reports whether the namespace is being deleted. Errors count as no:
// the caller then keeps waiting, which is the safe side.
func (r *Reconciler) namespaceTerminating(ctx context.Context, name string) bool {
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return false
	}
	return !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating
}

// readOutputs reads the outputs a successful Update left in its Secret, masking secret ones.
func (r *Reconciler) readOutputs(ctx context.Context, u *v1alpha1.Update) (map[string]apiextensionsv1.JSON, error) {
	if u.Status.Phase != v1alpha1.UpdatePhaseSucceeded || u.Status.OutputsSecretName == "" {
		return nil, nil
	}
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: u.Namespace, Name: u.Status.OutputsSecretName}
	err := r.Client.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		// The runner wrote the Secret just before the Update's result, and the cache may
		// not have it yet: only the API server can say it is really gone.
		err = r.APIReader.Get(ctx, key, sec)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Pruned or deleted by hand: the status keeps the outputs it has.
			return nil, nil
		}
		return nil, fmt.Errorf("failed to get outputs Secret %s: %w", u.Status.OutputsSecretName, err)
	}
	secret := map[string]bool{}
	for _, k := range strings.Split(sec.Annotations[v1alpha1.SecretOutputsAnnotation], ",") {
		if k != "" {
			secret[k] = true
		}
	}
	return maskOutputs(sec.Data, secret), nil
}

// newUpdate builds the Update for the given operation. Its name is derived from the
// desired-state key and the attempt, so deciding twice on the same status yields the same
// name.
func (r *Reconciler) newUpdate(stack *pulumiv1.Stack, op v1alpha1.UpdateType, art source.Artifact, key string, attempt int32) *v1alpha1.Update {
	return &v1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: updateName(stack.Name, key, attempt), Namespace: stack.Namespace},
		Spec: v1alpha1.UpdateSpec{
			StackName: stack.Name, Type: op, Revision: art.Revision, ArtifactDigest: art.Digest,
			DesiredStateKey: key, Attempt: attempt,
		},
	}
}

// startUpdate records u in the Stack's status, persists that, and only then creates u.
func (r *Reconciler) startUpdate(ctx context.Context, stack *pulumiv1.Stack, p *patcher, u *v1alpha1.Update, art source.Artifact, key, why string) (ctrl.Result, error) {
	spec := &stack.Spec
	u.Spec = v1alpha1.UpdateSpec{
		StackName: stack.Name, Type: nonEmpty(u.Spec.Type, operation(spec)), Revision: art.Revision, ArtifactDigest: art.Digest,
		ProjectDir: art.Dir, DesiredStateKey: key, Attempt: u.Spec.Attempt,
		Options: &v1alpha1.UpdateOptions{
			Refresh: spec.Refresh, ExpectNoChanges: spec.ExpectNoRefreshChanges, Targets: spec.Targets,
			TargetDependents: spec.TargetDependents, RunProgram: spec.RunProgram,
			Message: fmt.Sprintf("Stackwright: %s (Stack %s/%s, generation %d)", why, stack.Namespace, stack.Name, stack.Generation),
		},
	}
	if u.Spec.Type == v1alpha1.UpdateTypeDestroy {
		u.Spec.Options.Remove = true
	}
	recordStart(stack, u)
	reason := pulumiv1.ReasonUpdateInProgress
	if u.Spec.Type == v1alpha1.UpdateTypeDestroy {
		reason = pulumiv1.ReasonDestroyInProgress
	}
	markReconciling(stack, reason, fmt.Sprintf("Starting %s: %s (Update %s)", u.Spec.Type, why, u.Name))
	if err := p.patchStatus(ctx, stack); err != nil {
		return ctrl.Result{}, err
	}
	if len(stack.Name) <= 63 {
		u.Labels = map[string]string{v1alpha1.StackLabel: stack.Name}
	}
	if err := controllerutil.SetControllerReference(stack, u, r.Client.Scheme()); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to set owner of Update %s: %w", u.Name, err)
	}
	if err := r.Client.Create(ctx, u, client.FieldOwner(fieldManager)); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			return ctrl.Result{}, nil
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) && u.Spec.Type == v1alpha1.UpdateTypeDestroy && r.Detached != nil:
			r.Detached.RunDetached(u)
			ctrl.LoggerFrom(ctx).Info("Namespace terminating: running destroy without an Update object", "update", u.Name)
			// No watch announces an in-memory Update's progress.
			return ctrl.Result{RequeueAfter: detachedPoll}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to create Update %s: %w", u.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Started update", "update", u.Name, "type", u.Spec.Type, "revision", u.Spec.Revision, "attempt", u.Spec.Attempt, "why", why)
	r.event(stack, corev1.EventTypeNormal, EventUpdateStarted, "Started %s at revision %s: %s (Update %s)", u.Spec.Type, u.Spec.Revision, why, u.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) event(stack *pulumiv1.Stack, typ, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(stack, nil, typ, reason, "Reconcile", note, args...)
	}
}

// setProgress updates the Reconciling message without deciding the outcome, so a slow
// phase shows what it is doing.
func setProgress(stack *pulumiv1.Stack, msg string) {
	if isReady(stack) || isStalled(stack) {
		return
	}
	markReconciling(stack, pulumiv1.ReasonProgressing, msg)
}

func isReady(s *pulumiv1.Stack) bool   { return conditionTrue(s, pulumiv1.ConditionReady) }
func isStalled(s *pulumiv1.Stack) bool { return conditionTrue(s, pulumiv1.ConditionStalled) }

func conditionTrue(s *pulumiv1.Stack, typ string) bool {
	for _, c := range s.Status.Conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0 || a < b:
		return a
	}
	return b
}

func nonEmpty[T ~string](v, fallback T) T {
	if v == "" {
		return fallback
	}
	return v
}

// artifactMessage says what the Stack will run.
func artifactMessage(art source.Artifact) string {
	if art.Digest == "" {
		return fmt.Sprintf("revision %s, program at %s in the image", art.Revision, art.Dir)
	}
	return fmt.Sprintf("revision %s, artifact %s", art.Revision, art.Digest)
}

// runnerPodOnly says why a Stack's runs need a runner Pod (the Job executor), or "" when
// they can run anywhere. last is the artifact of its last update.
func runnerPodOnly(stack *pulumiv1.Stack, last *pulumiv1.ArtifactRef) string {
	switch {
	case len(stack.Spec.IdentityTokens()) > 0:
		return "spec.stackwright.identityTokens needs a runner Pod"
	case last != nil && last.Digest == "":
		return "the program is baked into the workspace image, which only a runner Pod can run"
	}
	return ""
}
