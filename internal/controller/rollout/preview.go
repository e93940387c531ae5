package rollout

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The preview gate (spec.gates.preview) judges a wave before any of its Stacks is released:
// while the wave is Previewing, the Stack controller previews the target on each of its
// Stacks (StackRollout.Previews), as it previews a change for the Policies that select the
// Stack, and records the preview Update in the Stack's approval status; the rollout reads
// that Update's planned steps and judges them. Nothing is deployed until every preview
// passed, so a revision that would delete what it must not is stopped at the wave, before
// any Stack of the wave applies it. For a rollout of template revisions, the instance
// controller renders each Stack of the wave from the target for that preview only (with
// v1alpha1.RolloutPreviewAnnotation, which makes the Stack controller preview the change
// and apply nothing); the preview judged is then the one of the Stack's current spec.

// maxStepsNamed bounds the steps a preview fault names.
const maxStepsNamed = 5

// previewWave judges the previews of the current wave's Stacks and reports whether they all
// passed (the wave is then released); until then the conditions say which are pending, and
// a fault halts the rollout naming the Stacks and steps.
func (r *Reconciler) previewWave(ctx context.Context, s *scope) (bool, error) {
	ro, st := s.ro, &s.ro.Status
	w := currentWave(ro)
	gate := ro.Spec.Gates.Preview
	if gate == nil {
		// The gate was removed from the spec while the wave previewed.
		recordPreviewsPassed(ro)
		return true, nil
	}
	reason := v1alpha1.ReasonPreviewGateFailed
	var pending, faults []string
	fault := func(name, why, msg string) {
		if len(faults) == 0 && why != "" {
			reason = why
		}
		faults = append(faults, msg)
		st.FailedStacks = appendUnique(st.FailedStacks, name)
	}
	for _, n := range w.Stacks {
		stack, ok := s.stacks[n]
		if !ok {
			continue
		}
		// Ready at the target already (it was ahead): there is nothing to preview. A Stack
		// that stalls, or whose preview draws an advisory policy violation, fails as in
		// an open wave.
		switch v, why, msg := s.judge(stack, st.Target, st.ResumeTime); v {
		case done:
			continue
		case failed:
			fault(n, why, msg)
			continue
		}
		u, err := r.previewOf(ctx, stack, st.Target, ro.Spec.Template != nil)
		if err != nil {
			return false, err
		}
		if u == nil {
			pending = append(pending, n)
			continue
		}
		if steps := previewFaults(gate, u); len(steps) > 0 {
			fault(n, "", fmt.Sprintf("Stack %s: preview Update %s of %s %s", n, u.Name, st.Target.Revision, strings.Join(steps, "; ")))
		}
	}
	switch {
	case len(faults) > 0:
		halt(s, reason, faults)
		return false, nil
	case len(pending) > 0:
		markWavePreviewing(ro, pending)
		return false, nil
	}
	recordPreviewsPassed(ro)
	s.event(corev1.EventTypeNormal, EventWavePreviewed, "wave %s: the previews of %s on its %d Stack(s) passed spec.gates.preview", w.Name, st.Target.Revision, len(w.Stacks))
	return true, nil
}

// previewOf returns the Stack's finished, successful preview of target, nil while there is
// none (not started, running, or failed: the Stack retries a failed one, and stalls if it
// must). Of a source revision, the preview is the one of that revision; of a template
// revision (template), the one of the Stack's current spec, once that spec is rendered from
// the target and the Stack's status speaks of it (a preview of the spec the Stack had
// before is no preview of the target).
func (r *Reconciler) previewOf(ctx context.Context, stack *pulumiv1.Stack, target *v1alpha1.RolloutRevision, template bool) (*v1alpha1.Update, error) {
	sw := stack.Status.Stackwright
	if sw == nil || sw.Approval == nil || sw.Approval.Preview == "" {
		return nil, nil
	}
	ofTarget := func(u *v1alpha1.Update) bool { return u.Spec.Revision == target.Revision }
	switch {
	case template:
		if !renderedFrom(stack, target) || sw.Approval.DesiredStateKey != sw.DesiredStateKey {
			return nil, nil
		}
		ofTarget = func(u *v1alpha1.Update) bool { return u.Spec.DesiredStateKey == sw.DesiredStateKey }
	case sw.Approval.Revision != target.Revision:
		return nil, nil
	}
	key := client.ObjectKey{Namespace: stack.Namespace, Name: sw.Approval.Preview}
	u := &v1alpha1.Update{}
	// The cache tells whether it finished; the steps, which the cache drops, are read from
	// the API server once it has.
	for _, reader := range []client.Reader{r.Client, r.apiReader()} {
		err := reader.Get(ctx, key, u)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("failed to get preview Update %s: %w", key.Name, err)
		case u.Status.Phase != v1alpha1.UpdatePhaseSucceeded || !ofTarget(u):
			return nil, nil
		}
	}
	return u, nil
}

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// previewFaults says what in preview u the gate forbids, nil when it passes: the deletes
// and replaces, by resource, and a count of changes above maxChanges.
func previewFaults(gate *v1alpha1.RolloutPreviewGate, u *v1alpha1.Update) []string {
	var deletes, replaces []string
	changed := map[string]bool{}
	for _, step := range u.Status.Steps {
		switch step.Op {
		case "same", "read", "read-discard", "read-replacement", "refresh":
			continue
		case "delete", "discard":
			deletes = append(deletes, step.URN)
		case "replace", "create-replacement", "delete-replaced", "discard-replaced", "import-replacement":
			if !changed[step.URN] {
				replaces = append(replaces, step.URN)
			}
		}
		changed[step.URN] = true
	}
	var out []string
	if gate.NoDeletes && len(deletes) > 0 {
		out = append(out, fmt.Sprintf("deletes %d resource(s): %s", len(deletes), namesUpTo(deletes, maxStepsNamed)))
	}
	if gate.NoReplaces && len(replaces) > 0 {
		out = append(out, fmt.Sprintf("replaces %d resource(s): %s", len(replaces), namesUpTo(replaces, maxStepsNamed)))
	}
	if n := len(changed) + int(u.Status.StepsOmitted); gate.MaxChanges != nil && n > int(*gate.MaxChanges) {
		out = append(out, fmt.Sprintf("changes %d resource(s), more than maxChanges %d", n, *gate.MaxChanges))
	}
	return out
}
