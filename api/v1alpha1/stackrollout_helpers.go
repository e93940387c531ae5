package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selects reports whether the rollout's selector selects a Stack with these labels. An
// empty selector selects nothing: a rollout must name its Stacks.
func (r *StackRollout) Selects(set map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(&r.Spec.Selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(set))
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
