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

func TestRolloutRevision_Status_LikeTheStackControllersPin(t *testing.T) {
	rev := func(n string) *v1alpha1.RolloutRevision {
		return &v1alpha1.RolloutRevision{Revision: n, Digest: "sha256:" + n}
	}
	waves := []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a"}, Released: 1}, {Name: "1", Stacks: []string{"b"}}}
	progressing := v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Stable: rev("2"), Target: rev("3"), Waves: waves}
	tests := []struct {
		name   string
		status v1alpha1.StackRolloutStatus
		stack  string
		cur    int64
		want   int64
	}{
		{name: "openWaveGetsTheTarget", status: progressing, stack: "a", cur: 2, want: 3},
		{name: "closedWaveKeepsItsRevision", status: progressing, stack: "b", cur: 2, want: 2},
		{name: "closedWaveAheadKeepsItsRevision", status: progressing, stack: "b", cur: 3, want: 3},
		{name: "newStackInNoWaveGetsTheStable", status: progressing, stack: "c", cur: 0, want: 2},
		{name: "abortedReturnsToTheStable", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), Waves: waves}, stack: "a", cur: 3, want: 2},
		{name: "automaticAbortReturnsWhenItsWaveLetsIt", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), PacedAbort: true,
			Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a", "c"}, Released: 2, Returned: 1}}}, stack: "a", cur: 3, want: 2},
		{name: "automaticAbortHoldsUntilItsWaveLetsIt", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), PacedAbort: true,
			Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a", "c"}, Released: 2, Returned: 1}}}, stack: "c", cur: 3, want: 3},
		{name: "idleConvergesOnTheStable", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: rev("3"), Waves: waves}, stack: "b", cur: 2, want: 3},
		{name: "noStatusYetKeepsItsRevision", stack: "a", cur: 2, want: 2},
		{name: "noStatusYetNewStackGetsTheLatest", stack: "a", cur: 0, want: 5},
		{name: "firstRolloutWithoutStableNewStackGetsTheLatest", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Target: rev("5"), Waves: waves}, stack: "c", cur: 0, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{Status: tt.status}
			if got := rolloutRevision(ro, tt.stack, tt.cur, 5); got != tt.want {
				t.Errorf("rolloutRevision() = %d, want %d", got, tt.want)
			}
		})
	}
}
