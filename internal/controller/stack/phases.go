package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/metrics"
)

// The phases of a reconcile, in the order they run. Each either proceeds or ends the
// reconcile with the Stack's conditions saying why.

// identityTokensNeedJob is why a Stack with identity tokens does not run under the local
// executor.
const identityTokensNeedJob = "spec.stackwright.identityTokens needs the job executor: the local executor runs the engine in the manager, where no ServiceAccount token of the Stack can be mounted; run the manager with --executor=job, or remove identityTokens"

// detachedPoll is how often a Stack checks on a detached Update, which no watch announces.
const detachedPoll = 2 * time.Second

// faultRequeue is how soon a Stack waiting for a missing object looks again, in case the
// watch that should announce the object is not in place (another namespace, a Flux CRD
// installed later).
const faultRequeue = 30 * time.Second

// observeUpdate looks at the Update recorded in status.currentUpdate: one in flight ends
// the reconcile (its completion triggers the next); a finished one has its result folded
// into the status; one that was recorded but never created is to be resumed.
func (r *Reconciler) observeUpdate(ctx context.Context, s *scope) (bool, error) {
	cu := s.stack.Status.CurrentUpdate
	if cu == nil {
		return true, nil
	}
	u, detached, err := r.findUpdate(ctx, s.stack.Namespace, cu.Name)
	if err != nil {
		return false, err
	}
	r.followStart(s, u, detached)
	switch {
	case cu.Request != "":
		return r.observeRequest(ctx, s, u, detached)
	case cu.Type == string(v1alpha1.UpdateTypeDrift):
		return r.observeDrift(ctx, s, u)
	case isApprovalPreview(s.stack):
		return r.observePreview(s, u)
	case u == nil:
		s.resume = cu.Name
		return true, nil
	case !u.Status.Finished():
		markUpdateInFlight(s.stack, u, detached)
		if detached {
			s.requeueAfter(detachedPoll)
		}
		return false, nil
	}
	outputs, err := r.readOutputs(ctx, u)
	if err != nil {
		return false, err
	}
	deployed := stackwrightStatus(s.stack).LastSuccessfulKey
	recordFinish(s.stack, u, outputs, r.Now())
	crashpoint.Hit(crashpoint.StackResultObserved)
	if u.Status.Phase == v1alpha1.UpdatePhaseSucceeded {
		// A resync that found nothing to change is no news: events (and the notifications
		// Flux sends for them) are for transitions.
		if u.Spec.DesiredStateKey != deployed || changedResources(u) {
			s.eventAbout(u, corev1.EventTypeNormal, EventUpdateSucceeded, "%s succeeded at revision %s%s (Update %s)", u.Spec.Type, u.Spec.Revision, took(u, "in"), u.Name)
		}
		if n := len(u.Status.PendingOperations); n > 0 {
			s.eventAbout(u, corev1.EventTypeWarning, EventPendingOperations, "an interrupted update left %d pending operation(s) in the state (Update %s lists them): check them at the provider, then run pulumi refresh with --clear-pending-creates or --import-pending-creates", n, u.Name)
		}
	} else {
		s.eventAbout(u, corev1.EventTypeWarning, EventUpdateFailed, "%s failed%s (Update %s): %s", u.Spec.Type, took(u, "after"), u.Name, u.Status.Message)
	}
	r.prune(ctx, s)
	return true, nil
}

// checkSuspended stops everything but the observation of an Update in flight.
func (r *Reconciler) checkSuspended(_ context.Context, s *scope) (bool, error) {
	if s.stack.Spec.Suspended() {
		markSuspended(s.stack)
		return false, nil
	}
	clearSuspended(s.stack)
	return true, nil
}

// reviewSpec stalls a Stack whose spec passed admission (which is no stricter than PKO's)
// but cannot run as written, before anything is fetched or started for it.
// Fields that are set but have no effect are announced by a Warning event, once per
// generation.
func (r *Reconciler) reviewSpec(_ context.Context, s *scope) (bool, error) {
	review := s.stack.Spec.Review()
	if p := review.Problems; len(p) > 0 {
		markStalled(s.stack, pulumiv1.ReasonSpecInvalid, strings.Join(p, "; "))
		return false, nil
	}
	ignored := append(review.Ignored, notApplied(&s.stack.Spec, r.Options.RunnerPods)...)
	if sw := stackwrightStatus(s.stack); len(ignored) > 0 && sw.IgnoredFieldsGeneration != s.stack.Generation {
		sw.IgnoredFieldsGeneration = s.stack.Generation
		s.event(corev1.EventTypeWarning, EventFieldsIgnored, "%s", strings.Join(ignored, "; "))
	}
	return true, nil
}

