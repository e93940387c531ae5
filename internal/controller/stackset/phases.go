package stackset

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source/git"
)

// The phases of a reconcile, in the order they run. Each either proceeds or ends the
// reconcile with the set's conditions saying why.

// Repository listing bounds.
const (
	defaultInterval = time.Minute
	minInterval     = 10 * time.Second
)

// defaultMaxRemovals is spec.maxRemovals when unset.
var defaultMaxRemovals = intstr.FromString("50%")

// generate lists the set's elements. A generator that cannot work as written stalls the
// set; a repository that cannot be listed now is listed again at its interval, and
// nothing is removed meanwhile.
func (r *Reconciler) generate(ctx context.Context, s *scope) (bool, error) {
	elems, err := r.elements(ctx, s)
	if f, ok := fault.As(err); ok {
		if f.Stalled {
			markGeneratorStalled(s.set, f.Reason, f.Error())
			return false, nil
		}
		markListingFailed(s.set, f.Reason, f.Error())
		s.requeue.After(interval(s.set))
		return false, nil
	} else if err != nil {
		return false, err
	}
	// Whatever the later phases decide, a repository's branches and directories change
	// without the set changing: they are listed again at the interval.
	s.requeue.After(interval(s.set))
	s.elems = elems
	return true, nil
}

// checkElements stalls a set whose generator yields more elements than the cap: nothing
// is created or removed until then.
func (r *Reconciler) checkElements(_ context.Context, s *scope) (bool, error) {
	if limit := cmp.Or(r.MaxElements, DefaultMaxElements); len(s.elems) > limit {
		markTooManyElements(s.set, len(s.elems), limit)
		return false, nil
	}
	return true, nil
}

// skipExpiredElements leaves out the elements whose Stack's TTL expired (see skipExpired).
func skipExpiredElements(_ context.Context, s *scope) (bool, error) {
	s.elems = skipExpired(s.set, s.elems, s.stacks)
	return true, nil
}

// renderStacks renders every element's Stack; a template that does not render for one of
// them stalls the set, and nothing is created or removed.
func renderStacks(_ context.Context, s *scope) (bool, error) {
	want, err := renderAll(s.set, s.elems)
	if err != nil {
		markTemplateInvalid(s.set, err)
		return false, nil
	}
	s.want = want
	return true, nil
}

// applyStacks creates each wanted Stack, or brings the set's own to its rendering (a hand
// edit is put back). A Stack of a wanted name that is not the set's is never taken over:
// it is a conflict, which observeStacks reports.
func (r *Reconciler) applyStacks(ctx context.Context, s *scope) (bool, error) {
	set := s.set
	for _, key := range slices.Sorted(maps.Keys(s.want)) {
		w := s.want[key]
		cur := &pulumiv1.Stack{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := controllerutil.SetControllerReference(set, w, r.Client.Scheme()); err != nil {
				return false, fmt.Errorf("failed to own Stack %s: %w", w.Name, err)
			}
			if err := r.Client.Create(ctx, w, client.FieldOwner(FieldManager)); err != nil {
				return false, fmt.Errorf("failed to create Stack %s: %w", w.Name, err)
			}
			s.event(corev1.EventTypeNormal, EventStackCreated, "Created Stack %s for %q", w.Name, w.Annotations[v1alpha1.StackSetElementAnnotation])
			continue
		case err != nil:
			return false, fmt.Errorf("failed to get Stack %s: %w", w.Name, err)
		case !metav1.IsControlledBy(cur, set) || cur.Labels[v1alpha1.StackSetElementLabel] != key:
			s.conflicts = append(s.conflicts, w.Name)
			continue
		case !cur.DeletionTimestamp.IsZero():
			continue
		}
		next := cur.DeepCopy()
		next.Labels = labels.Merge(next.Labels, w.Labels)
		next.Annotations = labels.Merge(next.Annotations, w.Annotations)
		next.Spec = w.Spec
		if apiequality.Semantic.DeepEqual(cur.Spec, next.Spec) && maps.Equal(cur.Labels, next.Labels) && maps.Equal(cur.Annotations, next.Annotations) {
			continue
		}
		if err := r.Client.Update(ctx, next, client.FieldOwner(FieldManager)); err != nil {
			return false, fmt.Errorf("failed to update Stack %s: %w", next.Name, err)
		}
	}
	return true, nil
}

