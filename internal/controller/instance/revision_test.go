package instance

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
	// previewing is at wave 1, whose Stacks preview the target for spec.gates.preview.
	previewing := v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Stable: rev("2"), Target: rev("3"), Wave: 1,
		Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a"}, Released: 1, State: v1alpha1.WaveDone}, {Name: "1", Stacks: []string{"b", "c"}, State: v1alpha1.WavePreviewing}}}
	previewed, halted := *previewing.DeepCopy(), *previewing.DeepCopy()
	previewed.Waves[1].State, previewed.Waves[1].Released = v1alpha1.WaveUpdating, 1
	halted.Phase, halted.Waves[1].State = v1alpha1.RolloutHalted, v1alpha1.WaveFailed
	gated := v1alpha1.StackRolloutSpec{Gates: v1alpha1.RolloutGates{Preview: &v1alpha1.RolloutPreviewGate{NoDeletes: true}}}
	pausedGated := *gated.DeepCopy()
	pausedGated.Paused = true
	tests := []struct {
		name   string
		spec   v1alpha1.StackRolloutSpec
		status v1alpha1.StackRolloutStatus
		stack  string
		cur    int64
		// previewing is the revision the Stack previews now.
		previewing int64
		want       revisionChoice
	}{
		{name: "openWaveGetsTheTarget", status: progressing, stack: "a", cur: 2, want: revisionChoice{rev: 3}},
		{name: "closedWaveKeepsItsRevision", status: progressing, stack: "b", cur: 2, want: revisionChoice{rev: 2}},
		{name: "closedWaveAheadKeepsItsRevision", status: progressing, stack: "b", cur: 3, want: revisionChoice{rev: 3}},
		{name: "newStackInNoWaveGetsTheStable", status: progressing, stack: "c", cur: 0, want: revisionChoice{rev: 2}},
		{name: "abortedReturnsToTheStable", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), Waves: waves}, stack: "a", cur: 3, want: revisionChoice{rev: 2}},
		{name: "automaticAbortReturnsWhenItsWaveLetsIt", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), PacedAbort: true,
			Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a", "c"}, Released: 2, Returned: 1}}}, stack: "a", cur: 3, want: revisionChoice{rev: 2}},
		{name: "automaticAbortHoldsUntilItsWaveLetsIt", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), PacedAbort: true,
			Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a", "c"}, Released: 2, Returned: 1}}}, stack: "c", cur: 3, want: revisionChoice{rev: 3}},
		{name: "idleConvergesOnTheStable", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: rev("3"), Waves: waves}, stack: "b", cur: 2, want: revisionChoice{rev: 3}},
		{name: "noStatusYetKeepsItsRevision", stack: "a", cur: 2, want: revisionChoice{rev: 2}},
		{name: "noStatusYetNewStackGetsTheLatest", stack: "a", cur: 0, want: revisionChoice{rev: 5}},
		{name: "firstRolloutWithoutStableNewStackGetsTheLatest", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Target: rev("5"), Waves: waves}, stack: "c", cur: 0, want: revisionChoice{rev: 5}},
		// The preview gate.
		{name: "previewingWaveRendersTheTargetForItsPreviewOnly", spec: gated, status: previewing, stack: "b", cur: 2, want: revisionChoice{rev: 2, preview: 3}},
		{name: "previewingWaveAheadPreviewsTheTargetToo", spec: gated, status: previewing, stack: "c", cur: 3, want: revisionChoice{rev: 3, preview: 3}},
		{name: "previewingWaveNewStackGetsTheStable", spec: gated, status: previewing, stack: "c", cur: 0, want: revisionChoice{rev: 2}},
		{name: "openWaveHoldsItsUpToThePreviewsPlan", spec: gated, status: previewing, stack: "a", cur: 2, want: revisionChoice{rev: 3, apply: true}},
		{name: "releasedAfterItsPreviewGetsTheTargetHeldToThePlan", spec: gated, status: previewed, stack: "b", cur: 2, want: revisionChoice{rev: 3, apply: true}},
		{name: "previewedButNotReleasedStaysPreviewing", spec: gated, status: previewed, stack: "c", cur: 2, previewing: 3, want: revisionChoice{rev: 2, preview: 3}},
		{name: "pausedPreviewStaysPreviewing", spec: pausedGated, status: previewing, stack: "b", cur: 2, previewing: 3, want: revisionChoice{rev: 2, preview: 3}},
		{name: "haltedPreviewStaysPreviewing", spec: gated, status: halted, stack: "b", cur: 2, previewing: 3, want: revisionChoice{rev: 2, preview: 3}},
		{name: "pausedBeforeItsPreviewKeepsItsRevision", spec: pausedGated, status: previewing, stack: "b", cur: 2, want: revisionChoice{rev: 2}},
		{name: "previewOfAnotherTargetEnds", spec: gated, status: halted, stack: "b", cur: 2, previewing: 4, want: revisionChoice{rev: 2}},
		{name: "abortedPreviewReturnsToTheStable", spec: gated, status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: rev("2"), Aborted: rev("3"), Waves: halted.Waves},
			stack: "b", cur: 2, previewing: 3, want: revisionChoice{rev: 2}},
		{name: "previewingWaveWithoutAGateIsNoPreview", status: previewing, stack: "b", cur: 2, want: revisionChoice{rev: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{Spec: tt.spec, Status: tt.status}
			got := rolloutRevision(ro, tt.stack, tt.cur, tt.previewing, 5)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(revisionChoice{})); diff != "" {
				t.Errorf("rolloutRevision() (-want +got):\n%s", diff)
			}
		})
	}
}
