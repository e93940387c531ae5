package stackset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/fault"
	"github.com/stackwright/stackwright/internal/source/git"
)

// FieldManager owns what this controller writes: the sets' status and their Stacks.
const FieldManager = "stackwright-stackset-controller"

// Events recorded on StackSets.
const (
	EventStackCreated  = "StackCreated"
	EventStackOrphaned = "StackOrphaned"
	EventStackDeleted  = "StackDeleted"
	EventRemovalsHeld  = "RemovalsHeld"
	eventActionGen     = "Generate"
)

// Repository listing bounds.
const (
	defaultInterval = time.Minute
	minInterval     = 10 * time.Second
)

// defaultMaxRemovals is spec.maxRemovals when unset.
var defaultMaxRemovals = intstr.FromString("50%")

// +kubebuilder:rbac:groups=stackwright.dev,resources=stacksets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=stackwright.dev,resources=stacksets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=stackwright.dev,resources=stacksets/finalizers,verbs=update
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=create;delete

// Lister reads a repository's branches and project directories (the git source).
type Lister interface {
	Branches(ctx context.Context, repo git.Repository) (map[string]string, error)
	Directories(ctx context.Context, repo git.Repository, branch string) (string, []string, error)
}

// Reconciler keeps one Stack per element of each StackSet.
type Reconciler struct {
	Client   client.Client
	Git      Lister
	Recorder events.EventRecorder
	// MaxElements bounds the elements (and so the Stacks) of one set: a repository's
	// branches or directories are the tenant's to multiply. 0 means DefaultMaxElements.
	MaxElements int
}

