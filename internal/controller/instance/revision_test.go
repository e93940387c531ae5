package instance

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestTargetRevision_Strategy_HoldsUntilOpened(t *testing.T) {
	template := func(strategy v1alpha1.TemplateUpdateStrategyType) *v1alpha1.StackTemplate {
		return &v1alpha1.StackTemplate{
			Spec:   v1alpha1.StackTemplateSpec{UpdateStrategy: v1alpha1.TemplateUpdateStrategy{Type: strategy}},
			Status: v1alpha1.StackTemplateStatus{Revision: 5},
		}
	}
	stack := func(rev, open string) *pulumiv1.Stack {
		st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Labels: map[string]string{}, Annotations: map[string]string{}}}
		if rev != "" {
			st.Labels[v1alpha1.TemplateRevisionLabel] = rev
		}
		if open != "" {
			st.Annotations[v1alpha1.OpenTemplateRevisionAnnotation] = open
		}
		return st
	}
	tests := []struct {
		name     string
		strategy v1alpha1.TemplateUpdateStrategyType
		stack    *pulumiv1.Stack
		want     int64
		wantNote bool
	}{
		{name: "allAtOnceTakesTheLatest", strategy: v1alpha1.UpdateStrategyAllAtOnce, stack: stack("2", ""), want: 5},
		{name: "defaultStrategyTakesTheLatest", stack: stack("2", ""), want: 5},
		{name: "holdKeepsTheStacksRevision", strategy: v1alpha1.UpdateStrategyHold, stack: stack("2", ""), want: 2},
		{name: "holdNewStackStartsAtTheLatest", strategy: v1alpha1.UpdateStrategyHold, stack: &pulumiv1.Stack{}, want: 5},
		{name: "holdStackWithoutRevisionTakesTheLatest", strategy: v1alpha1.UpdateStrategyHold, stack: stack("", ""), want: 5},
		{name: "holdOpenedToLatest", strategy: v1alpha1.UpdateStrategyHold, stack: stack("2", "latest"), want: 5},
		{name: "holdOpenedToANewerRevision", strategy: v1alpha1.UpdateStrategyHold, stack: stack("2", "4"), want: 4},
		{name: "holdOpenedBeyondTheLatestTakesTheLatest", strategy: v1alpha1.UpdateStrategyHold, stack: stack("2", "9"), want: 5},
		{name: "holdNeverGoesBack", strategy: v1alpha1.UpdateStrategyHold, stack: stack("3", "1"), want: 3},
		{name: "holdGarbledAnnotationIsReported", strategy: v1alpha1.UpdateStrategyHold, stack: stack("2", "soon"), want: 2, wantNote: true},
		{name: "holdAtTheLatestStays", strategy: v1alpha1.UpdateStrategyHold, stack: stack("5", ""), want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := targetRevision(template(tt.strategy), tt.stack)
			if got != tt.want || (note != "") != tt.wantNote {
				t.Errorf("targetRevision() = %d, %q; want %d, note %v", got, note, tt.want, tt.wantNote)
			}
		})
	}
}
