package predicates_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/predicates"
)

func update(phase v1alpha1.UpdatePhase, logTail string) *v1alpha1.Update {
	return &v1alpha1.Update{Status: v1alpha1.UpdateStatus{Phase: phase, LogTail: logTail}}
}

func TestUpdatePhaseChanged_Update_OnlyPhaseChangesPass(t *testing.T) {
	tests := []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"new phase passes", update(v1alpha1.UpdatePhasePending, ""), update(v1alpha1.UpdatePhaseRunning, ""), true},
		{"progress write is filtered", update(v1alpha1.UpdatePhaseRunning, "a"), update(v1alpha1.UpdatePhaseRunning, "ab"), false},
		{"object of another kind passes", &corev1.Pod{}, &corev1.Pod{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (predicates.UpdatePhaseChanged{}).Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeletionStarted_Update_OnlyTheDeletionTimestampPasses(t *testing.T) {
	now := metav1.Now()
	live, deleting := &corev1.Pod{}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	tests := []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"deletion starts", live, deleting, true},
		{"already deleting", deleting, deleting, false},
		{"not deleting", live, live, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (predicates.DeletionStarted{}).Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
}
