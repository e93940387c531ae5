package update

import (
	"time"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// runDuration is how long u ran, for the metric: zero when it has no start (a claim
// always sets one).
func runDuration(u *v1alpha1.Update) time.Duration {
	if u.Status.StartTime == nil || u.Status.EndTime == nil {
		return 0
	}
	return u.Status.EndTime.Sub(u.Status.StartTime.Time)
}
