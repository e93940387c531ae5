package stack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/crashpoint"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/metrics"
	"github.com/stackwright/stackwright/internal/source"
)

// reconcileDelete destroys the stack's resources when destroyOnFinalize asks for it (or its
// TTL expired), with
// the artifact of the last update that may have created them, and releases the finalizer
// only once that destroy succeeded.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.stack, pulumiv1.StackFinalizer) {
		return ctrl.Result{}, nil
	}
	s.op = v1alpha1.UpdateTypeDestroy
	return s.run(ctx,
		r.observeUpdate,
		r.holdWhileInUse,
		r.chooseDestroy,
		r.resolveDestroyInputs,
		r.decideNext,
		r.startUpdate,
		r.releaseDestroyed,
	)
}

// chooseDestroy releases a Stack that needs no destroy, and otherwise sets up the destroy
// of the last artifact that may have created resources.
func (r *Reconciler) chooseDestroy(ctx context.Context, s *scope) (bool, error) {
	stack := s.stack
	var last *pulumiv1.ArtifactRef
	if sw := stack.Status.Stackwright; sw != nil {
		last = sw.LastArtifact
	}
	switch {
	case !stack.Spec.DestroyOnFinalize && !expired(stack):
		return false, r.releaseFinalizer(ctx, s, corev1.EventTypeNormal, EventResourcesKept, "destroyOnFinalize is not set: the stack's resources are left in place")
	case last == nil:
		return false, r.releaseFinalizer(ctx, s, corev1.EventTypeNormal, EventDestroyed, "No update ever ran: nothing to destroy")
	}
	if why := runnerPodOnly(stack, last); why != "" {
		// A destroy without the tokens the Stack asks for, or without its image, is not the
		// destroy it asked for. Where it can never run, as with missing Secrets, holding
		// the finalizer would only block the namespace forever.
		switch {
		case !r.namespaceTerminating(ctx, stack.Namespace):
			if !r.Options.RunnerPods {
				markStalled(stack, pulumiv1.ReasonSpecInvalid, why+": run the manager with --executor=job")
				return false, nil
			}
		case len(stack.Spec.IdentityTokens()) > 0:
			// The tokens are issued to the Stack's ServiceAccount, for a Pod of its own
			// namespace; the detached runner runs in the manager's.
			return false, r.releaseWithoutDestroy(ctx, s, why+" of the Stack's namespace, and none can be created there")
		case last != nil && last.Digest == "" && !r.Options.DetachedTenantImages:
			// A detached runner runs the runner image unless the platform allows the
			// tenant's own in its namespace.
			return false, r.releaseWithoutDestroy(ctx, s, why+", and a runner in the manager's namespace runs only the runner image (the manager's --detached-runner-tenant-images is off)")
		case !r.Options.RunnerPods || r.Detached == nil:
			return false, r.releaseWithoutDestroy(ctx, s, why+", and none can be created there")
		}
	}
	s.artifact = source.Artifact{Revision: last.Revision, Digest: last.Digest, Dir: last.Dir}
	return true, nil
}

// resolveDestroyInputs resolves the inputs the destroy needs. In a terminating namespace
// nothing can be created, so what is missing now stays missing: the finalizer is released
// rather than blocking the namespace forever.
func (r *Reconciler) resolveDestroyInputs(ctx context.Context, s *scope) (bool, error) {
	in, err := inputs.Resolve(ctx, r.Client, s.stack, r.Options.Inputs)
	if err != nil {
		if _, isFault := fault.As(err); isFault && r.namespaceTerminating(ctx, s.stack.Namespace) {
			return false, r.releaseWithoutDestroy(ctx, s, err.Error())
		}
		return r.handleFault(s, err, false)
	}
	s.inputs = in
	return true, nil
}

// releaseDestroyed ends the deletion of a Stack whose destroy succeeded.
func (r *Reconciler) releaseDestroyed(ctx context.Context, s *scope) (bool, error) {
	crashpoint.Hit(crashpoint.StackDestroySucceeded)
	return false, r.releaseFinalizer(ctx, s, corev1.EventTypeNormal, EventDestroyed,
		fmt.Sprintf("Destroyed the stack's resources (Update %s)", s.stack.Status.LastUpdate.Name))
}

// releaseWithoutDestroy releases a Stack whose destroy can never run. The event may be
// refused in a terminating namespace, so the log says it as well.
func (r *Reconciler) releaseWithoutDestroy(ctx context.Context, s *scope, why string) error {
	msg := fmt.Sprintf("Namespace %s is being deleted and destroy cannot run (%s): the stack's resources were left in place; its state remains in the backend", s.stack.Namespace, why)
	return r.releaseFinalizer(ctx, s, corev1.EventTypeWarning, EventResourcesKept, msg)
}

// releaseFinalizer removes the Stack's finalizer and then announces it with an event and a
// log line, only if this reconcile was the one that removed it: a reconcile working from a
// cache that has not yet seen the removal finds the Stack gone and says nothing twice.
func (r *Reconciler) releaseFinalizer(ctx context.Context, s *scope, eventType, reason, msg string) error {
	// The status is written first: once the finalizer is gone the Stack may be too. The
	// inputs are released before it: nothing would release them after.
	clearReconciling(s.stack)
	if err := s.patcher.Status(ctx, s.stack); err != nil {
		return err
	}
	if err := r.releaseInputs(ctx, s.stack); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(s.stack, pulumiv1.StackFinalizer)
	if err := s.patcher.Finalizers(ctx, s.stack); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	logMsg := "Released finalizer"
	if eventType == corev1.EventTypeWarning {
		// Counted here, where only the reconcile that removed the finalizer gets to.
		logMsg = "Released finalizer without destroy"
		metrics.ObserveResourcesKept(s.stack.Namespace)
	}
	ctrl.LoggerFrom(ctx).Info(logMsg, "reason", reason, "detail", msg)
	s.event(eventType, reason, "%s", msg)
	return nil
}

// namespaceTerminating reports whether the namespace is being deleted. Errors count as no:
// the caller then keeps waiting, which is the safe side.
func (r *Reconciler) namespaceTerminating(ctx context.Context, name string) bool {
	terminating, err := r.checkNamespaceTerminating(ctx, name)
	return err == nil && terminating
}

// checkNamespaceTerminating reports whether the namespace is being deleted (or gone), for
// callers to whom an unanswered question must not count as no.
func (r *Reconciler) checkNamespaceTerminating(ctx context.Context, name string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("failed to get Namespace %s: %w", name, err)
	}
	return !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating, nil
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
