package v1alpha1_test

import (
	"testing"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// The revision an instance's Stack has is the one it was rendered from, but while it only
// previews another for a rollout's preview gate.
func TestHeldTemplateRevision_LabelsAndAnnotations_TheRevisionTheStackHas(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        int64
	}{
		{name: "None"},
		{name: "Rendered", labels: map[string]string{v1alpha1.TemplateRevisionLabel: "3"}, want: 3},
		{name: "NotARevision", labels: map[string]string{v1alpha1.TemplateRevisionLabel: "three"}},
		{name: "NotPositive", labels: map[string]string{v1alpha1.TemplateRevisionLabel: "0"}},
		{name: "PreviewingKeepsTheHeldRevision", labels: map[string]string{v1alpha1.TemplateRevisionLabel: "4"},
			annotations: map[string]string{v1alpha1.RolloutPreviewAnnotation: v1alpha1.RolloutPreviewOnly, v1alpha1.TemplateRevisionHeldAnnotation: "3"}, want: 3},
		{name: "OpenWaveHasWhatItIsRenderedFrom", labels: map[string]string{v1alpha1.TemplateRevisionLabel: "4"},
			annotations: map[string]string{v1alpha1.RolloutPreviewAnnotation: v1alpha1.RolloutPreviewApply, v1alpha1.TemplateRevisionHeldAnnotation: "3"}, want: 4},
		{name: "PreviewingWithoutAHeldRevision", labels: map[string]string{v1alpha1.TemplateRevisionLabel: "4"},
			annotations: map[string]string{v1alpha1.RolloutPreviewAnnotation: v1alpha1.RolloutPreviewOnly}, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v1alpha1.HeldTemplateRevision(tt.labels, tt.annotations); got != tt.want {
				t.Errorf("HeldTemplateRevision() = %d, want %d", got, tt.want)
			}
		})
	}
}
