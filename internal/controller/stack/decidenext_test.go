package stack

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/inputs"
	"github.com/stackwright/stackwright/internal/source"
)

// A Stack stalled by its failures says what a person has to change: for failures that ran
// out of memory, the runner's memory limit.
func TestReconciler_DecideNext_StallSaysWhatToChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	type outcome struct{ Reason, Message string }
	tests := []struct {
		name   string
		reason string
		want   outcome
	}{
		{
			name: "permanentFailures", reason: v1alpha1.ReasonPermanentFailure,
			want: outcome{pulumiv1.ReasonUpdateFailed, "up failed 3 times in a row with a permanent error; change the spec, its references or the source, or set the " +
				pulumiv1.ReconcileRequestAnnotation + " annotation to retry. Last error: the last error"},
		},
		{
			name: "outOfMemory", reason: v1alpha1.ReasonOOMKilled,
			want: outcome{pulumiv1.ReasonUpdateFailed, "up failed 3 times in a row, the last (Update web-3) because its runner ran out of memory; raise the runner's memory limit " +
				"(spec.workspaceTemplate.spec.resources.limits.memory), or set the " + pulumiv1.ReconcileRequestAnnotation + " annotation to retry. Last error: the last error"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1}}
			s := &scope{stack: st, op: v1alpha1.UpdateTypeUp, artifact: source.Artifact{Revision: "r1", Digest: "sha256:1"}, inputs: &inputs.Inputs{}}
			key := desiredStateKey(st, s.op, s.artifact, s.inputs.Fingerprint)
			st.Status.LastUpdate = &pulumiv1.StackUpdateState{Name: "web-3", State: pulumiv1.UpdateStateFailed, Message: "the last error", Failures: 3,
				LastResyncTime: &metav1.Time{Time: now.Add(-time.Minute)}}
			st.Status.Stackwright = &pulumiv1.StackwrightStatus{LastAttemptedKey: key, Attempt: 3, PermanentFailures: 3, LastFailureReason: tt.reason}
			r := &Reconciler{Options: Options{StallAfter: 3}, Now: func() time.Time { return now }}
			if proceed, err := r.decideNext(t.Context(), s); proceed || err != nil {
				t.Fatalf("decideNext = %v, %v; want a stall", proceed, err)
			}
			var got outcome
			for _, c := range st.Status.Conditions {
				if c.Type == pulumiv1.ConditionStalled && c.Status == metav1.ConditionTrue {
					got = outcome{c.Reason, c.Message}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stalled (-want +got):\n%s", diff)
			}
		})
	}
}
