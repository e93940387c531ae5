package stackset

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/testing/statustest"
)

// testGeneration is the generation of the sets the setters are given; gen builds the
// conditions they write.
const testGeneration = 3

var gen = statustest.Generation(testGeneration)

// stack is a Stack named name at generation 2, which its status observed when observed.
func stack(name string, observed bool, conds ...metav1.Condition) pulumiv1.Stack {
	st := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2}}
	if observed {
		st.Status.ObservedGeneration = 2
	}
	st.Status.Conditions = conds
	return st
}

// wanted is the Stacks of the names, as renderAll keys them.
func wanted(names ...string) map[string]*pulumiv1.Stack {
	out := map[string]*pulumiv1.Stack{}
	for _, n := range names {
		out[elementKey(n)] = &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	return out
}

// Each setter records what it is told, and nothing else: the table gives the status
// before, the setter's call (and what it returns), and what it changes.
func TestStatus_Setters_RecordTheirTransition(t *testing.T) {
	readyStack := gen.Condition(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonProcessingCompleted, "")
	stalledStack := gen.Condition(pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid, "")
	failed := stack("c", true)
	failed.Status.LastUpdate = &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed}
	const heldMsg = "2 of the set's 3 Stacks lost their element at once, more than spec.maxRemovals (1) allows: none is removed (s-a, s-b)"
	tests := []statustest.Transition[*v1alpha1.StackSet, v1alpha1.StackSetStatus]{
		{
			Name:   "MarkGeneratorStalled",
			Before: v1alpha1.StackSetStatus{Conditions: gen.Ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")},
			Set: func(set *v1alpha1.StackSet) any {
				markGeneratorStalled(set, pulumiv1.ReasonSpecInvalid, "spec.generator.gitBranches: include \"[\": syntax error")
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Stalled(pulumiv1.ReasonSpecInvalid, "spec.generator.gitBranches: include \"[\": syntax error")
			},
		},
		{
			Name:   "MarkListingFailedRemovesNothing",
			Before: v1alpha1.StackSetStatus{Elements: 2, Stacks: 2, Ready: 2, Conditions: gen.Ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")},
			Set: func(set *v1alpha1.StackSet) any {
				markListingFailed(set, pulumiv1.ReasonSourceUnavailable, "failed to list https://x: connection refused")
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Reconciling(pulumiv1.ReasonSourceUnavailable, "failed to list https://x: connection refused; nothing is removed while the elements cannot be listed")
			},
		},
		{
			Name: "MarkTooManyElements",
			Set: func(set *v1alpha1.StackSet) any {
				markTooManyElements(set, 3, 2)
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Stalled(v1alpha1.ReasonTooManyElements, "the generator yields 3 elements, more than the 2 a StackSet may have (the manager's --max-stackset-elements): "+
					"narrow its filters, or ask the platform team to raise the cap; no Stack is created or removed until then")
			},
		},
		{
			Name:   "MarkTemplateInvalid",
			Before: v1alpha1.StackSetStatus{Conditions: gen.Reconciling(v1alpha1.ReasonStacksProgressing, "0 of 2 Stack(s) Ready, 0 failing")},
			Set: func(set *v1alpha1.StackSet) any {
				markTemplateInvalid(set, errors.New(`element "a": unknown field "brnch"`))
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Stalled(pulumiv1.ReasonSpecInvalid, `element "a": unknown field "brnch"`)
			},
		},
		{
			Name:   "RecordStacksAllReady",
			Before: v1alpha1.StackSetStatus{Elements: 1, Conditions: gen.Stalled(v1alpha1.ReasonRemovalsHeld, heldMsg)},
			Set: func(set *v1alpha1.StackSet) any {
				recordStacks(set, wanted("a", "b"), []pulumiv1.Stack{stack("a", true, readyStack), stack("b", true, readyStack), stack("gone", true, readyStack)})
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Elements, st.Stacks, st.Ready, st.Failing = 2, 3, 2, 0
				st.Conditions = gen.Ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")
			},
		},
		{
			Name:   "RecordStacksMissingUnobservedAndFailing",
			Before: v1alpha1.StackSetStatus{Elements: 4, Stacks: 4, Ready: 4, Conditions: gen.Ready(v1alpha1.ReasonStacksReady, "4 element(s), each with its Stack Ready")},
			Set: func(set *v1alpha1.StackSet) any {
				recordStacks(set, wanted("a", "b", "c", "d", "e"), []pulumiv1.Stack{
					stack("a", true, readyStack), stack("b", false, readyStack), failed, stack("d", true, stalledStack),
				})
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Elements, st.Stacks, st.Ready, st.Failing = 5, 4, 1, 2
				st.Conditions = gen.Reconciling(v1alpha1.ReasonStacksProgressing, "1 of 5 Stack(s) Ready, 2 failing")
			},
		},
		{
			Name:   "MarkStackConflict",
			Before: v1alpha1.StackSetStatus{Conditions: gen.Reconciling(v1alpha1.ReasonStacksProgressing, "0 of 2 Stack(s) Ready, 0 failing")},
			Set: func(set *v1alpha1.StackSet) any {
				markStackConflict(set, []string{"s-a", "s-b"})
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Stalled(v1alpha1.ReasonStackConflict, "Stacks s-a, s-b exist and are not this set's; they are never taken over: rename them, or delete them")
			},
		},
		{
			Name:   "MarkRemovalsHeld",
			Before: v1alpha1.StackSetStatus{Conditions: gen.Reconciling(v1alpha1.ReasonStacksProgressing, "1 of 1 Stack(s) Ready, 0 failing")},
			Set: func(set *v1alpha1.StackSet) any {
				return markRemovalsHeld(set, heldRemovals{names: []string{"s-b", "s-a"}, of: 3, bound: intstr.FromInt32(1)})
			},
			WantResult: heldMsg,
			Change:     func(st *v1alpha1.StackSetStatus) { st.Conditions = gen.Stalled(v1alpha1.ReasonRemovalsHeld, heldMsg) },
		},
		{
			Name: "MarkRemovalsHeldByABoundThatCannotBeRead",
			Set: func(set *v1alpha1.StackSet) any {
				return markRemovalsHeld(set, heldRemovals{of: 3, bound: intstr.FromString("half"), err: errors.New("invalid value for IntOrString: invalid type: string is not a percentage")})
			},
			WantResult: `spec.maxRemovals "half": invalid value for IntOrString: invalid type: string is not a percentage`,
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Stalled(v1alpha1.ReasonRemovalsHeld, `spec.maxRemovals "half": invalid value for IntOrString: invalid type: string is not a percentage`)
			},
		},
		{
			Name:   "MarkDestroying",
			Before: v1alpha1.StackSetStatus{Elements: 2, Stacks: 2, Ready: 2, Conditions: gen.Ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")},
			Set: func(set *v1alpha1.StackSet) any {
				markDestroying(set, 2, "s-a")
				return nil
			},
			Change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = gen.Reconciling(pulumiv1.ReasonDestroyInProgress, "waiting for 2 Stack(s) to be destroyed and deleted, e.g. s-a")
			},
		},
	}
	statustest.RunTransitions(t, tests,
		func(st v1alpha1.StackSetStatus) *v1alpha1.StackSet {
			return &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: testGeneration}, Status: st}
		},
		func(set *v1alpha1.StackSet) v1alpha1.StackSetStatus { return set.Status })
}

