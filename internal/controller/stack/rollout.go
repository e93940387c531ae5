package stack

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source"
)

// ArtifactStore is the manager's artifact store: whether it still holds an artifact, and
// which namespaces use which.
type ArtifactStore interface {
	Has(digest string) bool
	// Attribute charges namespace ns for the artifact digest its Stack uses.
	Attribute(ns, digest string)
}

// holdForRollout lets the StackRollout that selects the Stack choose the revision it
// deploys: the rollout's target once the Stack's wave is open; otherwise the revision the
// Stack has (or the rollout's stable one, for a Stack that has none, or after an abort).
// Everything that deploys (updates, resyncs, retries, drift remediation) then runs on that
// revision, since it replaces the resolved artifact. The Stack reports what its source
// offers, which is what the rollout rolls out next.
func (r *Reconciler) holdForRollout(ctx context.Context, s *scope) (bool, error) {
	stack := s.stack
	sw := stackwrightStatus(stack)
	ro, others, err := r.rolloutOf(ctx, stack)
	if err != nil {
		return false, err
	}
	if len(others) > 0 {
		markStalled(stack, pulumiv1.ReasonRolloutConflict, fmt.Sprintf("StackRollouts %s all select the Stack: a Stack may be in one rollout only; change their selectors or the Stack's labels",
			strings.Join(append([]string{ro.Name}, others...), ", ")))
		return false, nil
	}
	if ro == nil {
		sw.Rollout = nil
		clearHeldBack(stack)
		return true, nil
	}
	avail := s.artifact
	state := &pulumiv1.StackRolloutState{Name: ro.Name, Available: &pulumiv1.ArtifactRef{Revision: avail.Revision, Digest: avail.Digest}}
	sw.Rollout = state
	pin := pinFor(ro, stack.Name, sw.LastArtifact)
	if pin == nil {
		state.HeldAt = "none"
		msg := fmt.Sprintf("StackRollout %s has not opened wave %s, and the Stack has deployed nothing yet: it waits for its wave", ro.Name, waveName(ro, stack.Name))
		markHeldBack(stack, pulumiv1.ReasonWaveClosed, msg)
		markReconciling(stack, pulumiv1.ReasonWaveClosed, msg)
		return false, nil
	}
	s.previewOnly = ro.Previews(stack.Name)
	s.rolloutPreview = ro.Spec.Gates.Preview != nil && ro.Status.Target != nil && pin.Revision == ro.Status.Target.Revision
	if pin.Revision == avail.Revision {
		if s.previewOnly {
			markHeldBack(stack, pulumiv1.ReasonWaveClosed, fmt.Sprintf("StackRollout %s previews %s on wave %s for its preview gate before releasing it; the Stack deploys it once the wave opens", ro.Name, pin.Revision, waveName(ro, stack.Name)))
		} else {
			clearHeldBack(stack)
		}
		return true, nil
	}
	state.HeldAt = pin.Revision
	reason, why := heldReason(ro, stack.Name, avail.Revision)
	markHeldBack(stack, reason, fmt.Sprintf("held at %s by StackRollout %s: %s; the source offers %s", pin.Revision, ro.Name, why, avail.Revision))
	if r.Store != nil && !r.Store.Has(pin.Digest) {
		markReconciling(stack, pulumiv1.ReasonRolloutArtifactMissing, fmt.Sprintf("StackRollout %s holds the Stack at %s, whose artifact %s is no longer in the manager's store (its data volume was replaced?); the Stack waits until the rollout opens its wave or is deleted",
			ro.Name, pin.Revision, pin.Digest))
		s.requeueAfter(faultRequeue)
		return false, nil
	}
	s.artifact = source.Artifact{Revision: pin.Revision, Digest: pin.Digest, Dir: avail.Dir}
	return true, nil
}

// previewForTemplateRollout gives an instance's Stack the preview gate of the StackRollout
// of template revisions that renders it, as the instance controller says with
// RolloutPreviewAnnotation: that rollout decides the Stack's spec, not its source revision,
// so this controller does not read it (holdForRollout reads rollouts of source revisions
// only), and the annotation comes in the same write as the spec it speaks of. Preview: the
// change is previewed (saving its plan) and the up waits, as for a wave that previews a
// source revision. Apply: the wave is open, and the up is held to that preview's plan.
func (r *Reconciler) previewForTemplateRollout(_ context.Context, s *scope) (bool, error) {
	switch s.stack.Annotations[v1alpha1.RolloutPreviewAnnotation] {
	case v1alpha1.RolloutPreviewOnly:
		s.rolloutPreview, s.previewOnly = true, true
	case v1alpha1.RolloutPreviewApply:
		s.rolloutPreview = true
	}
	return true, nil
}

