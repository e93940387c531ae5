package stackset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/forge"
	"github.com/stackwright/stackwright/internal/source/git"
)

// FieldManager owns what this controller writes: the sets' status and their Stacks.
const FieldManager = "stackwright-stackset-controller"

// Events recorded on StackSets. Each announces a transition, and is emitted once the
// status of the reconcile that made it is written.
const (
	EventStackCreated  = "StackCreated"
	EventStackOrphaned = "StackOrphaned"
	EventStackDeleted  = "StackDeleted"
	EventRemovalsHeld  = "RemovalsHeld"
	eventAction        = "Generate"
)

// +kubebuilder:rbac:groups=stackwright.dev,resources=stacksets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=stackwright.dev,resources=stacksets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=stackwright.dev,resources=stacksets/finalizers,verbs=update
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

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
	// Reader reads what the manager does not cache: Namespaces, and Updates' steps.
	Reader client.Reader
	// NewForge makes a forge's client; nil means forge.New.
	NewForge func(forge.Options) (forge.Client, error)
	// Requests carries reconcile requests from outside the cluster's objects (a forge's
	// pull request webhook); nil when none come.
	Requests <-chan event.GenericEvent

	// listings keep each pullRequests generator's last listing for its interval.
	listings listings
}

// DefaultMaxElements is the default of Reconciler.MaxElements.
const DefaultMaxElements = 500

// Reconcile implements reconcile.Reconciler: get, defer the status patch (and the events
// that announce it), list the set's Stacks, handle deletion (delete.go) and the finalizer,
// then run the phases of phases.go that bring the Stacks to the set's elements.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	set := &v1alpha1.StackSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{set: set, patcher: patch.New(r.Client, set, "StackSet", FieldManager), events: kit.NewEvents(r.Recorder, eventAction)}
	defer func() {
		finalizeStatus(set)
		err := s.patcher.Status(ctx, set)
		if err != nil {
			retErr = errors.Join(retErr, err)
		}
		// After the patch: an event must not announce a state that was never recorded.
		s.events.Flush(err)
		logEnd(ctx, set, start, result)
	}()
	// Listed before anything else, as the deletion needs them too: a list that fails
	// changes nothing, not even the finalizer.
	if err := r.listStacks(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !set.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(set, v1alpha1.StackSetFinalizer) {
		if err := s.patcher.Finalizers(ctx, set); err != nil {
			return ctrl.Result{}, err
		}
	}
	return s.run(ctx,
		r.generate,
		r.checkElements,
		skipExpiredElements,
		renderStacks,
		r.applyStacks,
		r.removeVanished,
		observeStacks,
		r.feedback,
	)
}

// listStacks lists the set's Stacks: those labelled as its and controlled by it.
func (r *Reconciler) listStacks(ctx context.Context, s *scope) error {
	set := s.set
	var list pulumiv1.StackList
	if err := r.Client.List(ctx, &list, client.InNamespace(set.Namespace), client.MatchingLabels{v1alpha1.StackSetLabel: set.Name}); err != nil {
		return fmt.Errorf("failed to list Stacks of StackSet %s: %w", set.Name, err)
	}
	s.stacks = slices.DeleteFunc(list.Items, func(st pulumiv1.Stack) bool { return !metav1.IsControlledBy(&st, set) })
	return nil
}

// logEnd logs one line per reconcile: how long it took, how many elements and Stacks the
// set has, and when it is looked at next.
func logEnd(ctx context.Context, set *v1alpha1.StackSet, start time.Time, res ctrl.Result) {
	ctrl.LoggerFrom(ctx).Info("Reconciled StackSet", "duration", time.Since(start).Round(time.Millisecond),
		"elements", set.Status.Elements, "stacks", set.Status.Stacks, "requeueAfter", res.RequeueAfter)
}
