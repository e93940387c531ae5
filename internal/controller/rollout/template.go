package rollout

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// A rollout of template revisions (spec.template) moves a StackTemplate's new revision
// through the waves of its instances' Stacks. Everything else is as for source revisions:
// the waves, gates, halts and requests. What differs is what a revision is (the template's
// revision number, and the digest of what it renders), where the rollout learns of a new
// one (the template's status, not the Stacks'), and when a Stack is at one (rendered from
// it, by the stackwright.dev/template-revision label, and Ready for that spec). The
// instance controller reads the rollout's status to render each Stack from the revision
// the rollout allows it, as the Stack controller does for source revisions.

// offer learns the revision the rollout would roll out next, and the one its Stacks have
// deployed (its stable revision, should it have none yet): from the Stacks' reports of
// their source, or from the template.
func (r *Reconciler) offer(ctx context.Context, s *scope) (bool, error) {
	ro := s.ro
	if ro.Spec.Template == nil {
		s.offered = available(ro.Name, s.list)
		if ro.Status.Stable == nil {
			s.deployed = mostDeployed(s.list)
		}
		return true, nil
	}
	if !r.Templates {
		markTemplateInvalid(ro, "this install serves no StackTemplates (--template-api-groups), so it rolls out no template revisions")
		return false, nil
	}
	t := &v1alpha1.StackTemplate{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: ro.Spec.Template.Name}, t)
	switch {
	case apierrors.IsNotFound(err):
		markTemplateInvalid(ro, fmt.Sprintf("StackTemplate %s (spec.template) not found", ro.Spec.Template.Name))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to get StackTemplate %s: %w", ro.Spec.Template.Name, err)
	case t.Spec.Namespace != ro.Namespace:
		markTemplateInvalid(ro, fmt.Sprintf("StackTemplate %s keeps its instances' Stacks in namespace %s: a rollout of its revisions must be there", t.Name, t.Spec.Namespace))
		return false, nil
	}
	s.judge = judgeTemplate
	if s.offered, err = r.templateRevision(ctx, t, t.Status.Revision); err != nil {
		return false, err
	}
	if ro.Status.Stable == nil {
		if s.deployed, err = r.templateRevision(ctx, t, mostRendered(s.list)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// templateRevision is template t's revision rev as a rollout names it; nil when there is no
// such revision (0, or deleted).
func (r *Reconciler) templateRevision(ctx context.Context, t *v1alpha1.StackTemplate, rev int64) (*v1alpha1.RolloutRevision, error) {
	if rev <= 0 {
		return nil, nil
	}
	tr := &v1alpha1.StackTemplateRevision{}
	name := v1alpha1.RevisionName(t.Name, rev)
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, tr)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get StackTemplateRevision %s: %w", name, err)
	case tr.Spec.Template != t.Name || tr.Spec.Revision != rev || !metav1.IsControlledBy(tr, t):
		// Another template's of this name, about to go with it.
		return nil, nil
	}
	return &v1alpha1.RolloutRevision{Revision: strconv.FormatInt(rev, 10), Digest: tr.Spec.Digest()}, nil
}

// mostRendered is the template revision most Stacks are Ready at (the first in name order
// on a tie), 0 when none is: the stable revision of a rollout that has none recorded yet.
func mostRendered(stacks []pulumiv1.Stack) int64 {
	sorted := make([]*pulumiv1.Stack, 0, len(stacks))
	for i := range stacks {
		sorted = append(sorted, &stacks[i])
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	counts := map[int64]int{}
	var best int64
	for _, st := range sorted {
		rev, err := strconv.ParseInt(st.Labels[v1alpha1.TemplateRevisionLabel], 10, 64)
		if err != nil || rev <= 0 || !readyForSpec(st) {
			continue
		}
		counts[rev]++
		if best == 0 || counts[rev] > counts[best] {
			best = rev
		}
	}
	return best
}

// judgeTemplate tells whether stack is Ready at the target template revision, failed it, or
// is still on its way. A Stack is at a revision once it is rendered from it and Ready for
// that spec (the Ready condition of its current generation); a failure counts only when it
// is of the desired state of the spec rendered from the target, so that a failure of an
// earlier spec, not yet reconciled past, is not the target's. As for sources, failures
// before since (the last resume) are forgiven, and those the Stack retries by itself are
// not failures.
func judgeTemplate(stack *pulumiv1.Stack, target *v1alpha1.RolloutRevision, since *metav1.Time) (verdict, string, string) {
	if c := conditions.Get(stack, pulumiv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && !forgiven(since, c.LastTransitionTime.Time) {
		return failed, v1alpha1.ReasonStackStalled, fmt.Sprintf("Stack %s is Stalled (%s): %s", stack.Name, c.Reason, c.Message)
	}
	if stack.Labels[v1alpha1.TemplateRevisionLabel] != target.Revision {
		return pending, "", ""
	}
	if readyForSpec(stack) {
		return done, "", ""
	}
	if !statusCurrent(stack) {
		return pending, "", ""
	}
	lu, sw := stack.Status.LastUpdate, stack.Status.Stackwright
	if lu != nil && lu.State == pulumiv1.UpdateStateFailed && sw.LastAttemptedKey == sw.DesiredStateKey && sw.LastFailureReason == v1alpha1.ReasonPermanentFailure &&
		(lu.LastResyncTime == nil || !forgiven(since, lu.LastResyncTime.Time)) {
		return failed, v1alpha1.ReasonStackUpdateFailed, fmt.Sprintf("Stack %s failed to update to template revision %s: %s", stack.Name, target.Revision, lu.Message)
	}
	// A person who resumes a rollout halted by a warning has read it.
	if since == nil && sw.Approval != nil && sw.Approval.DesiredStateKey == sw.DesiredStateKey && len(sw.Approval.Violations) > 0 {
		v := sw.Approval.Violations[0]
		return failed, v1alpha1.ReasonPolicyWarning, fmt.Sprintf("Stack %s: policy %s warns about template revision %s: %s", stack.Name, v.Policy, target.Revision, v.Message)
	}
	return pending, "", ""
}

// statusCurrent reports whether the Stack's status speaks of its current spec: it has the
// desired state of that spec (its Ready condition may speak of a new generation before
// then: the Stack controller says what it is doing before it has derived the key), and its
// Ready condition is of that generation.
func statusCurrent(stack *pulumiv1.Stack) bool {
	sw, ready := stack.Status.Stackwright, conditions.Get(stack, pulumiv1.ConditionReady)
	return sw != nil && sw.DesiredStateKey != "" && sw.DesiredStateGeneration == stack.Generation &&
		ready != nil && ready.ObservedGeneration == stack.Generation
}

// renderedFrom reports whether the Stack's current spec is rendered from template revision
// target, and its status speaks of that spec (its desired state is the target's).
func renderedFrom(stack *pulumiv1.Stack, target *v1alpha1.RolloutRevision) bool {
	return stack.Labels[v1alpha1.TemplateRevisionLabel] == target.Revision && statusCurrent(stack)
}

// readyForSpec reports whether the Stack is Ready for its current spec.
func readyForSpec(stack *pulumiv1.Stack) bool {
	c := conditions.Get(stack, pulumiv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == stack.Generation
}