// notApplied lists the fields of spec that are accepted (PKO manifests set them) but
// that Stackwright, or this manager's executor, does not apply.
func notApplied(spec *pulumiv1.StackSpec, runnerPods bool) []string {
	var out []string
	if spec.WorkspaceReclaimPolicy != "" {
		out = append(out, "spec.workspaceReclaimPolicy is accepted and not applied: Stackwright keeps no workspace pod per stack")
	}
	out = append(out, updateTemplateNotApplied(spec)...)
	if !runnerPods && spec.WorkspaceTemplate != nil {
		out = append(out, "spec.workspaceTemplate is not applied: the local executor runs the engine in the manager, with no pod to apply it to")
	}
	if !runnerPods && spec.ServiceAccountName != "" {
		out = append(out, "spec.serviceAccountName is not applied: the local executor runs the engine in the manager, with no pod to give it to")
	}
	if spec.Preview && spec.ApprovalMode() == pulumiv1.ApprovalManual {
		out = append(out, "spec.stackwright.approval is ignored on a preview Stack, which applies nothing")
	}
	if spec.Preview && spec.OutputsExport() != nil {
		out = append(out, "spec.stackwright.outputs is ignored on a preview Stack, which deploys nothing")
	}
	return out
}

// checkExecutor stalls a Stack that this manager's executor cannot run as asked.
func (r *Reconciler) checkExecutor(_ context.Context, s *scope) (bool, error) {
	if len(s.stack.Spec.IdentityTokens()) > 0 && !r.Options.RunnerPods {
		markStalled(s.stack, pulumiv1.ReasonSpecInvalid, identityTokensNeedJob)
		return false, nil
	}
	return true, nil
}

// resolveSource resolves the program to run into an artifact.
func (r *Reconciler) resolveSource(ctx context.Context, s *scope) (bool, error) {
	// Only a fetch over the network can be slow enough to be worth a status write of its
	// own: a Program's artifact, or a program in the image, resolves locally.
	if k := s.stack.Spec.SourceKind(); k == pulumiv1.SourceKindGit || k == pulumiv1.SourceKindFlux {
		if err := s.progress(ctx, "Fetching "+describeSource(&s.stack.Spec)); err != nil {
			return false, err
		}
	}
	art, err := r.Sources.Resolve(ctx, s.stack)
	if err != nil {
		return r.handleFault(s, err, true)
	}
	s.artifact = art
	if r.Store != nil {
		// The namespace pays for what its Stacks use (--max-artifact-bytes-per-namespace).
		r.Store.Attribute(s.stack.Namespace, art.Digest)
	}
	markSourceReady(s.stack, true, pulumiv1.ReasonArtifactReady, artifactMessage(art))
	return true, nil
}

// resolveInputs reads the config, environment and credentials the spec references.
func (r *Reconciler) resolveInputs(ctx context.Context, s *scope) (bool, error) {
	in, err := inputs.Resolve(ctx, r.Client, s.stack, r.Options.Inputs)
	if err != nil {
		return r.handleFault(s, err, false)
	}
	s.inputs = in
	return true, nil
}

