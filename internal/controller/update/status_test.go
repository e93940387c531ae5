package update

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor"
)

func ptr[T any](v T) *T { return &v }

func TestSetQueue_Position_RoundedSoSmallMovesAreNotWrites(t *testing.T) {
	tests := []struct {
		name string
		pos  executor.Position
		want *v1alpha1.UpdateQueue
	}{
		{
			name: "NextWithNoEstimateYet",
			pos:  executor.Position{Ahead: 0, Running: 4, Slots: 4},
			want: &v1alpha1.UpdateQueue{Ahead: 0, Reason: v1alpha1.QueueReasonAllSlotsBusy, RunningUpdates: 4, Slots: 4},
		},
		{
			name: "ExactUpToTen",
			pos:  executor.Position{Ahead: 10, Running: 4, Slots: 4, EstimatedWait: 95 * time.Second},
			want: &v1alpha1.UpdateQueue{Ahead: 10, Reason: v1alpha1.QueueReasonAllSlotsBusy, RunningUpdates: 4, Slots: 4, EstimatedWaitSeconds: ptr(int64(120))},
		},
		{
			name: "TensPastTen",
			pos:  executor.Position{Ahead: 37, Running: 4, Slots: 4, EstimatedWait: 10 * time.Minute},
			want: &v1alpha1.UpdateQueue{Ahead: 30, Reason: v1alpha1.QueueReasonAllSlotsBusy, RunningUpdates: 4, Slots: 4, EstimatedWaitSeconds: ptr(int64(600))},
		},
		{
			name: "TenantAtItsLimitAtLeastAMinute",
			pos:  executor.Position{Ahead: 1, TenantAtLimit: true, Running: 2, Slots: 4, EstimatedWait: 5 * time.Second},
			want: &v1alpha1.UpdateQueue{Ahead: 1, Reason: v1alpha1.QueueReasonTenantAtLimit, RunningUpdates: 2, Slots: 4, EstimatedWaitSeconds: ptr(int64(60))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &v1alpha1.Update{}
			setQueue(u, tt.pos)
			if diff := cmp.Diff(tt.want, u.Status.Queue); diff != "" {
				t.Errorf("status.queue (-want +got):\n%s", diff)
			}
		})
	}
}
