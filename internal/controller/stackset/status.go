package stackset

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The setters below are pure functions of the set they are given and the facts passed in:
// the phases decide which one applies, and the deferred patch persists the result. They
// are the only writers of the set's conditions.

// markGeneratorStalled stalls a set whose generator cannot list its elements until a
// person changes something (its spec, a Secret); reason and msg are the fault's.
func markGeneratorStalled(set *v1alpha1.StackSet, reason, msg string) {
	conditions.MarkStalled(set, reason, msg)
}

// markListingFailed records that the elements cannot be listed now, for a reason that
// clears by itself.
func markListingFailed(set *v1alpha1.StackSet, reason, msg string) {
	conditions.MarkReconciling(set, reason, msg+"; nothing is removed while the elements cannot be listed")
}

// markTooManyElements stalls a set whose generator yields n elements, more than limit.
func markTooManyElements(set *v1alpha1.StackSet, n, limit int) {
	conditions.MarkStalled(set, v1alpha1.ReasonTooManyElements, fmt.Sprintf(
		"the generator yields %d elements, more than the %d a StackSet may have (the manager's --max-stackset-elements): narrow its filters, "+
			"or ask the platform team to raise the cap; no Stack is created or removed until then", n, limit))
}

// markTemplateInvalid stalls a set whose template does not render for an element.
func markTemplateInvalid(set *v1alpha1.StackSet, err error) {
	conditions.MarkStalled(set, pulumiv1.ReasonSpecInvalid, err.Error())
}

// recordStacks counts the elements (want, by key) and the set's Stacks (stacks), and says
// how far those are: Ready once every element's Stack is Ready for its generation.
func recordStacks(set *v1alpha1.StackSet, want map[string]*pulumiv1.Stack, stacks []pulumiv1.Stack) {
	byName := map[string]*pulumiv1.Stack{}
	for i := range stacks {
		byName[stacks[i].Name] = &stacks[i]
	}
	st := &set.Status
	st.Elements = int32(len(want))
	st.Stacks, st.Ready, st.Failing = int32(len(stacks)), 0, 0
	pending := 0
	for _, w := range want {
		stack, ok := byName[w.Name]
		switch {
		case !ok:
			pending++
		case stack.Generation == stack.Status.ObservedGeneration && conditions.IsTrue(stack, pulumiv1.ConditionReady):
			st.Ready++
		case conditions.IsTrue(stack, pulumiv1.ConditionStalled) || stack.Status.LastUpdate != nil && stack.Status.LastUpdate.State == pulumiv1.UpdateStateFailed:
			st.Failing++
			pending++
		default:
			pending++
		}
	}
	if pending == 0 {
		conditions.MarkReady(set, v1alpha1.ReasonStacksReady, fmt.Sprintf("%d element(s), each with its Stack Ready", len(want)))
		return
	}
	conditions.MarkReconciling(set, v1alpha1.ReasonStacksProgressing, fmt.Sprintf("%d of %d Stack(s) Ready, %d failing", st.Ready, len(want), st.Failing))
}

// markStackConflict stalls a set some of whose Stacks' names are taken by Stacks that are
// not its own.
func markStackConflict(set *v1alpha1.StackSet, names []string) {
	conditions.MarkStalled(set, v1alpha1.ReasonStackConflict, fmt.Sprintf(
		"Stacks %s exist and are not this set's; they are never taken over: rename them, or delete them", strings.Join(names, ", ")))
}

// heldList opens the list of held Stacks in the RemovalsHeld message; alreadyHeld reads it
// back.
const heldList = "none is removed ("

// markRemovalsHeld stalls a set that keeps the Stacks of vanished elements, and returns
// the message it recorded.
func markRemovalsHeld(set *v1alpha1.StackSet, h heldRemovals) string {
	msg := fmt.Sprintf("spec.maxRemovals %q: %v", h.bound.String(), h.err)
	if h.err == nil {
		msg = fmt.Sprintf("%d of the set's %d Stacks lost their element at once, more than spec.maxRemovals (%s) allows: %s%s)",
			len(h.names), h.of, h.bound.String(), heldList, strings.Join(slices.Sorted(slices.Values(h.names)), ", "))
	}
	conditions.MarkStalled(set, v1alpha1.ReasonRemovalsHeld, msg)
	return msg
}

// alreadyHeld reports whether the set's status holds the removal of the Stacks names, and
// no other: its Stalled condition, RemovalsHeld, names them, in any order. A list the
// condition's size bound cut short is read as far as it goes, and counts as the same while
// every name it shows is still held.
func alreadyHeld(set *v1alpha1.StackSet, names []string) bool {
	c := conditions.Get(set, pulumiv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRemovalsHeld {
		return false
	}
	_, list, ok := strings.Cut(c.Message, heldList)
	if !ok {
		return false
	}
	if whole, ok := strings.CutSuffix(list, ")"); ok {
		held := strings.Split(whole, ", ")
		return len(held) == len(names) && !slices.ContainsFunc(held, func(n string) bool { return !slices.Contains(names, n) })
	}
	// Cut short: the last name may be cut too.
	held := strings.Split(list, ", ")
	held = held[:len(held)-1]
	return len(held) > 0 && len(held) < len(names) && !slices.ContainsFunc(held, func(n string) bool { return !slices.Contains(names, n) })
}

// markDestroying records that a set being deleted with the Destroy policy waits for its n
// Stacks, first among them, to be destroyed and deleted.
func markDestroying(set *v1alpha1.StackSet, n int, first string) {
	conditions.MarkReconciling(set, pulumiv1.ReasonDestroyInProgress, fmt.Sprintf("waiting for %d Stack(s) to be destroyed and deleted, e.g. %s", n, first))
}

// finalizeStatus records the generation as observed once the set is Ready or Stalled for
// it, and clears Reconciling then.
func finalizeStatus(set *v1alpha1.StackSet) {
	conditions.Finalize(set, &set.Status.ObservedGeneration)
}
