package program

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackwright/stackwright/api/conditions"
	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/testing/statustest"
)

func TestStatus_Mark_Transitions(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(earlier.Add(time.Hour))
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	readyAt := func(gen int64, digest string, at metav1.Time) pulumiv1.ProgramStatus {
		return pulumiv1.ProgramStatus{
			ObservedGeneration: gen,
			Artifact:           &pulumiv1.ProgramArtifact{Digest: digest, Revision: "generation/1", Size: 10, LastUpdateTime: &at},
			Conditions:         []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonArtifactReady, "Rendered generation/1 to artifact "+digest, gen)},
		}
	}
	tests := []struct {
		name       string
		generation int64
		status     pulumiv1.ProgramStatus
		mark       func(p *pulumiv1.Program)
		want       pulumiv1.ProgramStatus
	}{
		{
			name:       "first render records the artifact and its time",
			generation: 1,
			mark: func(p *pulumiv1.Program) {
				markReady(p, rendered{digest: "sha256:a", revision: "generation/1", size: 10, path: "sha256/a.tar.gz"}, now)
			},
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 1,
				Artifact:           &pulumiv1.ProgramArtifact{Digest: "sha256:a", Revision: "generation/1", Size: 10, Path: "sha256/a.tar.gz", LastUpdateTime: &now},
				Conditions:         []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonArtifactReady, "Rendered generation/1 to artifact sha256:a", 1)},
			},
		},
		{
			name:       "same digest for a new generation keeps the update time",
			generation: 2,
			status:     readyAt(1, "sha256:a", earlier),
			mark: func(p *pulumiv1.Program) {
				markReady(p, rendered{digest: "sha256:a", revision: "generation/2", size: 10}, now)
			},
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 2,
				Artifact:           &pulumiv1.ProgramArtifact{Digest: "sha256:a", Revision: "generation/2", Size: 10, LastUpdateTime: &earlier},
				Conditions:         []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonArtifactReady, "Rendered generation/2 to artifact sha256:a", 2)},
			},
		},
		{
			name:       "new digest moves the update time",
			generation: 2,
			status:     readyAt(1, "sha256:a", earlier),
			mark: func(p *pulumiv1.Program) {
				markReady(p, rendered{digest: "sha256:b", revision: "generation/2", size: 12}, now)
			},
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 2,
				Artifact:           &pulumiv1.ProgramArtifact{Digest: "sha256:b", Revision: "generation/2", Size: 12, LastUpdateTime: &now},
				Conditions:         []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonArtifactReady, "Rendered generation/2 to artifact sha256:b", 2)},
			},
		},
		{
			name:       "invalid spec stalls, handles the generation and keeps the last artifact",
			generation: 2,
			status:     readyAt(1, "sha256:a", earlier),
			mark:       func(p *pulumiv1.Program) { markStalled(p, pulumiv1.ReasonSpecInvalid, "bad") },
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 2,
				Artifact:           readyAt(1, "sha256:a", earlier).Artifact,
				Conditions: []metav1.Condition{
					cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyStalled, "bad", 2),
					cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid, "bad", 2),
				},
			},
		},
		{
			name:       "store failure keeps reconciling without handling the generation",
			generation: 2,
			status:     readyAt(1, "sha256:a", earlier),
			mark:       func(p *pulumiv1.Program) { markRetrying(p, "disk full") },
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 1,
				Artifact:           readyAt(1, "sha256:a", earlier).Artifact,
				Conditions: []metav1.Condition{
					cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, "disk full", 2),
					cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonRetryingAfterFailure, "disk full", 2),
				},
			},
		},
		{
			name:       "ready after a failure clears Stalled and Reconciling",
			generation: 3,
			status: pulumiv1.ProgramStatus{Conditions: []metav1.Condition{
				cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonSpecInvalid, "bad", 2),
				cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid, "bad", 2),
				cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonRetryingAfterFailure, "x", 2),
			}},
			mark: func(p *pulumiv1.Program) {
				markReady(p, rendered{digest: "sha256:c", revision: "generation/3", size: 1}, now)
			},
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 3,
				Artifact:           &pulumiv1.ProgramArtifact{Digest: "sha256:c", Revision: "generation/3", Size: 1, LastUpdateTime: &now},
				Conditions:         []metav1.Condition{cond(pulumiv1.ConditionReady, metav1.ConditionTrue, pulumiv1.ReasonArtifactReady, "Rendered generation/3 to artifact sha256:c", 3)},
			},
		},
		{
			name:       "stalled after retrying drops Reconciling",
			generation: 1,
			status: pulumiv1.ProgramStatus{Conditions: []metav1.Condition{
				cond(pulumiv1.ConditionReconciling, metav1.ConditionTrue, pulumiv1.ReasonRetryingAfterFailure, "x", 1),
			}},
			mark: func(p *pulumiv1.Program) { markStalled(p, pulumiv1.ReasonSpecInvalid, "bad") },
			want: pulumiv1.ProgramStatus{
				ObservedGeneration: 1,
				Conditions: []metav1.Condition{
					cond(pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyStalled, "bad", 1),
					cond(pulumiv1.ConditionStalled, metav1.ConditionTrue, pulumiv1.ReasonSpecInvalid, "bad", 1),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Generation: tt.generation}, Status: *tt.status.DeepCopy()}
			tt.mark(p)
			finalizeStatus(p)
			if diff := cmp.Diff(tt.want, p.Status, statustest.Compare); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatus_SetCondition_TruncatesLongMessages(t *testing.T) {
	p := &pulumiv1.Program{}
	markStalled(p, pulumiv1.ReasonSpecInvalid, strings.Repeat("é", conditions.MaxMessage))
	for _, c := range p.Status.Conditions {
		if len(c.Message) > conditions.MaxMessage+3 || !strings.HasSuffix(c.Message, "...") {
			t.Errorf("%s message has %d bytes; want at most %d ending in ...", c.Type, len(c.Message), conditions.MaxMessage+3)
		}
	}
}