// removeVanished orphans or deletes the Stacks of elements that are gone, unless more are
// gone than spec.maxRemovals allows: then it removes none, and observeStacks says why.
func (r *Reconciler) removeVanished(ctx context.Context, s *scope) (bool, error) {
	set := s.set
	var gone []*pulumiv1.Stack
	for i := range s.stacks {
		st := &s.stacks[i]
		_, wanted := s.want[st.Labels[v1alpha1.StackSetElementLabel]]
		resting := slices.ContainsFunc(set.Status.Expired, func(x v1alpha1.ExpiredElement) bool {
			return x.Element == st.Annotations[v1alpha1.StackSetElementAnnotation]
		})
		if !wanted && !resting && st.DeletionTimestamp.IsZero() {
			gone = append(gone, st)
		}
	}
	if len(gone) == 0 {
		return true, nil
	}
	bound := defaultMaxRemovals
	if set.Spec.MaxRemovals != nil {
		bound = *set.Spec.MaxRemovals
	}
	if s.held = hold(gone, bound, len(s.stacks)); s.held != nil {
		return true, nil
	}
	for _, st := range gone {
		if err := r.remove(ctx, s, st); err != nil {
			return false, err
		}
	}
	return true, nil
}

// observeStacks counts the set's Stacks and sets its conditions from them, unless a
// conflict or held removals stall it (a conflict first). Held removals are announced only
// when the Stacks held are not those the status already holds (alreadyHeld), so a set
// that stays held is announced once, not at every reconcile; held removals a conflict
// hides from the status are announced once it is resolved.
func observeStacks(_ context.Context, s *scope) (bool, error) {
	// Decided before the setters below replace the condition that says what was held.
	announce := s.held != nil && len(s.held.names) > 0 && !alreadyHeld(s.set, s.held.names)
	recordStacks(s.set, s.want, s.stacks)
	switch {
	case len(s.conflicts) > 0:
		markStackConflict(s.set, s.conflicts)
	case s.held != nil:
		msg := markRemovalsHeld(s.set, *s.held)
		if announce {
			s.event(corev1.EventTypeWarning, EventRemovalsHeld, "%s", msg)
		}
	}
	return true, nil
}

// interval is how often a git generator's repository is listed; 0 for a list.
func interval(set *v1alpha1.StackSet) time.Duration {
	var repo *v1alpha1.GitRepository
	switch g := set.Spec.Generator; {
	case g.GitBranches != nil:
		repo = &g.GitBranches.GitRepository
	case g.GitDirectories != nil:
		repo = &g.GitDirectories.GitRepository
	case g.PullRequests != nil:
		repo = &v1alpha1.GitRepository{Interval: g.PullRequests.Interval}
	default:
		return 0
	}
	if repo.Interval == nil {
		return defaultInterval
	}
	return max(repo.Interval.Duration, minInterval)
}

// elements lists the set's elements, and records the commit a directory generator read.
func (r *Reconciler) elements(ctx context.Context, s *scope) ([]element, error) {
	set := s.set
	every := interval(set)
	repo := func(g *v1alpha1.GitRepository) git.Repository {
		return git.Repository{Namespace: set.Namespace, URL: g.URL, GitAuth: g.GitAuth, Interval: every}
	}
	switch g := set.Spec.Generator; {
	case g.GitBranches != nil:
		branches, err := r.Git.Branches(ctx, repo(&g.GitBranches.GitRepository))
		if err != nil {
			return nil, err
		}
		elems, err := branchElements(g.GitBranches, branches)
		if err != nil {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator.gitBranches: %v", err)
		}
		return elems, nil
	case g.GitDirectories != nil:
		commit, dirs, err := r.Git.Directories(ctx, repo(&g.GitDirectories.GitRepository), g.GitDirectories.Branch)
		if err != nil {
			return nil, err
		}
		set.Status.Revision = commit
		elems, err := directoryElements(g.GitDirectories, commit, dirs)
		if err != nil {
			return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator.gitDirectories: %v", err)
		}
		return elems, nil
	case g.List != nil:
		return listElements(g.List), nil
	case g.PullRequests != nil:
		return r.pullRequestElements(ctx, s)
	}
	return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator sets none of gitBranches, gitDirectories, list and pullRequests")
}

