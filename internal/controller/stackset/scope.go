package stackset

import (
	"context"

	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/kit"
	"github.com/stackwright/stackwright/internal/controller/patch"
	"github.com/stackwright/stackwright/internal/forge"
)

// scope is what one reconcile of a StackSet has learned so far. Each phase reads it and
// adds to it; a new feature is a new phase (and, if it must, a new field), not a new
// parameter.
type scope struct {
	set     *v1alpha1.StackSet
	patcher *patch.Patcher

	// stacks are the set's Stacks as listed when the reconcile began, those being
	// deleted included.
	stacks []pulumiv1.Stack
	// elems are the generator's elements, less those whose Stack expired.
	elems []element
	// want are the Stacks the elements render to, by element key.
	want map[string]*pulumiv1.Stack
	// conflicts name the wanted Stacks that exist and are not the set's.
	conflicts []string
	// held says which Stacks of vanished elements are kept, and why; nil when none is.
	held *heldRemovals
	// forge is the pullRequests generator's forge, and prs the open pull requests it
	// listed, by element (the number).
	forge forge.Client
	prs   map[string]forge.PullRequest

	requeue kit.Requeue
	// events announce the transitions of this reconcile, once its status is written.
	events *kit.Events
}

// heldRemovals are the Stacks whose element is gone but which are kept: more are gone than
// spec.maxRemovals allows, or the bound cannot be read.
type heldRemovals struct {
	// names are the held Stacks, in the order listed.
	names []string
	// of counts the set's Stacks.
	of    int
	bound intstr.IntOrString
	// err says why bound cannot be read; names is empty then.
	err error
}

// run runs phases in order until one ends the reconcile (see kit.Run).
func (s *scope) run(ctx context.Context, phases ...kit.Phase[*scope]) (ctrl.Result, error) {
	if err := kit.Run(ctx, s, phases...); err != nil {
		return ctrl.Result{}, err
	}
	return s.requeue.Result(), nil
}

// event adds an event about the set, emitted once its status is written.
func (s *scope) event(typ, reason, note string, args ...any) {
	s.events.Add(s.set, typ, reason, note, args...)
}
