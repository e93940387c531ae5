package statustest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// Generation builds the conditions a setter writes on an object of this generation.
type Generation int64

// Condition is one condition of the generation.
func (g Generation) Condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: int64(g)}
}

// Ready is what conditions.MarkReady writes.
func (g Generation) Ready(reason, msg string) []metav1.Condition {
	return []metav1.Condition{g.Condition(pulumiv1.ConditionReady, metav1.ConditionTrue, reason, msg)}
}

// Reconciling is what conditions.MarkReconciling writes.
func (g Generation) Reconciling(reason, msg string) []metav1.Condition {
	return []metav1.Condition{
		g.Condition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, reason, msg),
		g.Condition(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, msg),
	}
}

// Stalled is what conditions.MarkStalled writes.
func (g Generation) Stalled(reason, msg string) []metav1.Condition {
	return []metav1.Condition{
		g.Condition(pulumiv1.ConditionStalled, metav1.ConditionTrue, reason, msg),
		g.Condition(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyStalled, msg),
	}
}

// Compare compares conditions as the setters promise them: LastTransitionTime is the
// clock's, and the order of the conditions is none.
var Compare = cmp.Options{
	cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"),
	cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type }),
}

// Transition is a case of a setter table test: the status before, the setter's call on an
// object O with that status (and what the call returns; nil when nothing), and what the
// call changes in the status S (nil: nothing).
type Transition[O, S any] struct {
	Name       string
	Before     S
	Set        func(obj O) any
	WantResult any
	Change     func(st *S)
}

// RunTransitions runs each case as a subtest: its setter, called on the object newObject
// makes with a copy of Before as its status, must return WantResult and leave status(obj)
// as Before changed by Change (under Compare, nil and empty alike).
func RunTransitions[O, S any, PS interface {
	*S
	DeepCopy() *S
}](t *testing.T, cases []Transition[O, S], newObject func(status S) O, status func(obj O) S) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			obj := newObject(*PS(&tc.Before).DeepCopy())
			want := PS(&tc.Before).DeepCopy()
			if tc.Change != nil {
				tc.Change(want)
			}
			got := tc.Set(obj)
			if diff := cmp.Diff(tc.WantResult, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(*want, status(obj), Compare, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// RunFinalize runs the cases of a finalize step (conditions.Finalize, which every
// controller's finalizeStatus calls): the generation g counts as observed only once the
// object is Ready or Stalled for it, and Reconciling is then cleared. finalize is given the
// conditions of an object of generation g whose status observed generation 1; it finalizes
// the status and returns its observed generation and conditions.
func (g Generation) RunFinalize(t *testing.T, finalize func(conditions []metav1.Condition) (observed int64, after []metav1.Condition)) {
	t.Helper()
	tests := []struct {
		name         string
		conditions   []metav1.Condition
		wantObserved int64
		wantTypes    []string
	}{
		{name: "Ready", conditions: g.Ready("Done", "done"), wantObserved: int64(g), wantTypes: []string{pulumiv1.ConditionReady}},
		{name: "Stalled", conditions: g.Stalled("Stuck", "stuck"), wantObserved: int64(g), wantTypes: []string{pulumiv1.ConditionStalled, pulumiv1.ConditionReady}},
		{name: "Reconciling", conditions: g.Reconciling("Working", "working"), wantObserved: 1, wantTypes: []string{pulumiv1.ConditionReconciling, pulumiv1.ConditionReady}},
		{name: "ReadyForAnEarlierGeneration", conditions: (g - 1).Ready("Done", "done"), wantObserved: 1, wantTypes: []string{pulumiv1.ConditionReady}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed, after := finalize(tt.conditions)
			var types []string
			for _, c := range after {
				types = append(types, c.Type)
			}
			if observed != tt.wantObserved || !cmp.Equal(tt.wantTypes, types) {
				t.Errorf("observedGeneration, conditions = %d, %v; want %d, %v", observed, types, tt.wantObserved, tt.wantTypes)
			}
		})
	}
}
