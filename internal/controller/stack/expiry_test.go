package stack

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

func TestExpiry_TTL_CountsFromItsOriginAndOnlyMovesBack(t *testing.T) {
	created := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	updated := created.Add(5 * time.Hour)
	stack := func(ttl *pulumiv1.StackTTL, annotation string) *pulumiv1.Stack {
		s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created), Annotations: map[string]string{}}}
		s.Spec.Stackwright = &pulumiv1.StackwrightSpec{TTL: ttl}
		s.Status.LastUpdate = &pulumiv1.StackUpdateState{LastResyncTime: &metav1.Time{Time: updated}}
		if annotation != "" {
			s.Annotations[pulumiv1.ExpiresAtAnnotation] = annotation
		}
		return s
	}
	hours := func(h int) metav1.Duration { return metav1.Duration{Duration: time.Duration(h) * time.Hour} }
	tests := []struct {
		name    string
		stack   *pulumiv1.Stack
		want    time.Time
		wantOK  bool
		wantBad bool
	}{
		{name: "noTTL", stack: &pulumiv1.Stack{}},
		{name: "fromCreationByDefault", stack: stack(&pulumiv1.StackTTL{After: hours(2)}, ""), want: created.Add(2 * time.Hour), wantOK: true},
		{name: "fromLastUpdate", stack: stack(&pulumiv1.StackTTL{After: hours(2), From: pulumiv1.TTLFromLastUpdate}, ""), want: updated.Add(2 * time.Hour), wantOK: true},
		{name: "annotationPushesBack", stack: stack(&pulumiv1.StackTTL{After: hours(2)}, "2026-11-27T00:00:00Z"), want: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), wantOK: true},
		{name: "annotationNeverBringsForward", stack: stack(&pulumiv1.StackTTL{After: hours(2)}, "2026-11-26T10:30:00Z"), want: created.Add(2 * time.Hour), wantOK: true},
		{name: "garbledAnnotationIsReported", stack: stack(&pulumiv1.StackTTL{After: hours(2)}, "tomorrow"), want: created.Add(2 * time.Hour), wantOK: true, wantBad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, bad := expiry(tt.stack)
			if !got.Equal(tt.want) || ok != tt.wantOK || (bad != "") != tt.wantBad {
				t.Errorf("expiry() = %v, %v, %q; want %v, %v, bad %v", got, ok, bad, tt.want, tt.wantOK, tt.wantBad)
			}
		})
	}
}