// pinFor is the revision a rollout lets a Stack deploy, nil when it may deploy nothing
// yet; last is the artifact the Stack deployed last. An open wave gets the target, and so
// does one the rollout asks to preview it (the up then waits for the wave to open). A
// closed wave keeps what it has while a target moves through the waves (the target itself
// included, for a Stack that was ahead), and returns to the stable revision from an
// aborted one (after an automatic abort, once its wave lets it). Between rollouts every Stack converges on the stable revision, which has
// passed every wave: a Stack selected late, or left behind, catches up then.
func pinFor(ro *v1alpha1.StackRollout, stack string, last *pulumiv1.ArtifactRef) *v1alpha1.RolloutRevision {
	st := &ro.Status
	own := last != nil && last.Digest != ""
	switch {
	case ro.Opens(stack) || ro.Previews(stack):
		return st.Target
	case st.Aborted != nil && own && last.Revision == st.Aborted.Revision && st.Stable != nil:
		if ro.Returns(stack) {
			return st.Stable
		}
		// An automatic abort returns the wave maxParallel Stacks at a time.
		return &v1alpha1.RolloutRevision{Revision: last.Revision, Digest: last.Digest}
	case st.Target == nil && st.Stable != nil:
		return st.Stable
	case own:
		return &v1alpha1.RolloutRevision{Revision: last.Revision, Digest: last.Digest}
	}
	return st.Stable
}

// heldReason says why a Stack is kept from the revision its source offers.
func heldReason(ro *v1alpha1.StackRollout, stack, offered string) (string, string) {
	st := &ro.Status
	switch {
	case st.Aborted != nil && st.Aborted.Revision == offered:
		return pulumiv1.ReasonRolloutAborted, fmt.Sprintf("the rollout of %s was aborted", offered)
	case st.Target != nil && st.Target.Revision == offered:
		return pulumiv1.ReasonWaveClosed, fmt.Sprintf("wave %s is not open (the rollout is at wave %s, %s%s)", waveName(ro, stack), st.WaveName, st.Phase, pausedNote(ro))
	case st.Target != nil:
		return pulumiv1.ReasonRolloutPending, fmt.Sprintf("the rollout of %s comes first", st.Target.Revision)
	}
	return pulumiv1.ReasonRolloutPending, "the rollout has not started it yet" + pausedNote(ro)
}

// pausedNote tells a held Stack's reader that its rollout is paused, "" when it is not.
func pausedNote(ro *v1alpha1.StackRollout) string {
	if ro.Paused() {
		return ", paused"
	}
	return ""
}

func waveName(ro *v1alpha1.StackRollout, stack string) string {
	if w := ro.WaveOf(stack); w != "" {
		return w
	}
	return "(none: selected after the rollout started, it waits for the rollout's end)"
}

// rolloutOf returns the StackRollout of source revisions that selects the Stack, nil if
// none; others names any further ones, which is a conflict. A rollout of template
// revisions holds no source revision (the instance controller follows it): it is not
// counted.
func (r *Reconciler) rolloutOf(ctx context.Context, stack *pulumiv1.Stack) (*v1alpha1.StackRollout, []string, error) {
	var list v1alpha1.StackRolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(stack.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("failed to list StackRollouts: %w", err)
	}
	var found []*v1alpha1.StackRollout
	for i := range list.Items {
		if ro := &list.Items[i]; ro.DeletionTimestamp.IsZero() && ro.Spec.Template == nil && ro.Selects(stack.Labels) {
			found = append(found, ro)
		}
	}
	if len(found) == 0 {
		return nil, nil, nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	var others []string
	for _, ro := range found[1:] {
		others = append(others, ro.Name)
	}
	return found[0], others, nil
}

// enqueueRolloutStacks queues the Stacks whose permitted revision a rollout's change may
// have changed (see StackRollout.ChangedFor). Rollouts of template revisions are the
// instance controller's.
func (r *Reconciler) enqueueRolloutStacks() handler.EventHandler {
	all := func(ctx context.Context, ro *v1alpha1.StackRollout, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		var list pulumiv1.StackList
		sel, err := ro.StackSelector()
		if err != nil || ro.Spec.Template != nil {
			return
		}
		// Only the names are read.
		if err := r.Client.List(ctx, &list, client.InNamespace(ro.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
			return
		}
		for _, st := range list.Items {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&st)})
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if ro, ok := e.Object.(*v1alpha1.StackRollout); ok {
				all(ctx, ro, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if ro, ok := e.Object.(*v1alpha1.StackRollout); ok {
				all(ctx, ro, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, okOld := e.ObjectOld.(*v1alpha1.StackRollout)
			n, okNew := e.ObjectNew.(*v1alpha1.StackRollout)
			if !okOld || !okNew || n.Spec.Template != nil {
				return
			}
			every, opened := n.ChangedFor(o)
			if every {
				all(ctx, o, q)
				all(ctx, n, q)
				return
			}
			for _, name := range opened {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: n.Namespace, Name: name}})
			}
		},
	}
}
