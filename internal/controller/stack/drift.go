package stack

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
	"github.com/stackwright/stackwright/internal/engine"
	"github.com/stackwright/stackwright/internal/metrics"
)

// Drift check events and the DriftDetected reason of a check that could not run.
const (
	EventDriftDetected     = "DriftDetected"
	EventDriftCheckFailed  = "DriftCheckFailed"
	reasonDriftCheckFailed = "DriftCheckFailed"
)

// nextDriftCheck is when the Stack's next scheduled drift check is due, counted from the
// last check (or, before the first, from the last finished update, or the Stack's
// creation); ok is false when it has no schedule that parses. Review stalls a Stack with an
// invalid schedule before this is asked.
func nextDriftCheck(stack *pulumiv1.Stack) (next time.Time, ok bool) {
	d := stack.Spec.DriftDetection
	if d == nil {
		return time.Time{}, false
	}
	from := stack.CreationTimestamp.Time
	if lu := stack.Status.LastUpdate; lu != nil && lu.LastResyncTime != nil {
		from = lu.LastResyncTime.Time
	}
	if st := stack.Status.DriftDetection; st != nil && st.LastCheck != nil {
		from = st.LastCheck.Time
	}
	for _, sc := range d.Schedules {
		s, err := sc.Parse()
		if err != nil {
			continue
		}
		if n := s.Next(from); !ok || n.Before(next) {
			next, ok = n, true
		}
	}
	return next, ok
}

// autoRemediate reports whether a schedule asks for drift to be remediated.
func autoRemediate(spec *pulumiv1.StackSpec) bool {
	if spec.DriftDetection == nil {
		return false
	}
	for _, sc := range spec.DriftDetection.Schedules {
		if sc.AutoRemediate {
			return true
		}
	}
	return false
}

// checkDrift starts a scheduled drift check on a Stack whose desired state is deployed and
// that has nothing else to do, or asks to be looked at again when the next one is due.
// Preview Stacks deploy nothing, so they have nothing to drift from.
func (r *Reconciler) checkDrift(ctx context.Context, s *scope) (bool, error) {
	if s.op != v1alpha1.UpdateTypeUp || s.next.Action != decide.Idle {
		return true, nil
	}
	next, ok := nextDriftCheck(s.stack)
	if !ok {
		return true, nil
	}
	now := r.Now()
	if wait := next.Sub(now); wait > 0 {
		s.requeueAfter(wait)
		return true, nil
	}
	s.op = v1alpha1.UpdateTypeDrift
	s.next = decide.Decision{Action: decide.Run, Attempt: 1, Why: "scheduled drift check"}
	s.driftName = driftUpdateName(s.stack.Name, now)
	return r.startUpdate(ctx, s)
}

// driftUpdateName names a drift check after its Stack and the minute it started: a
// schedule fires at most once a minute.
func driftUpdateName(stack string, at time.Time) string {
	return shortName(stack, "-drift-"+at.UTC().Format("20060102-1504"))
}

// recordDriftStart records a drift check in flight. It leaves the retry bookkeeping of the
// Stack's own updates alone: a check is not an attempt at the desired state.
func recordDriftStart(s *pulumiv1.Stack, u *v1alpha1.Update) {
	s.Status.CurrentUpdate = &pulumiv1.CurrentStackUpdate{
		Generation: s.Generation, Name: u.Name, Commit: u.Spec.Revision, Type: string(v1alpha1.UpdateTypeDrift),
	}
}

// observeDrift handles a drift check recorded in status.currentUpdate. A check in flight
// leaves the Stack's conditions as they are (it is Ready while its resources are looked
// at); one recorded but never created is dropped, since the next slot checks anyway.
func (r *Reconciler) observeDrift(ctx context.Context, s *scope, u *v1alpha1.Update) (bool, error) {
	switch {
	case u == nil:
		s.stack.Status.CurrentUpdate = nil
		return true, nil
	case !u.Status.Finished():
		return false, nil
	}
	found := recordDrift(s.stack, u, r.Now())
	result := metrics.DriftNone
	switch {
	case u.Status.Phase != v1alpha1.UpdatePhaseSucceeded:
		result = metrics.DriftFailed
		s.eventAbout(u, corev1.EventTypeWarning, EventDriftCheckFailed, "drift check failed (Update %s): %s", u.Name, u.Status.Message)
	case found:
		result = metrics.DriftFound
		s.eventAbout(u, corev1.EventTypeWarning, EventDriftDetected, "%s (Update %s)", u.Status.Message, u.Name)
	}
	metrics.ObserveDriftCheck(s.stack.Namespace, s.stack.Name, result)
	// Checks are Updates too: without this, a frequent schedule would pile them up until
	// the next deployment prunes.
	r.prune(ctx, s)
	return true, nil
}

// hasChanges reports whether an Update's change counts (a drift check's, a preview's) hold
// anything but unchanged resources, as the engine judges them.
func hasChanges(changes map[string]int64) bool {
	c := make(map[string]int, len(changes))
	for op, n := range changes {
		c[op] = int(n)
	}
	return engine.HasChanges(c)
}
