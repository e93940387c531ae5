package v1alpha1_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestStackRollout_ChangedFor_AllOrOnlyTheNewlyReleased(t *testing.T) {
	v1 := &v1alpha1.RolloutRevision{Revision: "generation/1", Digest: "sha256:1"}
	v2 := &v1alpha1.RolloutRevision{Revision: "generation/2", Digest: "sha256:2"}
	mk := func(target *v1alpha1.RolloutRevision, released int32) *v1alpha1.StackRollout {
		return &v1alpha1.StackRollout{Status: v1alpha1.StackRolloutStatus{Phase: v1alpha1.RolloutProgressing, Stable: v1, Target: target, Wave: 1, Waves: []v1alpha1.RolloutWaveStatus{
			{Name: "0", Stacks: []string{"a"}}, {Name: "1", Stacks: []string{"b", "c", "d"}, Released: released},
		}}}
	}
	previewing := func(ro *v1alpha1.StackRollout) *v1alpha1.StackRollout {
		ro.Spec.Gates.Preview = &v1alpha1.RolloutPreviewGate{}
		ro.Status.Waves[1].State = v1alpha1.WavePreviewing
		return ro
	}
	aborted := func(ro *v1alpha1.StackRollout, returned int32) *v1alpha1.StackRollout {
		ro.Status.Phase, ro.Status.Aborted, ro.Status.Target, ro.Status.PacedAbort = v1alpha1.RolloutAborted, v2, nil, true
		ro.Status.Waves[1].Returned = returned
		return ro
	}
	paused := func(ro *v1alpha1.StackRollout) *v1alpha1.StackRollout {
		ro.Spec.Paused = true
		return ro
	}
	tests := []struct {
		name       string
		old, new   *v1alpha1.StackRollout
		wantEvery  bool
		wantStacks []string
	}{
		{name: "releasedMore", old: mk(v2, 1), new: mk(v2, 3), wantStacks: []string{"c", "d"}},
		{name: "nothingChanged", old: mk(v2, 2), new: mk(v2, 2)},
		{name: "newTarget", old: mk(v1, 1), new: mk(v2, 1), wantEvery: true},
		{name: "previewedWaveOpens", old: previewing(mk(v2, 0)), new: mk(v2, 0), wantStacks: []string{"b", "c", "d"}},
		{name: "automaticAbortLetsOneReturn", old: aborted(mk(v2, 3), 1), new: aborted(mk(v2, 3), 2), wantStacks: []string{"c"}},
		{name: "pausedEvery", old: mk(v2, 1), new: paused(mk(v2, 1)), wantEvery: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			every, stacks := tt.new.ChangedFor(tt.old)
			if every != tt.wantEvery {
				t.Errorf("every = %v, want %v", every, tt.wantEvery)
			}
			if diff := cmp.Diff(tt.wantStacks, stacks); diff != "" {
				t.Errorf("stacks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStackRollout_Selects_TemplateNarrowsTheSelector(t *testing.T) {
	tests := []struct {
		name     string
		selector metav1.LabelSelector
		template string
		labels   map[string]string
		want     bool
	}{
		{name: "sourceRolloutMatches", selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, labels: map[string]string{"app": "web"}, want: true},
		{name: "sourceRolloutEmptySelectsNothing", labels: map[string]string{"app": "web"}},
		{name: "templateEmptySelectsItsStacks", template: "buckets", labels: map[string]string{v1alpha1.TemplateLabel: "buckets"}, want: true},
		{name: "templateNotAnothersStacks", template: "buckets", labels: map[string]string{v1alpha1.TemplateLabel: "queues"}},
		{name: "templateNotAComposedInstancesOtherStacks", template: "buckets", labels: map[string]string{v1alpha1.TemplateLabel: "buckets", v1alpha1.TemplateStackLabel: "network"}},
		{name: "templateNotPlainStacks", template: "buckets", labels: map[string]string{"app": "web"}},
		{name: "templateAndSelector", template: "buckets", selector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "0"}},
			labels: map[string]string{v1alpha1.TemplateLabel: "buckets", "ring": "0"}, want: true},
		{name: "templateAndSelectorMismatch", template: "buckets", selector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "0"}},
			labels: map[string]string{v1alpha1.TemplateLabel: "buckets", "ring": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{Spec: v1alpha1.StackRolloutSpec{Selector: tt.selector}}
			if tt.template != "" {
				ro.Spec.Template = &v1alpha1.RolloutTemplate{Name: tt.template}
			}
			if got := ro.Selects(tt.labels); got != tt.want {
				t.Errorf("Selects(%v) = %v, want %v", tt.labels, got, tt.want)
			}
		})
	}
}