// alreadyHeld reads back the Stacks a RemovalsHeld condition names, so that a set that
// stays held is announced once: the same Stacks in another order are the same hold, any
// other set of Stacks is a new one.
func TestStatus_AlreadyHeld_SameStacksInAnyOrder(t *testing.T) {
	held := func(names ...string) []metav1.Condition {
		set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Generation: testGeneration}}
		markRemovalsHeld(set, heldRemovals{names: names, of: 9, bound: intstr.FromInt32(1)})
		return set.Status.Conditions
	}
	// long names a hold whose message the condition's size bound cuts short.
	var long []string
	for i := range 100 {
		long = append(long, fmt.Sprintf("set-%s-%02d", strings.Repeat("x", 40), i))
	}
	tests := []struct {
		name       string
		conditions []metav1.Condition
		names      []string
		want       bool
	}{
		{name: "NothingHeld", conditions: gen.Ready(v1alpha1.ReasonStacksReady, "3 element(s), each with its Stack Ready"), names: []string{"s-a"}},
		{name: "StalledForAnotherReason", conditions: gen.Stalled(v1alpha1.ReasonStackConflict, "Stacks s-a exist and are not this set's"), names: []string{"s-a"}},
		{name: "BoundThatCannotBeRead", conditions: gen.Stalled(v1alpha1.ReasonRemovalsHeld, `spec.maxRemovals "half": invalid`), names: []string{"s-a"}},
		{name: "SameStacks", conditions: held("s-a", "s-b"), names: []string{"s-a", "s-b"}, want: true},
		{name: "SameStacksInAnotherOrder", conditions: held("s-b", "s-a"), names: []string{"s-a", "s-b"}, want: true},
		{name: "OneMore", conditions: held("s-a", "s-b"), names: []string{"s-a", "s-b", "s-c"}},
		{name: "OneFewer", conditions: held("s-a", "s-b", "s-c"), names: []string{"s-a", "s-b"}},
		{name: "Another", conditions: held("s-a", "s-b"), names: []string{"s-a", "s-c"}},
		{name: "CutShortAndTheSame", conditions: held(long...), names: long, want: true},
		{name: "CutShortAndOneShownIsGone", conditions: held(long...), names: long[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Generation: testGeneration}, Status: v1alpha1.StackSetStatus{Conditions: tt.conditions}}
			if got := alreadyHeld(set, tt.names); got != tt.want {
				t.Errorf("alreadyHeld() = %v; want %v", got, tt.want)
			}
		})
	}
	if msg := held(long...)[0].Message; len(msg) <= conditions.MaxMessage {
		t.Fatalf("the long hold's message (%d bytes) is not cut short: the CutShort cases test nothing", len(msg))
	}
}

// The generation counts as observed only once the set is Ready or Stalled for it, and
// Reconciling is then cleared.
func TestStatus_FinalizeStatus_ObservesOnlyASettledGeneration(t *testing.T) {
	gen.RunFinalize(t, func(conds []metav1.Condition) (int64, []metav1.Condition) {
		set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Generation: testGeneration}}
		set.Status.ObservedGeneration, set.Status.Conditions = 1, conds
		finalizeStatus(set)
		return set.Status.ObservedGeneration, set.Status.Conditions
	})
}