// decideNext decides, from the desired-state key and the status, whether to start an
// Update, wait out a backoff, stall, or do nothing because op already succeeded for
// exactly this desired state.
func (r *Reconciler) decideNext(_ context.Context, s *scope) (bool, error) {
	s.key = desiredStateKey(s.stack, s.op, s.artifact, s.inputs.Fingerprint)
	sw := stackwrightStatus(s.stack)
	sw.DesiredStateKey, sw.DesiredStateGeneration = s.key, s.stack.Generation
	if s.resume != "" {
		s.next = decide.Decision{Action: decide.Run, Attempt: max(stackwrightStatus(s.stack).Attempt, 1), Why: "resuming recorded update"}
		return true, nil
	}
	s.next = decide.Next(r.Now(), s.stack, s.key, decide.Policy{Base: r.Options.RetryBase, MaxBackoff: r.Options.MaxBackoff, StallAfter: r.Options.StallAfter})
	lu := s.stack.Status.LastUpdate
	switch s.next.Action {
	case decide.Backoff:
		markReconciling(s.stack, pulumiv1.ReasonRetryingAfterFailure, fmt.Sprintf("%s failed, retrying in %s: %s",
			lu.Type, s.next.RequeueAfter.Round(time.Second), lu.Message))
		s.requeueAfter(s.next.RequeueAfter)
		return false, nil
	case decide.WaitForLock:
		markReconciling(s.stack, pulumiv1.ReasonUpdateConflict, fmt.Sprintf("%s is waiting for another update to release the stack's lock, trying again in %s: %s",
			lu.Type, s.next.RequeueAfter.Round(time.Second), lu.Message))
		s.requeueAfter(s.next.RequeueAfter)
		return false, nil
	case decide.Stalled:
		failures := stackwrightStatus(s.stack).PermanentFailures
		switch stackwrightStatus(s.stack).LastFailureReason {
		case v1alpha1.ReasonMissingPlugin:
			markStalled(s.stack, pulumiv1.ReasonMissingPlugin, fmt.Sprintf("%s needs a plugin the runner does not have (Update %s): %s", s.op, lu.Name, lu.Message))
			return false, nil
		case v1alpha1.ReasonBackendUnsupported:
			// The spec is the cause, not the program: what it asks of the backend (today only
			// ESC environments) is what a person has to change, or where the state lives.
			markStalled(s.stack, pulumiv1.ReasonSpecInvalid, fmt.Sprintf("%s failed because the stack's backend cannot serve what the spec asks of it (Update %s): %s. "+
				"Pulumi ESC environments (spec.environment) need a Pulumi Cloud backend: use one, or set the configuration with spec.config, configRef or secretsRef instead",
				s.op, lu.Name, lu.Message))
			return false, nil
		case v1alpha1.ReasonOOMKilled:
			markStalled(s.stack, failedReason(s.op), fmt.Sprintf("%s failed %d times in a row, the last (Update %s) because its runner ran out of memory; raise the runner's memory limit "+
				"(spec.workspaceTemplate.spec.resources.limits.memory), or set the %s annotation to retry. Last error: %s",
				s.op, failures, lu.Name, pulumiv1.ReconcileRequestAnnotation, lu.Message))
			return false, nil
		}
		markStalled(s.stack, failedReason(s.op), fmt.Sprintf("%s failed %d times in a row with a permanent error; change the spec, its references or the source, or set the %s annotation to retry. Last error: %s",
			s.op, failures, pulumiv1.ReconcileRequestAnnotation, lu.Message))
		return false, nil
	}
	return true, nil
}

// startUpdate records the decided Update in the Stack's status, persists that with an
// optimistic lock, and only then creates the Update.
func (r *Reconciler) startUpdate(ctx context.Context, s *scope) (bool, error) {
	if s.next.Action != decide.Run {
		return true, nil
	}
	return r.createUpdate(ctx, s, func(stack *pulumiv1.Stack, u *v1alpha1.Update) {
		if s.op == v1alpha1.UpdateTypeDrift {
			// The Stack stays Ready while its resources are looked at.
			recordDriftStart(stack, u)
			return
		}
		recordStart(stack, u)
		markReconciling(stack, inProgressReason(s.op), fmt.Sprintf("Starting %s: %s (Update %s)", s.op, s.next.Why, u.Name))
	})
}

// skipTakenNames moves a new up or destroy past the attempts of its desired state whose
// Updates are still in the history: a desired state can come back (a rollout's abort
// returns Stacks to the revision they had, a config change is reverted), and its first
// attempt's name would then be taken by the earlier round's finished Update. The name is
// chosen here, before the intent is recorded, so a crash still resumes the same Update.
func (r *Reconciler) skipTakenNames(ctx context.Context, s *scope) error {
	if s.resume != "" || s.driftName != "" || s.previewName != "" || s.request != nil {
		return nil
	}
	for range maxTakenNames {
		u := &v1alpha1.Update{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: updateName(s.stack.Name, s.key, s.next.Attempt)}, u)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("failed to get Update: %w", err)
		case !u.Status.Finished():
			// In flight under this name: creating it again is refused, and the next
			// reconcile observes it.
			return nil
		}
		s.next.Attempt++
	}
	return nil
}

// maxTakenNames bounds the lookups of skipTakenNames; the history keeps fewer Updates.
const maxTakenNames = 64