func TestStackRollout_MaxParallelOf_PaceOverridesTheRollout(t *testing.T) {
	count, pct := intstr.FromInt32, intstr.FromString
	ptr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	tests := []struct {
		name     string
		rollout  *intstr.IntOrString
		pace     *intstr.IntOrString
		wantOf10 int32
	}{
		{name: "unsetReleasesTheWholeWave", wantOf10: 10},
		{name: "rolloutZeroReleasesTheWholeWave", rollout: ptr(count(0)), wantOf10: 10},
		{name: "rolloutCount", rollout: ptr(count(3)), wantOf10: 3},
		{name: "rolloutCountAboveTheWave", rollout: ptr(count(30)), wantOf10: 10},
		{name: "rolloutPercentageRoundsUp", rollout: ptr(pct("25%")), wantOf10: 3},
		{name: "rolloutSmallPercentageIsOne", rollout: ptr(pct("1%")), wantOf10: 1},
		{name: "paceOverrides", rollout: ptr(count(3)), pace: ptr(count(5)), wantOf10: 5},
		{name: "paceZeroHolds", rollout: ptr(count(3)), pace: ptr(count(0)), wantOf10: 0},
		{name: "paceZeroPercentHolds", pace: ptr(pct("0%")), wantOf10: 0},
		{name: "pacePercentage", pace: ptr(pct("50%")), wantOf10: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.StackRollout{Spec: v1alpha1.StackRolloutSpec{MaxParallel: tt.rollout, Waves: v1alpha1.RolloutWaves{Pace: []v1alpha1.RolloutWavePace{
				{Wave: "1", MaxParallel: tt.pace},
			}}}}
			if got := ro.MaxParallelOf("1", 10); got != tt.wantOf10 {
				t.Errorf("MaxParallelOf(1, 10) = %d, want %d", got, tt.wantOf10)
			}
			if tt.rollout == nil || tt.pace == nil {
				return
			}
			// The pace of wave 1 is not another wave's.
			if got, want := ro.MaxParallelOf("2", 10), ro.MaxParallelOf("x", 10); got != want || got == tt.wantOf10 {
				t.Errorf("MaxParallelOf(2, 10) = %d, want the rollout's %d", got, want)
			}
		})
	}
}

func TestStackRollout_BakeTimeOf_PaceOverridesTheRollout(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	ro := &v1alpha1.StackRollout{Spec: v1alpha1.StackRolloutSpec{BakeTime: d(time.Minute), Waves: v1alpha1.RolloutWaves{Pace: []v1alpha1.RolloutWavePace{
		{Wave: "0", BakeTime: d(time.Hour)}, {Wave: "1", BakeTime: d(0)}, {Wave: "2"},
	}}}}
	got := map[string]time.Duration{}
	for _, w := range []string{"0", "1", "2", "3"} {
		got[w] = ro.BakeTimeOf(w)
	}
	want := map[string]time.Duration{"0": time.Hour, "1": 0, "2": time.Minute, "3": time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BakeTimeOf (-want +got):\n%s", diff)
	}
	if got := (&v1alpha1.StackRollout{}).BakeTimeOf("0"); got != 0 {
		t.Errorf("BakeTimeOf without a bake time = %s, want 0", got)
	}
}
