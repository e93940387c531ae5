package v1alpha1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	tests := []struct {
		name       string
		old, new   *v1alpha1.StackRollout
		wantEvery  bool
		wantStacks []string
	}{
		{name: "releasedMore", old: mk(v2, 1), new: mk(v2, 3), wantStacks: []string{"c", "d"}},
		{name: "nothingChanged", old: mk(v2, 2), new: mk(v2, 2)},
		{name: "newTarget", old: mk(v1, 1), new: mk(v2, 1), wantEvery: true},
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
