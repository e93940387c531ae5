package stack

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// PKO's updateTemplate: the TTL and the labels and annotations reach Stackwright's Updates
// (never over its own keys, never invalid ones); every other field is named as not applied.
func TestUpdateTemplate_PKOFields_AppliedOrNamed(t *testing.T) {
	tests := []struct {
		name            string
		tmpl            *pulumiv1.UpdateTemplate
		wantTTL         time.Duration
		wantLabels      map[string]string
		wantAnnotations map[string]string
		wantNotApplied  []string
	}{
		{name: "Unset"},
		{
			name: "TTLAndMetadataApplied",
			tmpl: &pulumiv1.UpdateTemplate{
				Metadata: &pulumiv1.TemplateObjectMeta{Labels: map[string]string{"team": "web"}, Annotations: map[string]string{"example.com/ticket": "OPS-1"}},
				Spec:     &pulumiv1.UpdateTemplateSpec{TTLAfterCompleted: "1h"},
			},
			wantTTL: time.Hour, wantLabels: map[string]string{"team": "web", v1alpha1.StackLabel: "web"}, wantAnnotations: map[string]string{"example.com/ticket": "OPS-1"},
		},
		{
			name: "OtherFieldsNamed",
			tmpl: &pulumiv1.UpdateTemplate{
				APIVersion: "auto.pulumi.com/v1alpha1", Kind: "Update",
				Metadata: &pulumiv1.TemplateObjectMeta{Name: "x", Labels: map[string]string{"stackwright.dev/stack": "other", "bad value": "x"}},
				Spec:     &pulumiv1.UpdateTemplateSpec{TTLAfterCompleted: "soon", Parallel: ptr.To[int32](4), Refresh: ptr.To(true)},
			},
			wantLabels: map[string]string{v1alpha1.StackLabel: "web"},
			wantNotApplied: []string{
				"spec.updateTemplate apiVersion, kind, metadata.name, spec.parallel, spec.refresh: accepted and not applied (Stackwright's Updates have their own shape; spec.ttlAfterCompleted and metadata.labels and annotations are applied)",
				`spec.updateTemplate.spec.ttlAfterCompleted "soon" is not a positive duration (such as 1h30m) and is not applied`,
				"spec.updateTemplate.metadata label bad value, label stackwright.dev/stack: not put on Updates (invalid, or a key Stackwright's own records use)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &pulumiv1.StackSpec{Stack: "dev", UpdateTemplate: tt.tmpl}
			if ttl, _ := updateTTL(spec); ttl != tt.wantTTL {
				t.Errorf("updateTTL = %v; want %v", ttl, tt.wantTTL)
			}
			u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.StackLabel: "web"}}}
			applyUpdateTemplate(u, spec)
			if tt.wantLabels == nil {
				tt.wantLabels = map[string]string{v1alpha1.StackLabel: "web"}
			}
			if diff := cmp.Diff(tt.wantLabels, u.Labels); diff != "" {
				t.Errorf("Update labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnnotations, u.Annotations); diff != "" {
				t.Errorf("Update annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNotApplied, updateTemplateNotApplied(spec)); diff != "" {
				t.Errorf("not applied (-want +got):\n%s", diff)
			}
		})
	}
}
