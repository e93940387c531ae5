package instance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A StackRollout of a template's revisions (spec.template) decides which revision the
// Stacks it selects are rendered from, in place of the template's updateStrategy: this
// controller reads the rollout's status, as the Stack controller does for source revisions,
// and the rollout never writes a Stack. The sync stays one-way: instance → Stack.

// rolloutOf returns the StackRollout of t's revisions that selects a Stack with these
// labels, nil if none; others names any further ones, which is a conflict.
func (c *Controller) rolloutOf(ctx context.Context, t *v1alpha1.StackTemplate, labels map[string]string) (*v1alpha1.StackRollout, []string, error) {
	var list v1alpha1.StackRolloutList
	if err := c.Client.List(ctx, &list, client.InNamespace(t.Spec.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("failed to list StackRollouts: %w", err)
	}
	var found []*v1alpha1.StackRollout
	for i := range list.Items {
		if ro := &list.Items[i]; ro.DeletionTimestamp.IsZero() && ro.RollsOutTemplate(t.Name) && ro.Selects(labels) {
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

// revisionChoice is the template revision an instance's Stack is to be rendered from, and
// what a rollout's preview gate asks of it.
type revisionChoice struct {
	// rev is the revision the instance has, or is to get: its Stacks of spec.stacks, its
	// objects and the outputs it receives follow it, and so does its Stack of spec.stack,
	// but while it previews.
	rev int64
	// preview, when not 0, is the revision the Stack of spec.stack is rendered from only to
	// be previewed for the rollout's preview gate (RolloutPreviewOnly); rev is the revision
	// it keeps, and returns to once its wave no longer previews.
	preview int64
	// apply holds the Stack's up to the plan of its preview (RolloutPreviewApply): the
	// rollout has a preview gate and opened the Stack's wave.
	apply bool
}

// rolloutRevision is the template revision rollout ro lets the Stack named stack be
// rendered from; cur is the revision it has (0 for a Stack not created yet), previewing the
// one it previews now (RolloutPreviewOnly; 0 when it previews none), latest the template's.
// As for source revisions: an open wave gets the target; a wave that previews it
// (spec.gates.preview) renders the Stack from the target for that preview only, and keeps
// cur for everything else; a closed one keeps the revision it has while a target moves
// through the waves, and returns to the stable revision from an aborted one (after an
// automatic abort, once its wave lets it); between rollouts every Stack converges on the
// stable revision. A new Stack starts at the stable revision (it is in no wave), or at the
// latest when the rollout has none yet.
//
// A Stack that previewed the target stays so until its wave opens to it, even while the
// rollout is paused, halted or not releasing it yet: its spec's generation is part of its
// desired state, so rendering it from cur in between would run an up of cur again and
// make the up of the target a desired state whose preview the gate never judged.
func rolloutRevision(ro *v1alpha1.StackRollout, stack string, cur, previewing, latest int64) revisionChoice {
	st := &ro.Status
	stable, target := v1alpha1.TemplateRevision(st.Stable), v1alpha1.TemplateRevision(st.Target)
	switch {
	case ro.Opens(stack) && target > 0:
		return revisionChoice{rev: target, apply: ro.Spec.Gates.Preview != nil}
	case ro.Previews(stack) && target > 0 && cur > 0,
		previewing > 0 && previewing == target && cur > 0 && inCurrentWave(ro, stack):
		return revisionChoice{rev: cur, preview: target}
	case stable > 0 && cur > 0 && cur == v1alpha1.TemplateRevision(st.Aborted):
		if ro.Returns(stack) {
			return revisionChoice{rev: stable}
		}
		// An automatic abort returns the wave maxParallel Stacks at a time.
		return revisionChoice{rev: cur}
	case stable > 0 && st.Target == nil:
		return revisionChoice{rev: stable}
	case cur > 0:
		return revisionChoice{rev: cur}
	case stable > 0:
		return revisionChoice{rev: stable}
	}
	return revisionChoice{rev: latest}
}

// inCurrentWave reports whether the named Stack is in the wave the rollout's target is at,
// while it rolls one out (or is halted doing so).
func inCurrentWave(ro *v1alpha1.StackRollout, stack string) bool {
	st := &ro.Status
	return st.Target != nil && (st.Phase == v1alpha1.RolloutProgressing || st.Phase == v1alpha1.RolloutHalted) &&
		int(st.Wave) < len(st.Waves) && slices.Contains(st.Waves[st.Wave].Stacks, stack)
}

// chooseTemplateRevision is the revision the instance's Stack st, which will carry labels,
// is to be rendered from: as the rollout of the template's revisions that selects it
// decides, or else as the template's updateStrategy does (targetRevision). note says why
// the open-template-revision annotation was not followed; conflict names the rollouts
// when more than one selects the Stack.
func (c *Controller) chooseTemplateRevision(ctx context.Context, t *v1alpha1.StackTemplate, st *pulumiv1.Stack, labels map[string]string) (choice revisionChoice, note string, conflict []string, err error) {
	ro, others, err := c.rolloutOf(ctx, t, labels)
	switch {
	case err != nil:
		return revisionChoice{}, "", nil, err
	case len(others) > 0:
		return revisionChoice{}, "", append([]string{ro.Name}, others...), nil
	case ro == nil:
		rev, note := targetRevision(t, st)
		return revisionChoice{rev: rev}, note, nil, nil
	}
	if open := st.Annotations[v1alpha1.OpenTemplateRevisionAnnotation]; open != "" {
		note = fmt.Sprintf("StackRollout %s decides which template revision the Stack is rendered from: %s=%q is ignored", ro.Name, v1alpha1.OpenTemplateRevisionAnnotation, open)
	}
	return rolloutRevision(ro, st.Name, currentRevision(st), previewingRevision(st), t.Status.Revision), note, nil, nil
}

// previewingRevision is the template revision the Stack is rendered from only to preview
// it (RolloutPreviewOnly), 0 when it previews none.
func previewingRevision(st *pulumiv1.Stack) int64 {
	if st.ResourceVersion == "" || st.Annotations[v1alpha1.RolloutPreviewAnnotation] != v1alpha1.RolloutPreviewOnly {
		return 0
	}
	n, err := strconv.ParseInt(st.Labels[v1alpha1.TemplateRevisionLabel], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// currentRevision is the template revision the Stack has (see HeldTemplateRevision: while it
// only previews another, the one it had), 0 for a Stack not created yet (or whose label is
// not a revision).
func currentRevision(st *pulumiv1.Stack) int64 {
	if st.ResourceVersion == "" {
		return 0
	}
	return v1alpha1.HeldTemplateRevision(st.Labels, st.Annotations)
}
