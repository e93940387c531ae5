package stackset

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// testGeneration is the generation of the sets the setters are given.
const testGeneration = 3

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: testGeneration}
}

func ready(reason, msg string) []metav1.Condition {
	return []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, reason, msg)}
}

func reconciling(reason, msg string) []metav1.Condition {
	return []metav1.Condition{
		cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, reason, msg),
		cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, msg),
	}
}

func stalled(reason, msg string) []metav1.Condition {
	return []metav1.Condition{
		cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, reason, msg),
		cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyStalled, msg),
	}
}

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
	readyStack := cond(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonProcessingCompleted, "")
	stalledStack := cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid, "")
	failed := stack("c", true)
	failed.Status.LastUpdate = &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed}
	const heldMsg = "2 of the set's 3 Stacks lost their element at once, more than spec.maxRemovals (1) allows: none is removed (s-a, s-b)"
	tests := []struct {
		name       string
		before     v1alpha1.StackSetStatus
		set        func(set *v1alpha1.StackSet) any
		wantResult any
		change     func(st *v1alpha1.StackSetStatus)
	}{
		{
			name:   "MarkGeneratorStalled",
			before: v1alpha1.StackSetStatus{Conditions: ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")},
			set: func(set *v1alpha1.StackSet) any {
				markGeneratorStalled(set, pulumiv1.ReasonSpecInvalid, "spec.generator.gitBranches: include \"[\": syntax error")
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = stalled(pulumiv1.ReasonSpecInvalid, "spec.generator.gitBranches: include \"[\": syntax error")
			},
		},
		{
			name:   "MarkListingFailedRemovesNothing",
			before: v1alpha1.StackSetStatus{Elements: 2, Stacks: 2, Ready: 2, Conditions: ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")},
			set: func(set *v1alpha1.StackSet) any {
				markListingFailed(set, pulumiv1.ReasonSourceUnavailable, "failed to list https://x: connection refused")
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = reconciling(pulumiv1.ReasonSourceUnavailable, "failed to list https://x: connection refused; nothing is removed while the elements cannot be listed")
			},
		},
		{
			name: "MarkTooManyElements",
			set: func(set *v1alpha1.StackSet) any {
				markTooManyElements(set, 3, 2)
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = stalled(v1alpha1.ReasonTooManyElements, "the generator yields 3 elements, more than the 2 a StackSet may have (the manager's --max-stackset-elements): "+
					"narrow its filters, or ask the platform team to raise the cap; no Stack is created or removed until then")
			},
		},
		{
			name:   "MarkTemplateInvalid",
			before: v1alpha1.StackSetStatus{Conditions: reconciling(v1alpha1.ReasonStacksProgressing, "0 of 2 Stack(s) Ready, 0 failing")},
			set: func(set *v1alpha1.StackSet) any {
				markTemplateInvalid(set, errors.New(`element "a": unknown field "brnch"`))
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = stalled(pulumiv1.ReasonSpecInvalid, `element "a": unknown field "brnch"`)
			},
		},
		{
			name:   "RecordStacksAllReady",
			before: v1alpha1.StackSetStatus{Elements: 1, Conditions: stalled(v1alpha1.ReasonRemovalsHeld, heldMsg)},
			set: func(set *v1alpha1.StackSet) any {
				recordStacks(set, wanted("a", "b"), []pulumiv1.Stack{stack("a", true, readyStack), stack("b", true, readyStack), stack("gone", true, readyStack)})
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Elements, st.Stacks, st.Ready, st.Failing = 2, 3, 2, 0
				st.Conditions = ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")
			},
		},
		{
			name:   "RecordStacksMissingUnobservedAndFailing",
			before: v1alpha1.StackSetStatus{Elements: 4, Stacks: 4, Ready: 4, Conditions: ready(v1alpha1.ReasonStacksReady, "4 element(s), each with its Stack Ready")},
			set: func(set *v1alpha1.StackSet) any {
				recordStacks(set, wanted("a", "b", "c", "d", "e"), []pulumiv1.Stack{
					stack("a", true, readyStack), stack("b", false, readyStack), failed, stack("d", true, stalledStack),
				})
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Elements, st.Stacks, st.Ready, st.Failing = 5, 4, 1, 2
				st.Conditions = reconciling(v1alpha1.ReasonStacksProgressing, "1 of 5 Stack(s) Ready, 2 failing")
			},
		},
		{
			name:   "MarkStackConflict",
			before: v1alpha1.StackSetStatus{Conditions: reconciling(v1alpha1.ReasonStacksProgressing, "0 of 2 Stack(s) Ready, 0 failing")},
			set: func(set *v1alpha1.StackSet) any {
				markStackConflict(set, []string{"s-a", "s-b"})
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = stalled(v1alpha1.ReasonStackConflict, "Stacks s-a, s-b exist and are not this set's; they are never taken over: rename them, or delete them")
			},
		},
		{
			name:   "MarkRemovalsHeld",
			before: v1alpha1.StackSetStatus{Conditions: reconciling(v1alpha1.ReasonStacksProgressing, "1 of 1 Stack(s) Ready, 0 failing")},
			set: func(set *v1alpha1.StackSet) any {
				return markRemovalsHeld(set, heldRemovals{names: []string{"s-b", "s-a"}, of: 3, bound: intstr.FromInt32(1)})
			},
			wantResult: heldMsg,
			change:     func(st *v1alpha1.StackSetStatus) { st.Conditions = stalled(v1alpha1.ReasonRemovalsHeld, heldMsg) },
		},
		{
			name: "MarkRemovalsHeldByABoundThatCannotBeRead",
			set: func(set *v1alpha1.StackSet) any {
				return markRemovalsHeld(set, heldRemovals{of: 3, bound: intstr.FromString("half"), err: errors.New("invalid value for IntOrString: invalid type: string is not a percentage")})
			},
			wantResult: `spec.maxRemovals "half": invalid value for IntOrString: invalid type: string is not a percentage`,
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = stalled(v1alpha1.ReasonRemovalsHeld, `spec.maxRemovals "half": invalid value for IntOrString: invalid type: string is not a percentage`)
			},
		},
		{
			name:   "MarkDestroying",
			before: v1alpha1.StackSetStatus{Elements: 2, Stacks: 2, Ready: 2, Conditions: ready(v1alpha1.ReasonStacksReady, "2 element(s), each with its Stack Ready")},
			set: func(set *v1alpha1.StackSet) any {
				markDestroying(set, 2, "s-a")
				return nil
			},
			change: func(st *v1alpha1.StackSetStatus) {
				st.Conditions = reconciling(pulumiv1.ReasonDestroyInProgress, "waiting for 2 Stack(s) to be destroyed and deleted, e.g. s-a")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: testGeneration}, Status: *tt.before.DeepCopy()}
			want := tt.before.DeepCopy()
			if tt.change != nil {
				tt.change(want)
			}
			got := tt.set(set)
			if diff := cmp.Diff(tt.wantResult, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(*want, set.Status, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"), cmpopts.EquateEmpty(),
				cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
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
		{name: "NothingHeld", conditions: ready(v1alpha1.ReasonStacksReady, "3 element(s), each with its Stack Ready"), names: []string{"s-a"}},
		{name: "StalledForAnotherReason", conditions: stalled(v1alpha1.ReasonStackConflict, "Stacks s-a exist and are not this set's"), names: []string{"s-a"}},
		{name: "BoundThatCannotBeRead", conditions: stalled(v1alpha1.ReasonRemovalsHeld, `spec.maxRemovals "half": invalid`), names: []string{"s-a"}},
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
	tests := []struct {
		name         string
		conditions   []metav1.Condition
		wantObserved int64
		wantTypes    []string
	}{
		{name: "Ready", conditions: ready(v1alpha1.ReasonStacksReady, "done"), wantObserved: testGeneration, wantTypes: []string{pulumiv1.ConditionReady}},
		{name: "Stalled", conditions: stalled(v1alpha1.ReasonRemovalsHeld, "held"), wantObserved: testGeneration, wantTypes: []string{pulumiv1.ConditionStalled, pulumiv1.ConditionReady}},
		{name: "Reconciling", conditions: reconciling(v1alpha1.ReasonStacksProgressing, "progressing"), wantObserved: 1, wantTypes: []string{pulumiv1.ConditionReconciling, pulumiv1.ConditionReady}},
		{
			name:         "ReadyForAnEarlierGeneration",
			conditions:   []metav1.Condition{{Type: pulumiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonStacksReady, ObservedGeneration: testGeneration - 1}},
			wantObserved: 1, wantTypes: []string{pulumiv1.ConditionReady},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.StackSet{ObjectMeta: metav1.ObjectMeta{Generation: testGeneration}}
			set.Status.ObservedGeneration, set.Status.Conditions = 1, tt.conditions
			finalizeStatus(set)
			var types []string
			for _, c := range set.Status.Conditions {
				types = append(types, c.Type)
			}
			if set.Status.ObservedGeneration != tt.wantObserved || !cmp.Equal(tt.wantTypes, types) {
				t.Errorf("observedGeneration, conditions = %d, %v; want %d, %v", set.Status.ObservedGeneration, types, tt.wantObserved, tt.wantTypes)
			}
		})
	}
}
