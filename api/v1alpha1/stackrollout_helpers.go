package v1alpha1

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// StackSelector is the selector of the rollout's Stacks: spec.selector, narrowed to the
// Stacks of the template's instances' spec.stack for a rollout of template revisions. A rollout of source
// revisions must name its Stacks: an empty selector is an error, not every Stack.
func (r *StackRollout) StackSelector() (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(&r.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector is invalid: %w", err)
	}
	if t := r.Spec.Template; t != nil {
		req, err := labels.NewRequirement(TemplateLabel, selection.Equals, []string{t.Name})
		if err != nil {
			return nil, fmt.Errorf("spec.template.name is not a label value: %w", err)
		}
		// A composed instance moves as one: its Stack of spec.stack stands for it, and its
		// other Stacks are rendered from the revision that Stack is given.
		main, err := labels.NewRequirement(TemplateStackLabel, selection.DoesNotExist, nil)
		if err != nil {
			return nil, fmt.Errorf("failed to select instances' Stacks: %w", err)
		}
		return sel.Add(*req, *main), nil
	}
	if sel.Empty() {
		return nil, errors.New("spec.selector selects every Stack of the namespace: give it a label to match")
	}
	return sel, nil
}

// Selects reports whether the rollout selects a Stack with these labels. A rollout of
// source revisions with an empty selector selects nothing: it must name its Stacks.
func (r *StackRollout) Selects(set map[string]string) bool {
	sel, err := r.StackSelector()
	return err == nil && sel.Matches(labels.Set(set))
}

// RollsOutTemplate reports whether the rollout rolls out revisions of template, rather
// than of its Stacks' source.
func (r *StackRollout) RollsOutTemplate(template string) bool {
	return r.Spec.Template != nil && r.Spec.Template.Name == template
}

