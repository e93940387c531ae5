package stack

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestPinFor_Revision(t *testing.T) {
	v1 := &v1alpha1.RolloutRevision{Revision: "generation/1", Digest: "sha256:1"}
	v2 := &v1alpha1.RolloutRevision{Revision: "generation/2", Digest: "sha256:2"}
	last := func(r *v1alpha1.RolloutRevision) *pulumiv1.ArtifactRef {
		return &pulumiv1.ArtifactRef{Revision: r.Revision, Digest: r.Digest, Dir: "d"}
	}
	waves := []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a"}}, {Name: "1", Stacks: []string{"b", "c"}, Released: 1}, {Name: "2", Stacks: []string{"d"}}}
	progressing := v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Stable: v1, Target: v2, Wave: 1, Waves: waves}
	tests := []struct {
		name   string
		status v1alpha1.StackRolloutStatus
		stack  string
		last   *pulumiv1.ArtifactRef
		want   *v1alpha1.RolloutRevision
	}{
		{name: "EarlierWaveIsOpen", status: progressing, stack: "a", last: last(v1), want: v2},
		{name: "ReleasedInTheCurrentWaveIsOpen", status: progressing, stack: "b", last: last(v1), want: v2},
		{name: "NotYetReleasedKeepsItsOwn", status: progressing, stack: "c", last: last(v1), want: v1},
		{name: "LaterWaveKeepsItsOwn", status: progressing, stack: "d", last: last(v1), want: v1},
		{name: "LaterWaveNeverDeployedGetsStable", status: progressing, stack: "d", want: v1},
		{name: "SelectedAfterTheStartGetsStable", status: progressing, stack: "new", want: v1},
		{name: "NothingStableAndNeverDeployedWaits", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Target: v2, Waves: waves}, stack: "d", want: nil},
		{
			name:   "HaltedKeepsOpenWavesOpen",
			status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutHalted, Stable: v1, Target: v2, Wave: 1, Waves: waves}, stack: "a", last: last(v2), want: v2,
		},
		{
			name:   "AbortedReturnsToStable",
			status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: v1, Aborted: v2, Wave: 1, Waves: waves}, stack: "a", last: last(v2), want: v1,
		},
		{
			name: "AutomaticAbortReturnsWhenItsWaveLetsIt",
			status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: v1, Aborted: v2, Wave: 1, PacedAbort: true,
				Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a", "e"}, Released: 2, Returned: 1}, {Name: "1", Stacks: []string{"b"}}}},
			stack: "a", last: last(v2), want: v1,
		},
		{
			name: "AutomaticAbortHoldsUntilItsWaveLetsIt",
			status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: v1, Aborted: v2, Wave: 1, PacedAbort: true,
				Waves: []v1alpha1.RolloutWaveStatus{{Name: "0", Stacks: []string{"a", "e"}, Released: 2, Returned: 1}, {Name: "1", Stacks: []string{"b"}}}},
			stack: "e", last: last(v2), want: v2,
		},
		{
			name:   "IdleCatchesUpToStable",
			status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: v2, Waves: waves}, stack: "late", last: last(v1), want: v2,
		},
		{
			name:   "ClosedWaveAheadAtTheTargetKeepsIt",
			status: progressing, stack: "d", last: last(v2), want: v2,
		},
		{
			name:   "IdleKeepsItsOwn",
			status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: v2, Waves: waves}, stack: "a", last: last(v2), want: v2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{Status: tt.status}
			if diff := cmp.Diff(tt.want, pinFor(ro, tt.stack, tt.last)); diff != "" {
				t.Errorf("pin (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHeldReason_SaysWhy(t *testing.T) {
	v1 := &v1alpha1.RolloutRevision{Revision: "generation/1", Digest: "sha256:1"}
	v2 := &v1alpha1.RolloutRevision{Revision: "generation/2", Digest: "sha256:2"}
	v3 := &v1alpha1.RolloutRevision{Revision: "generation/3", Digest: "sha256:3"}
	tests := []struct {
		name    string
		status  v1alpha1.StackRolloutStatus
		offered string
		want    string
	}{
		{name: "WaveClosed", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Stable: v1, Target: v2}, offered: "generation/2", want: pulumiv1.ReasonWaveClosed},
		{name: "QueuedBehindTheCurrentTarget", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Stable: v1, Target: v2}, offered: "generation/3", want: pulumiv1.ReasonRolloutPending},
		{name: "Aborted", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutAborted, Stable: v1, Aborted: v3}, offered: "generation/3", want: pulumiv1.ReasonRolloutAborted},
		{name: "NotStartedYet", status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutIdle, Stable: v1}, offered: "generation/2", want: pulumiv1.ReasonRolloutPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := heldReason(&v1alpha1.StackRollout{Status: tt.status}, "s", tt.offered)
			if got != tt.want {
				t.Errorf("reason %s, want %s", got, tt.want)
			}
		})
	}
}

// The instance controller's RolloutPreviewAnnotation gives an instance's Stack the preview
// gate of its rollout of template revisions.
func TestReconciler_PreviewForTemplateRollout_FromTheAnnotation(t *testing.T) {
	tests := []struct {
		name                         string
		annotation                   string
		wantRolloutPreview, wantOnly bool
	}{
		{name: "None"},
		{name: "Preview", annotation: v1alpha1.RolloutPreviewOnly, wantRolloutPreview: true, wantOnly: true},
		{name: "Apply", annotation: v1alpha1.RolloutPreviewApply, wantRolloutPreview: true},
		{name: "Unknown", annotation: "Later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{}
			if tt.annotation != "" {
				st.Annotations = map[string]string{v1alpha1.RolloutPreviewAnnotation: tt.annotation}
			}
			s := &scope{stack: st}
			if ok, err := (&Reconciler{}).previewForTemplateRollout(t.Context(), s); !ok || err != nil {
				t.Fatalf("previewForTemplateRollout = %v, %v; want it to proceed", ok, err)
			}
			if diff := cmp.Diff([2]bool{tt.wantRolloutPreview, tt.wantOnly}, [2]bool{s.rolloutPreview, s.previewOnly}); diff != "" {
				t.Errorf("rolloutPreview, previewOnly (-want +got):\n%s", diff)
			}
		})
	}
}
