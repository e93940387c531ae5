package conditions_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
}

var (
	readyTrue = func(gen int64) metav1.Condition {
		return cond(pulumiv1.ConditionReady, metav1.ConditionTrue, "Done", "done", gen)
	}
	stalledTrue = func(gen int64) metav1.Condition {
		return cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, "Bad", "bad", gen)
	}
)

func TestConditions_Mark_KstatusPairs(t *testing.T) {
	tests := []struct {
		name   string
		before []metav1.Condition
		mark   func(o conditions.Object)
		want   []metav1.Condition
	}{
		{
			name:   "reconciling pairs Ready=False NotReadyInProgress with the same message and clears Stalled",
			before: []metav1.Condition{stalledTrue(1)},
			mark:   func(o conditions.Object) { conditions.MarkReconciling(o, "Waiting", "waiting for x") },
			want: []metav1.Condition{
				cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, "Waiting", "waiting for x", 2),
				cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, "waiting for x", 2),
			},
		},
		{
			name: "stalled pairs Ready=False NotReadyStalled with the same message and clears Reconciling",
			before: []metav1.Condition{
				cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, "Waiting", "w", 2),
			},
			mark: func(o conditions.Object) { conditions.MarkStalled(o, "Bad", "bad") },
			want: []metav1.Condition{
				cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, "Bad", "bad", 2),
				cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyStalled, "bad", 2),
			},
		},
		{
			name: "ready clears Reconciling and Stalled",
			before: []metav1.Condition{
				cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, "Waiting", "w", 2), stalledTrue(2),
			},
			mark: func(o conditions.Object) { conditions.MarkReady(o, "Done", "done") },
			want: []metav1.Condition{readyTrue(2)},
		},
		{
			name:   "progress on an object ready for an older generation shows the work",
			before: []metav1.Condition{readyTrue(1)},
			mark:   func(o conditions.Object) { conditions.MarkProgress(o, "Fetching x") },
			want: []metav1.Condition{
				cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, "Fetching x", 2),
				cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonStackProcessing, "Fetching x", 2),
			},
		},
		{
			name:   "progress on an object ready for its generation leaves it ready",
			before: []metav1.Condition{readyTrue(2)},
			mark:   func(o conditions.Object) { conditions.MarkProgress(o, "Fetching x") },
			want:   []metav1.Condition{readyTrue(2)},
		},
		{
			name:   "progress on an object stalled for its generation leaves it stalled",
			before: []metav1.Condition{stalledTrue(2)},
			mark:   func(o conditions.Object) { conditions.MarkProgress(o, "Fetching x") },
			want:   []metav1.Condition{stalledTrue(2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			s.Status.Conditions = append([]metav1.Condition(nil), tt.before...)
			tt.mark(s)
			if diff := cmp.Diff(tt.want, s.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"),
				cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConditions_Settled_OnlyForTheCurrentGeneration(t *testing.T) {
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{"none", nil, false},
		{"ready for this generation", []metav1.Condition{readyTrue(2)}, true},
		{"stalled for this generation", []metav1.Condition{stalledTrue(2)}, true},
		{"ready for an older generation", []metav1.Condition{readyTrue(1)}, false},
		{"stalled for an older generation", []metav1.Condition{stalledTrue(1)}, false},
		{"not ready", []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionFalse, "X", "x", 2)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			p.Status.Conditions = tt.conds
			if got := conditions.Settled(p); got != tt.want {
				t.Errorf("Settled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConditions_Finalize_ObservesOnlyASettledGeneration(t *testing.T) {
	reconciling := cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, "X", "x", 2)
	tests := []struct {
		name            string
		conds           []metav1.Condition
		wantObserved    int64
		wantReconciling bool
	}{
		{"settled: observed, Reconciling cleared", []metav1.Condition{readyTrue(2), reconciling}, 2, false},
		{"in progress: unchanged", []metav1.Condition{readyTrue(1), reconciling}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			p.Status.Conditions, p.Status.ObservedGeneration = tt.conds, 1
			conditions.Finalize(p, &p.Status.ObservedGeneration)
			if p.Status.ObservedGeneration != tt.wantObserved || conditions.IsTrue(p, pulumiv1.ConditionReconciling) != tt.wantReconciling {
				t.Errorf("observedGeneration %d, Reconciling %v; want %d, %v", p.Status.ObservedGeneration,
					conditions.IsTrue(p, pulumiv1.ConditionReconciling), tt.wantObserved, tt.wantReconciling)
			}
		})
	}
}

func TestConditions_Set_TruncatesLongMessagesOnARuneBoundary(t *testing.T) {
	s := &pulumiv1.Stack{}
	conditions.MarkStalled(s, "Bad", strings.Repeat("é", conditions.MaxMessage))
	for _, c := range s.Status.Conditions {
		if len(c.Message) > conditions.MaxMessage+3 || !strings.HasSuffix(c.Message, "...") || !strings.HasPrefix(c.Message, "é") {
			t.Errorf("%s message has %d bytes; want at most %d ending in ...", c.Type, len(c.Message), conditions.MaxMessage+3)
		}
		if !utf8.ValidString(c.Message) {
			t.Errorf("%s message is not valid UTF-8", c.Type)
		}
	}
}
