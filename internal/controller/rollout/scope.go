package rollout

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
)

// scope is what one reconcile of a rollout has learned so far. Each phase reads it and adds
// to it; a new feature is a new phase (and, if it must, a new field), not a new parameter.
type scope struct {
	ro *v1alpha1.StackRollout
	// now is the reconcile's one reading of the clock: every time it records, and every
	// bake it measures, is against it.
	now time.Time
	// list holds the selected Stacks, stacks the same by name. They are the cache's own
	// objects: read them only (retry copies the one it patches).
	list   []pulumiv1.Stack
	stacks map[string]*pulumiv1.Stack
	// offered is the revision to roll out next, nil when none is known yet; deployed the
	// one most Stacks have deployed (learnt only while the rollout has no stable one).
	offered, deployed *v1alpha1.RolloutRevision
	// judge tells how a Stack stands toward a revision: of its source (judge), or of its
	// template (judgeTemplate).
	judge judgeFunc

	requeue kit.Requeue
	// events announce the transitions of this reconcile, once its status is written.
	events *kit.Events
}

// run runs phases in order until one ends the reconcile (see kit.Run).
func (s *scope) run(ctx context.Context, phases ...kit.Phase[*scope]) (ctrl.Result, error) {
	if err := kit.Run(ctx, s, phases...); err != nil {
		return ctrl.Result{}, err
	}
	return s.requeue.Result(), nil
}

// event adds an event about the rollout, emitted once its status is written.
func (s *scope) event(typ, reason, note string, args ...any) {
	s.events.Add(s.ro, typ, reason, note, args...)
}

// isDone reports whether the named Stack of a wave needs nothing more for the target: it
// is Ready at it, or it was deleted or is no longer selected (nothing to wait for).
func (s *scope) isDone(name string) bool {
	stack, ok := s.stacks[name]
	if !ok {
		return true
	}
	v, _, _ := s.judge(stack, s.ro.Status.Target, s.ro.Status.ResumeTime)
	return v == done
}