// createUpdate builds the Update scope decided to start, records the intent to run it with
// record, persists that with an optimistic lock, and only then creates the Update.
func (r *Reconciler) createUpdate(ctx context.Context, s *scope, record func(*pulumiv1.Stack, *v1alpha1.Update)) (bool, error) {
	stack := s.stack
	if err := r.skipTakenNames(ctx, s); err != nil {
		return false, err
	}
	u := r.buildUpdate(s)
	record(stack, u)
	// The lock makes a decision taken on a stale copy of the Stack (a lagging cache) fail
	// here instead of overwriting an intent recorded meanwhile; the retry sees it.
	if err := s.patcher.Status(ctx, stack, patch.WithOptimisticLock()); err != nil {
		return false, err
	}
	switch {
	case s.previewName != "":
		crashpoint.Hit(crashpoint.StackPreviewIntentRecorded)
	case s.op == v1alpha1.UpdateTypeDestroy:
		crashpoint.Hit(crashpoint.StackDestroyIntentRecorded)
	default:
		crashpoint.Hit(crashpoint.StackIntentRecorded)
	}
	if err := controllerutil.SetControllerReference(stack, u, r.Client.Scheme()); err != nil {
		return false, fmt.Errorf("failed to set owner of Update %s: %w", u.Name, err)
	}
	log := ctrl.LoggerFrom(ctx)
	if err := r.Client.Create(ctx, u, client.FieldOwner(fieldManager)); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			return false, nil
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) && s.op == v1alpha1.UpdateTypeDestroy:
			if r.Detached == nil {
				// Runner Pods cannot be created there either, and the engine never runs in
				// the manager's process under the Job executor: it holds the manager's
				// rights, and the tenant's state, environment and program would steer it.
				return false, r.releaseWithoutDestroy(ctx, s, "no runner Pod can be created there, and the manager has no ServiceAccount to run one in its own namespace (--detached-runner-service-account and $POD_NAMESPACE)")
			}
			r.Detached.RunDetached(ctx, u)
			log.Info("Namespace terminating: running destroy without an Update object", "update", u.Name)
			// No watch announces an in-memory Update's progress.
			s.requeueAfter(detachedPoll)
			return false, nil
		}
		return false, fmt.Errorf("failed to create Update %s: %w", u.Name, err)
	}
	crashpoint.Hit(crashpoint.StackUpdateCreated)
	if u.Spec.Attempt > 1 && s.resume == "" && s.previewName == "" {
		metrics.ObserveRetry(u.Namespace)
	}
	log.Info("Started update", "update", u.Name, "type", u.Spec.Type, "revision", u.Spec.Revision, "attempt", u.Spec.Attempt, "why", s.next.Why)
	if announcesStart(s, u) {
		// Announced once it reads Running (started.go): a short run's result says it all.
		r.starts.expect(client.ObjectKeyFromObject(stack), u.UID, s.next.Why)
	}
	return false, nil
}

// changedResources reports whether an Update created, updated, replaced or deleted a
// resource (anything but "same").
func changedResources(u *v1alpha1.Update) bool {
	for op, n := range u.Status.Changes {
		if op != "same" && n > 0 {
			return true
		}
	}
	return false
}

// markUpToDate ends a reconcile that found the desired state deployed.
func (r *Reconciler) markUpToDate(ctx context.Context, s *scope) (bool, error) {
	s.upToDate = true
	markReady(s.stack, readyMessage(s.stack))
	s.requeueAfter(minPositive(s.stack.Spec.ResyncPeriod(), s.next.RequeueAfter))
	// A Stack at rest comes back for its resync behind every change (see changedFirst).
	s.result.Priority = ptr.To(handler.LowPriority)
	// An idle Stack is where old Updates age out.
	r.prune(ctx, s)
	return false, nil
}

// handleFault turns a resolution failure into conditions: Stalled for faults that need a
// human, Reconciling with a requeue for those that clear by themselves, and a returned error
// (retried with the controller's backoff) for anything unexpected.
func (r *Reconciler) handleFault(s *scope, err error, fromSource bool) (bool, error) {
	f, ok := fault.As(err)
	if !ok {
		markReconciling(s.stack, pulumiv1.ReasonStackProcessing, err.Error())
		return false, err
	}
	if fromSource {
		markSourceReady(s.stack, false, f.Reason, f.Error())
	}
	if f.Stalled {
		markStalled(s.stack, f.Reason, f.Error())
		return false, nil
	}
	markReconciling(s.stack, f.Reason, f.Error())
	s.requeueAfter(faultRequeue)
	return false, nil
}

func readyMessage(s *pulumiv1.Stack) string {
	lu := s.Status.LastUpdate
	if lu == nil {
		return "up to date"
	}
	return fmt.Sprintf("%s succeeded at revision %s", lu.Type, lu.LastSuccessfulCommit)
}
