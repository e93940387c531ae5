package statustest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// gen is the generation of the Programs the tests mark.
const gen = Generation(3)

// The builders stand for api/conditions' Mark functions in the setters' tables: they must
// say what those write, or every table would compare against a wrong picture.
func TestGeneration_Builders_AreWhatTheMarkFunctionsWrite(t *testing.T) {
	tests := []struct {
		name string
		mark func(o conditions.Object, reason, msg string)
		want []metav1.Condition
	}{
		{name: "Ready", mark: conditions.MarkReady, want: gen.Ready("Done", "done")},
		{name: "Reconciling", mark: conditions.MarkReconciling, want: gen.Reconciling("Done", "done")},
		{name: "Stalled", mark: conditions.MarkStalled, want: gen.Stalled("Done", "done")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Generation: int64(gen)}}
			// Another outcome's conditions, which each Mark replaces.
			p.Status.Conditions = append(gen.Stalled("Earlier", "earlier"), gen.Condition(pulumiv1.ConditionReconciling, metav1.ConditionTrue, "Earlier", "earlier"))
			tt.mark(p, "Done", "done")
			if diff := cmp.Diff(tt.want, p.Status.Conditions, Compare); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// The finalize cases are those conditions.Finalize passes, which every controller's
// finalizeStatus calls.
func TestGeneration_RunFinalize_ConditionsFinalizePasses(t *testing.T) {
	gen.RunFinalize(t, func(conds []metav1.Condition) (int64, []metav1.Condition) {
		p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Generation: int64(gen)}}
		p.Status.ObservedGeneration, p.Status.Conditions = 1, conds
		conditions.Finalize(p, &p.Status.ObservedGeneration)
		return p.Status.ObservedGeneration, p.Status.Conditions
	})
}

// A case's setter runs on a copy of the status before, and what it returns and changes is
// compared with the case's.
func TestRunTransitions_Program_SetterOnACopyOfBefore(t *testing.T) {
	before := pulumiv1.ProgramStatus{ObservedGeneration: 2, Conditions: gen.Reconciling("Working", "working")}
	cases := []Transition[*pulumiv1.Program, pulumiv1.ProgramStatus]{
		{
			Name:   "MarkStalled",
			Before: before,
			Set: func(p *pulumiv1.Program) any {
				conditions.MarkStalled(p, "Stuck", "stuck")
				return len(p.Status.Conditions)
			},
			WantResult: 2,
			Change:     func(st *pulumiv1.ProgramStatus) { st.Conditions = gen.Stalled("Stuck", "stuck") },
		},
		{
			Name:   "Nothing",
			Before: before,
			Set:    func(*pulumiv1.Program) any { return nil },
		},
	}
	RunTransitions(t, cases,
		func(st pulumiv1.ProgramStatus) *pulumiv1.Program {
			return &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Generation: int64(gen)}, Status: st}
		},
		func(p *pulumiv1.Program) pulumiv1.ProgramStatus { return p.Status })
	if diff := cmp.Diff(gen.Reconciling("Working", "working"), before.Conditions); diff != "" {
		t.Errorf("the cases' status before was changed (-want +got):\n%s", diff)
	}
}