// DefaultMaxElements is the default of Reconciler.MaxElements.
const DefaultMaxElements = 500

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	set := &v1alpha1.StackSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := patch.New(r.Client, set, "StackSet", FieldManager)
	defer func() {
		conditions.Finalize(set, &set.Status.ObservedGeneration)
		if err := p.Status(ctx, set); err != nil {
			retErr = errors.Join(retErr, err)
		}
		ctrl.LoggerFrom(ctx).Info("Reconciled StackSet", "duration", time.Since(start).Round(time.Millisecond),
			"elements", set.Status.Elements, "stacks", set.Status.Stacks, "requeueAfter", result.RequeueAfter)
	}()
	stacks, err := r.stacksOf(ctx, set)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !set.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, set, p, stacks)
	}
	if controllerutil.AddFinalizer(set, v1alpha1.StackSetFinalizer) {
		if err := p.Finalizers(ctx, set); err != nil {
			return ctrl.Result{}, err
		}
	}
	requeue := interval(set)
	elems, err := r.generate(ctx, set)
	if f, ok := fault.As(err); ok {
		if f.Stalled {
			conditions.MarkStalled(set, f.Reason, f.Error())
			return ctrl.Result{}, nil
		}
		conditions.MarkReconciling(set, f.Reason, f.Error()+"; nothing is removed while the elements cannot be listed")
		return ctrl.Result{RequeueAfter: requeue}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if limit := cmp.Or(r.MaxElements, DefaultMaxElements); len(elems) > limit {
		conditions.MarkStalled(set, v1alpha1.ReasonTooManyElements, fmt.Sprintf(
			"the generator yields %d elements, more than the %d a StackSet may have (the manager's --max-stackset-elements): narrow its filters, "+
				"or ask the platform team to raise the cap; no Stack is created or removed until then", len(elems), limit))
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	elems = skipExpired(set, elems, stacks)
	want, err := renderAll(set, elems)
	if err != nil {
		conditions.MarkStalled(set, pulumiv1.ReasonSpecInvalid, err.Error())
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	conflicts, err := r.apply(ctx, set, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	held, err := r.removeVanished(ctx, set, want, stacks)
	if err != nil {
		return ctrl.Result{}, err
	}
	set.Status.Elements = int32(len(want))
	observe(set, want, stacks)
	switch {
	case len(conflicts) > 0:
		conditions.MarkStalled(set, v1alpha1.ReasonStackConflict, fmt.Sprintf(
			"Stacks %s exist and are not this set's; they are never taken over: rename them, or delete them", strings.Join(conflicts, ", ")))
	case held != "":
		conditions.MarkStalled(set, v1alpha1.ReasonRemovalsHeld, held)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// interval is how often a git generator's repository is listed; 0 for a list.
func interval(set *v1alpha1.StackSet) time.Duration {
	var repo *v1alpha1.GitRepository
	switch g := set.Spec.Generator; {
	case g.GitBranches != nil:
		repo = &g.GitBranches.GitRepository
	case g.GitDirectories != nil:
		repo = &g.GitDirectories.GitRepository
	default:
		return 0
	}
	if repo.Interval == nil {
		return defaultInterval
	}
	return max(repo.Interval.Duration, minInterval)
}

// generate lists the set's elements.
func (r *Reconciler) generate(ctx context.Context, set *v1alpha1.StackSet) ([]element, error) {
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
	}
	return nil, fault.Stall(pulumiv1.ReasonSpecInvalid, "spec.generator sets none of gitBranches, gitDirectories and list")
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

// stacksOf lists the set's Stacks by its label.
func (r *Reconciler) stacksOf(ctx context.Context, set *v1alpha1.StackSet) ([]pulumiv1.Stack, error) {
	var list pulumiv1.StackList
	if err := r.Client.List(ctx, &list, client.InNamespace(set.Namespace), client.MatchingLabels{v1alpha1.StackSetLabel: set.Name}); err != nil {
		return nil, fmt.Errorf("failed to list Stacks of StackSet %s: %w", set.Name, err)
	}
	return slices.DeleteFunc(list.Items, func(st pulumiv1.Stack) bool { return !metav1.IsControlledBy(&st, set) }), nil
}

// apply creates each wanted Stack, or brings the set's own to its rendering (a hand edit
// is put back). It returns the names taken by Stacks that are not the set's.
func (r *Reconciler) apply(ctx context.Context, set *v1alpha1.StackSet, want map[string]*pulumiv1.Stack) ([]string, error) {
	var conflicts []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		w := want[key]
		cur := &pulumiv1.Stack{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := controllerutil.SetControllerReference(set, w, r.Client.Scheme()); err != nil {
				return nil, fmt.Errorf("failed to own Stack %s: %w", w.Name, err)
			}
			if err := r.Client.Create(ctx, w, client.FieldOwner(FieldManager)); err != nil {
				return nil, fmt.Errorf("failed to create Stack %s: %w", w.Name, err)
			}
			r.Recorder.Eventf(set, nil, corev1.EventTypeNormal, EventStackCreated, eventActionGen, "Created Stack %s for %q", w.Name, w.Annotations[v1alpha1.StackSetElementAnnotation])
			continue
		case err != nil:
			return nil, fmt.Errorf("failed to get Stack %s: %w", w.Name, err)
		case !metav1.IsControlledBy(cur, set) || cur.Labels[v1alpha1.StackSetElementLabel] != key:
			conflicts = append(conflicts, w.Name)
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
			return nil, fmt.Errorf("failed to update Stack %s: %w", next.Name, err)
		}
	}
	return conflicts, nil
}

// removeVanished orphans or deletes the Stacks of elements that are gone, unless more are
// gone than spec.maxRemovals allows: then it removes none and says why.
func (r *Reconciler) removeVanished(ctx context.Context, set *v1alpha1.StackSet, want map[string]*pulumiv1.Stack, stacks []pulumiv1.Stack) (string, error) {
	var gone []*pulumiv1.Stack
	for i := range stacks {
		st := &stacks[i]
		_, wanted := want[st.Labels[v1alpha1.StackSetElementLabel]]
		resting := slices.ContainsFunc(set.Status.Expired, func(x v1alpha1.ExpiredElement) bool {
			return x.Element == st.Annotations[v1alpha1.StackSetElementAnnotation]
		})
		if !wanted && !resting && st.DeletionTimestamp.IsZero() {
			gone = append(gone, st)
		}
	}
	if len(gone) == 0 {
		return "", nil
	}
	bound := defaultMaxRemovals
	if set.Spec.MaxRemovals != nil {
		bound = *set.Spec.MaxRemovals
	}
	limit, err := removalLimit(bound, len(stacks))
	if err != nil {
		return fmt.Sprintf("spec.maxRemovals %q: %v", bound.String(), err), nil
	}
	if len(gone) > limit {
		names := make([]string, 0, len(gone))
		for _, st := range gone {
			names = append(names, st.Name)
		}
		msg := fmt.Sprintf("%d of the set's %d Stacks lost their element at once, more than spec.maxRemovals (%s) allows: none is removed (%s)",
			len(gone), len(stacks), bound.String(), strings.Join(names, ", "))
		r.Recorder.Eventf(set, nil, corev1.EventTypeWarning, EventRemovalsHeld, eventActionGen, "%s", msg)
		return msg, nil
	}
	for _, st := range gone {
		if err := r.remove(ctx, set, st); err != nil {
			return "", err
		}
	}
	return "", nil
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
func (r *Reconciler) remove(ctx context.Context, set *v1alpha1.StackSet, st *pulumiv1.Stack) error {
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
		r.Recorder.Eventf(set, nil, corev1.EventTypeNormal, EventStackDeleted, eventActionGen, "Deleting Stack %s, destroying its resources: %q is gone", st.Name, element)
		return nil
	}
	next := st.DeepCopy()
	next.OwnerReferences = slices.DeleteFunc(next.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == set.UID })
	delete(next.Labels, v1alpha1.StackSetLabel)
	delete(next.Labels, v1alpha1.StackSetElementLabel)
	if err := r.Client.Update(ctx, next, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("failed to orphan Stack %s: %w", st.Name, err)
	}
	r.Recorder.Eventf(set, nil, corev1.EventTypeNormal, EventStackOrphaned, eventActionGen, "Orphaned Stack %s, kept with its resources: %q is gone", st.Name, element)
	return nil
}

// reconcileDelete applies the deletion policy to every Stack of the set: Orphan releases
// them before the set goes (the garbage collector would delete them otherwise), Destroy
// deletes them and waits until they are gone.
func (r *Reconciler) reconcileDelete(ctx context.Context, set *v1alpha1.StackSet, p *patch.Patcher, stacks []pulumiv1.Stack) error {
	if !controllerutil.ContainsFinalizer(set, v1alpha1.StackSetFinalizer) {
		return nil
	}
	for i := range stacks {
		if st := &stacks[i]; st.DeletionTimestamp.IsZero() {
			if err := r.remove(ctx, set, st); err != nil {
				return err
			}
		}
	}
	if set.Spec.DeletionPolicy == v1alpha1.StackSetDestroy && len(stacks) > 0 {
		conditions.MarkReconciling(set, pulumiv1.ReasonDestroyInProgress, fmt.Sprintf("waiting for %d Stack(s) to be destroyed and deleted, e.g. %s", len(stacks), stacks[0].Name))
		return nil
	}
	controllerutil.RemoveFinalizer(set, v1alpha1.StackSetFinalizer)
	return p.Finalizers(ctx, set)
}

// observe counts the set's Stacks and sets its conditions from them.
func observe(set *v1alpha1.StackSet, want map[string]*pulumiv1.Stack, stacks []pulumiv1.Stack) {
	byName := map[string]*pulumiv1.Stack{}
	for i := range stacks {
		byName[stacks[i].Name] = &stacks[i]
	}
	set.Status.Stacks, set.Status.Ready, set.Status.Failing = int32(len(stacks)), 0, 0
	pending := 0
	for _, w := range want {
		st, ok := byName[w.Name]
		switch {
		case !ok:
			pending++
		case st.Generation == st.Status.ObservedGeneration && conditions.IsTrue(st, pulumiv1.ConditionReady):
			set.Status.Ready++
		case conditions.IsTrue(st, pulumiv1.ConditionStalled) || st.Status.LastUpdate != nil && st.Status.LastUpdate.State == pulumiv1.UpdateStateFailed:
			set.Status.Failing++
			pending++
		default:
			pending++
		}
	}
	if pending == 0 {
		conditions.MarkReady(set, v1alpha1.ReasonStacksReady, fmt.Sprintf("%d element(s), each with its Stack Ready", len(want)))
		return
	}
	conditions.MarkReconciling(set, v1alpha1.ReasonStacksProgressing, fmt.Sprintf("%d of %d Stack(s) Ready, %d failing", set.Status.Ready, len(want), set.Status.Failing))
}

// SetupWithManager registers the controller; it watches the Stacks it owns.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("stackset").
		WithOptions(opts).
		For(&v1alpha1.StackSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&pulumiv1.Stack{}).
		Complete(r)
}
