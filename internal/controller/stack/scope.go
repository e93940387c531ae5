package stack

import (
	"context"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	autov1alpha1 "github.com/stackwright/stackwright/api/auto/v1alpha1"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/source"
)

// scope is what one reconcile of a Stack has learned so far. Each phase reads it and adds
// to it; a new feature is a new phase (and, if it must, a new field), not a new parameter.
type scope struct {
	stack   *pulumiv1.Stack
	patcher *patch.Patcher

	// op is the operation the Stack is driven toward: its spec's, or destroy while it is
	// being deleted.
	op v1alpha1.UpdateType
	// resume names the Update that status.currentUpdate records but that does not exist:
	// a crash came between recording it and creating it (or the cache has not caught up).
	resume string
	// artifact is the resolved program.
	artifact source.Artifact
	// inputs are the resolved config, environment and backend.
	inputs *inputs.Inputs
	// key identifies the desired state: op on artifact with inputs.
	key string
	// next is what decideNext chose.
	next decide.Decision
	// driftName names the drift check checkDrift starts.
	driftName string
	// previewName names the approval preview gateChange starts instead of the up.
	previewName string
	// request is the one-off operation runRequested starts instead of the Stack's own.
	request *autov1alpha1.Update
	// plan names the approved preview whose plan the up is held to.
	plan string
	// policyKey identifies the policies that select the Stack ("" for none).
	policyKey string
	// rolloutPreview is set when the Stack deploys the target of a StackRollout with a
	// preview gate: its change is previewed (and the up held to that plan) even when no
	// policy selects it. previewOnly is set while the rollout only asks for that preview
	// (the wave is Previewing): the up waits for the wave to open.
	rolloutPreview, previewOnly bool
	// upToDate is set when the desired state is found deployed.
	upToDate bool
	// pruned is set once the Update history was pruned in this reconcile.
	pruned bool

	// events are the reconcile's events, emitted once the status they announce is written.
	events *kit.Events

	result ctrl.Result
}

// event records an event about the Stack, emitted after the reconcile's status write.
func (s *scope) event(typ, reason, note string, args ...any) {
	s.eventAbout(nil, typ, reason, note, args...)
}

// eventAbout records an event about the Stack related to one of its Updates, which event
// sinks (Flux's notification-controller) use to tell incidents apart and to show the
// revision; it is emitted after the reconcile's status write.
func (s *scope) eventAbout(u *v1alpha1.Update, typ, reason, note string, args ...any) {
	if s.events == nil {
		return
	}
	if u == nil {
		s.events.Add(s.stack, typ, reason, note, args...)
		return
	}
	s.events.AddRelated(s.stack, u, typ, reason, note, args...)
}

// run runs phases in order until one ends the reconcile (see kit.Run).
func (s *scope) run(ctx context.Context, phases ...kit.Phase[*scope]) (ctrl.Result, error) {
	err := kit.Run(ctx, s, phases...)
	if s.result.Priority == nil {
		// Work under way (an Update to observe, a retry, a wait) comes back at normal
		// priority, whichever priority brought the Stack; only a Stack at rest resyncs
		// at low priority (markUpToDate).
		s.result.Priority = ptr.To(0)
	}
	return s.result, err
}

// requeueAfter asks to look again within d; the earliest request wins.
func (s *scope) requeueAfter(d time.Duration) {
	s.result.RequeueAfter = minPositive(s.result.RequeueAfter, d)
}

// progress says what a slow phase is doing and persists it before the phase starts, so a
// user sees it while it lasts. A Stack settled for its generation keeps its conditions.
//
// The write is locked like the intent that may follow it: an unlocked write would adopt
// the newest resourceVersion, and the intent's lock could then no longer tell that this
// reconcile began from a stale copy.
func (s *scope) progress(ctx context.Context, msg string) error {
	markProgress(s.stack, msg)
	return s.patcher.Status(ctx, s.stack, patch.WithOptimisticLock())
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0 || a < b:
		return a
	}
	return b
}