// skipExpired records the elements whose Stack is being deleted because its TTL expired,
// and returns the elements without those still as they were then: an expired review stack
// is not created again at once, but a new commit of its branch revives it. Elements gone
// from the generator are forgotten.
func skipExpired(set *v1alpha1.StackSet, elems []element, stacks []pulumiv1.Stack) []element {
	revision := map[string]string{}
	for _, e := range elems {
		revision[e.id] = e.revision
	}
	expired := slices.Clone(set.Status.Expired)
	for i := range stacks {
		st := &stacks[i]
		sw := st.Status.Stackwright
		if st.DeletionTimestamp.IsZero() || sw == nil || sw.ExpiredAt == nil {
			continue
		}
		id := st.Annotations[v1alpha1.StackSetElementAnnotation]
		r, ok := revision[id]
		if !ok {
			continue
		}
		// The commit the Stack ran, not the branch's head now: a push that lands while
		// the expired Stack is still being destroyed revives it.
		if lu := st.Status.LastUpdate; r != "" && lu != nil && lu.LastAttemptedCommit != "" {
			r = lu.LastAttemptedCommit
		}
		expired = append(slices.DeleteFunc(expired, func(x v1alpha1.ExpiredElement) bool { return x.Element == id }),
			v1alpha1.ExpiredElement{Element: id, Commit: r})
	}
	expired = slices.DeleteFunc(expired, func(x v1alpha1.ExpiredElement) bool {
		r, ok := revision[x.Element]
		return !ok || r != x.Commit
	})
	set.Status.Expired = expired
	return slices.DeleteFunc(elems, func(e element) bool {
		return slices.ContainsFunc(expired, func(x v1alpha1.ExpiredElement) bool { return x.Element == e.id })
	})
}

// renderAll renders every element's Stack, keyed by element key; one that does not render
// fails them all, so that a broken template changes nothing.
func renderAll(set *v1alpha1.StackSet, elems []element) (map[string]*pulumiv1.Stack, error) {
	want := make(map[string]*pulumiv1.Stack, len(elems))
	for _, e := range elems {
		spec, err := render(&set.Spec.Template, e)
		if err != nil {
			return nil, fmt.Errorf("element %q: %w", e.id, err)
		}
		if set.Spec.DeletionPolicy == v1alpha1.StackSetDestroy {
			spec.DestroyOnFinalize = true
		}
		key := elementKey(e.id)
		st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{
			Namespace: set.Namespace, Name: stackName(set.Name, e.id),
			Labels:      labels.Merge(set.Spec.Template.Metadata.Labels, map[string]string{v1alpha1.StackSetLabel: set.Name, v1alpha1.StackSetElementLabel: key}),
			Annotations: labels.Merge(set.Spec.Template.Metadata.Annotations, map[string]string{v1alpha1.StackSetElementAnnotation: e.id}),
		}, Spec: spec}
		want[key] = st
	}
	return want, nil
}

// hold is what bound holds of the Stacks gone, of the set's n: nil when they may all go.
// A bound that cannot be read holds them all.
func hold(gone []*pulumiv1.Stack, bound intstr.IntOrString, n int) *heldRemovals {
	limit, err := removalLimit(bound, n)
	if err != nil {
		return &heldRemovals{of: n, bound: bound, err: err}
	}
	if len(gone) <= limit {
		return nil
	}
	names := make([]string, 0, len(gone))
	for _, st := range gone {
		names = append(names, st.Name)
	}
	return &heldRemovals{names: names, of: n, bound: bound}
}

// removalLimit is how many of n Stacks may lose their element at once: bound as a number
// (0 removes nothing by itself), or as a percentage of n rounded up and never less than
// one, so that a set of one or two Stacks can still lose an element.
func removalLimit(bound intstr.IntOrString, n int) (int, error) {
	if bound.Type == intstr.Int {
		return max(bound.IntValue(), 0), nil
	}
	limit, err := intstr.GetScaledValueFromIntOrPercent(&bound, n, true)
	if err != nil {
		return 0, err
	}
	return max(limit, 1), nil
}

// remove orphans st or deletes it, as the set's deletion policy says.
func (r *Reconciler) remove(ctx context.Context, s *scope, st *pulumiv1.Stack) error {
	set := s.set
	element := st.Annotations[v1alpha1.StackSetElementAnnotation]
	if set.Spec.DeletionPolicy == v1alpha1.StackSetDestroy {
		if !st.Spec.DestroyOnFinalize {
			next := st.DeepCopy()
			next.Spec.DestroyOnFinalize = true
			if err := r.Client.Update(ctx, next, client.FieldOwner(FieldManager)); err != nil {
				return fmt.Errorf("failed to update Stack %s: %w", st.Name, err)
			}
			st = next
		}
		if err := r.Client.Delete(ctx, st, client.Preconditions{UID: &st.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Stack %s: %w", st.Name, err)
		}
		s.event(corev1.EventTypeNormal, EventStackDeleted, "Deleting Stack %s, destroying its resources: %q is gone", st.Name, element)
		return nil
	}
	next := st.DeepCopy()
	next.OwnerReferences = slices.DeleteFunc(next.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == set.UID })
	delete(next.Labels, v1alpha1.StackSetLabel)
	delete(next.Labels, v1alpha1.StackSetElementLabel)
	if err := r.Client.Update(ctx, next, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("failed to orphan Stack %s: %w", st.Name, err)
	}
	s.event(corev1.EventTypeNormal, EventStackOrphaned, "Orphaned Stack %s, kept with its resources: %q is gone", st.Name, element)
	return nil
}
