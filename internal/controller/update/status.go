package update

import (
	"time"

	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/executor"
)

// runDuration is how long u ran, for the metric: zero when it has no start (a claim
// always sets one).
func runDuration(u *v1alpha1.Update) time.Duration {
	if u.Status.StartTime == nil || u.Status.EndTime == nil {
		return 0
	}
	return u.Status.EndTime.Sub(u.Status.StartTime.Time)
}

// setQueue records pos as where u stands in its executor's queue. Ahead is rounded down to
// tens past 10 and the wait to whole minutes (at least one), so that the small moves of a
// long queue are not each a write.
func setQueue(u *v1alpha1.Update, pos executor.Position) {
	q := &v1alpha1.UpdateQueue{
		Ahead:          int32(min(pos.Ahead, 1<<30)),
		Reason:         v1alpha1.QueueReasonAllSlotsBusy,
		RunningUpdates: int32(min(pos.Running, 1<<30)),
		Slots:          int32(min(pos.Slots, 1<<30)),
	}
	if q.Ahead > 10 {
		q.Ahead -= q.Ahead % 10
	}
	if pos.TenantAtLimit {
		q.Reason = v1alpha1.QueueReasonTenantAtLimit
	}
	if pos.EstimatedWait > 0 {
		wait := int64(max(pos.EstimatedWait.Round(time.Minute), time.Minute).Seconds())
		q.EstimatedWaitSeconds = &wait
	}
	u.Status.Queue = q
}