// TemplateRevision is the template revision number rev names, 0 when it names none (nil,
// or a revision of a source).
func TemplateRevision(rev *RolloutRevision) int64 {
	if rev == nil {
		return 0
	}
	n, err := strconv.ParseInt(rev.Revision, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// pace is the wave's entry of spec.waves.pace, nil when there is none.
func (r *StackRollout) pace(wave string) *RolloutWavePace {
	for i := range r.Spec.Waves.Pace {
		if p := &r.Spec.Waves.Pace[i]; p.Wave == wave {
			return p
		}
	}
	return nil
}

// MaxParallelOf is how many of the named wave's size Stacks may be released and unfinished
// at once: its spec.waves.pace entry's maxParallel (0 holds the wave), else
// spec.maxParallel (0, the default, releases the whole wave: size). A percentage is of the
// wave's Stacks, rounded up.
func (r *StackRollout) MaxParallelOf(wave string, size int) int32 {
	if p := r.pace(wave); p != nil && p.MaxParallel != nil {
		return scaled(*p.MaxParallel, size)
	}
	if mp := r.Spec.MaxParallel; mp != nil {
		if n := scaled(*mp, size); n > 0 {
			return n
		}
	}
	return int32(size)
}

// scaled is a count, or a percentage of size rounded up; 0 when it is neither.
func scaled(v intstr.IntOrString, size int) int32 {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, size, true)
	if err != nil || n < 0 {
		return 0
	}
	return int32(min(n, size))
}

// BakeTimeOf is how long the named wave bakes: its spec.waves.pace entry's bakeTime, else
// spec.bakeTime, else 0.
func (r *StackRollout) BakeTimeOf(wave string) time.Duration {
	if p := r.pace(wave); p != nil && p.BakeTime != nil {
		return p.BakeTime.Duration
	}
	if r.Spec.BakeTime != nil {
		return r.Spec.BakeTime.Duration
	}
	return 0
}

// Paused reports whether the rollout is paused, by spec.paused or by a pause request.
func (r *StackRollout) Paused() bool {
	return r.Spec.Paused || r.Status.PauseTime != nil
}

// Opens reports whether the rollout lets the named Stack deploy its target: its wave is
// before the current one, or it is released in the current one, and the rollout is
// neither idle nor aborted.
func (r *StackRollout) Opens(stack string) bool {
	st := &r.Status
	if st.Target == nil || (st.Phase != RolloutProgressing && st.Phase != RolloutHalted) {
		return false
	}
	for i, w := range st.Waves {
		if i > int(st.Wave) {
			return false
		}
		if j := slices.Index(w.Stacks, stack); j >= 0 {
			return i < int(st.Wave) || j < int(w.Released)
		}
	}
	return false
}

// Previews reports whether the rollout asks the named Stack to preview its target (and not
// to deploy it yet): its wave is the current one and is Previewing (spec.gates.preview),
// and the rollout is not paused.
func (r *StackRollout) Previews(stack string) bool {
	st := &r.Status
	if st.Target == nil || st.Phase != RolloutProgressing || int(st.Wave) >= len(st.Waves) || r.Paused() || r.Spec.Gates.Preview == nil {
		return false
	}
	w := &st.Waves[st.Wave]
	return w.State == WavePreviewing && slices.Contains(w.Stacks, stack)
}

// OpeningState is the state a wave of the rollout starts in: Previewing when its Stacks'
// previews are judged first (spec.gates.preview), else Updating.
func (r *StackRollout) OpeningState() WaveState {
	if r.Spec.Gates.Preview != nil {
		return WavePreviewing
	}
	return WaveUpdating
}

// Returns reports whether the rollout lets the named Stack, which ran the aborted revision,
// return to the stable revision: always after an abort by a person; after an automatic one
// (status.pacedAbort), once its wave lets it (waves[].returned), so that the return is
// paced by the wave's maxParallel.
func (r *StackRollout) Returns(stack string) bool {
	st := &r.Status
	if st.Aborted == nil || st.Phase != RolloutAborted || !st.PacedAbort {
		return true
	}
	for _, w := range st.Waves {
		if j := slices.Index(w.Stacks, stack); j >= 0 {
			return j >= int(w.Released) || j < int(w.Returned)
		}
	}
	return true
}

// AutoAbortLimit is how many automatic aborts may follow one another, 0 without autoAbort.
func (r *StackRollout) AutoAbortLimit() int32 {
	switch a := r.Spec.AutoAbort; {
	case a == nil:
		return 0
	case a.Limit < 1:
		return 1
	default:
		return a.Limit
	}
}

// WaveOf names the wave the Stack is in, "" when it is in none (selected after the
// rollout of the target started).
func (r *StackRollout) WaveOf(stack string) string {
	for _, w := range r.Status.Waves {
		if slices.Contains(w.Stacks, stack) {
			return w.Name
		}
	}
	return ""
}

// ChangedFor says which Stacks may deploy another revision in r than in old, an earlier
// version of the rollout: all of them (every, true) when it started, completed or aborted
// a target, moved to another wave or changed its spec; otherwise those of its waves whose
// wave opened (a release of maxParallel more), or that an automatic abort let return, so
// that a rollout's progress costs one reconcile per released Stack, not one per Stack.
func (r *StackRollout) ChangedFor(old *StackRollout) (every bool, stacks []string) {
	o, n := &old.Status, &r.Status
	if old.Generation != r.Generation || o.Phase != n.Phase || o.Wave != n.Wave || old.Paused() != r.Paused() ||
		!sameRevision(o.Target, n.Target) || !sameRevision(o.Stable, n.Stable) || !sameRevision(o.Aborted, n.Aborted) {
		return true, nil
	}
	for _, w := range n.Waves {
		for _, name := range w.Stacks {
			if old.Opens(name) != r.Opens(name) || old.Returns(name) != r.Returns(name) || old.Previews(name) != r.Previews(name) {
				stacks = append(stacks, name)
			}
		}
	}
	return false, stacks
}

func sameRevision(a, b *RolloutRevision) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
