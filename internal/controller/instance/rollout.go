package instance

import (
	"context"
	"fmt"
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

// rolloutRevision is the template revision rollout ro lets the Stack named stack be
// rendered from; cur is the revision it is rendered from (0 for a Stack not created yet),
// latest the template's. As for source revisions: an open wave gets the target; a closed
// one keeps the revision it has while a target moves through the waves, and returns to the
// stable revision from an aborted one (after an automatic abort, once its wave lets it);
// between rollouts every Stack converges on the stable revision. A new Stack starts at the
// stable revision (it is in no wave), or at the latest when the rollout has none yet.
func rolloutRevision(ro *v1alpha1.StackRollout, stack string, cur, latest int64) int64 {
	st := &ro.Status
	stable := v1alpha1.TemplateRevision(st.Stable)
	switch {
	case ro.Opens(stack) && v1alpha1.TemplateRevision(st.Target) > 0:
		return v1alpha1.TemplateRevision(st.Target)
	case stable > 0 && cur > 0 && cur == v1alpha1.TemplateRevision(st.Aborted):
		if ro.Returns(stack) {
			return stable
		}
		// An automatic abort returns the wave maxParallel Stacks at a time.
		return cur
	case stable > 0 && st.Target == nil:
		return stable
	case cur > 0:
		return cur
	case stable > 0:
		return stable
	}
	return latest
}

// chooseTemplateRevision is the revision the instance's Stack st, which will carry labels,
// is to be rendered from: as the rollout of the template's revisions that selects it
// decides, or else as the template's updateStrategy does (targetRevision). note says why
// the open-template-revision annotation was not followed; conflict names the rollouts
// when more than one selects the Stack.
func (c *Controller) chooseTemplateRevision(ctx context.Context, t *v1alpha1.StackTemplate, st *pulumiv1.Stack, labels map[string]string) (rev int64, note string, conflict []string, err error) {
	ro, others, err := c.rolloutOf(ctx, t, labels)
	switch {
	case err != nil:
		return 0, "", nil, err
	case len(others) > 0:
		return 0, "", append([]string{ro.Name}, others...), nil
	case ro == nil:
		rev, note := targetRevision(t, st)
		return rev, note, nil, nil
	}
	if open := st.Annotations[v1alpha1.OpenTemplateRevisionAnnotation]; open != "" {
		note = fmt.Sprintf("StackRollout %s decides which template revision the Stack is rendered from: %s=%q is ignored", ro.Name, v1alpha1.OpenTemplateRevisionAnnotation, open)
	}
	return rolloutRevision(ro, st.Name, currentRevision(st), t.Status.Revision), note, nil, nil
}

// currentRevision is the template revision the Stack was rendered from, 0 for a Stack not
// created yet (or whose label is not a revision).
func currentRevision(st *pulumiv1.Stack) int64 {
	cur, err := strconv.ParseInt(st.Labels[v1alpha1.TemplateRevisionLabel], 10, 64)
	if st.ResourceVersion == "" || err != nil || cur <= 0 {
		return 0
	}
	return cur
}
