package stack

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

func TestNextDriftCheck_Status_CountsFromTheLastEvent(t *testing.T) {
	t.Parallel()
	created := metav1.NewTime(time.Date(2026, 11, 21, 11, 58, 30, 0, time.UTC))
	at := func(h, m int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 11, 21, h, m, 10, 0, time.UTC)} }
	schedules := func(crons ...string) *pulumiv1.DriftDetectionSpec {
		d := &pulumiv1.DriftDetectionSpec{}
		for _, c := range crons {
			d.Schedules = append(d.Schedules, pulumiv1.DriftSchedule{Cron: c})
		}
		return d
	}
	tests := []struct {
		name   string
		drift  *pulumiv1.DriftDetectionSpec
		status pulumiv1.StackStatus
		want   time.Time // zero: no check is ever due
	}{
		{name: "noScheduleNeverChecks"},
		{name: "emptyScheduleListNeverChecks", drift: schedules()},
		{name: "newStackCountsFromCreation", drift: schedules("*/15 * * * *"), want: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)},
		{
			name: "firstCheckCountsFromLastUpdate", drift: schedules("*/15 * * * *"),
			status: pulumiv1.StackStatus{LastUpdate: &pulumiv1.StackUpdateState{LastResyncTime: at(12, 5)}},
			want:   time.Date(2026, 11, 21, 12, 15, 0, 0, time.UTC),
		},
		{
			name: "laterChecksCountFromTheLastCheck", drift: schedules("*/15 * * * *"),
			status: pulumiv1.StackStatus{
				LastUpdate:     &pulumiv1.StackUpdateState{LastResyncTime: at(12, 5)},
				DriftDetection: &pulumiv1.DriftDetectionStatus{LastCheck: at(12, 31)},
			},
			want: time.Date(2026, 11, 21, 12, 45, 0, 0, time.UTC),
		},
		{name: "earliestScheduleWins", drift: schedules("@hourly", "*/20 * * * *"), want: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)},
		{name: "unparsableScheduleIsSkipped", drift: schedules("every minute", "0 13 * * *"), want: time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: pulumiv1.StackSpec{DriftDetection: tt.drift}, Status: tt.status}
			got, ok := nextDriftCheck(st)
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Errorf("nextDriftCheck = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

// A check's outcome goes to DriftDetected and status.driftDetection only: status.lastUpdate
// describes deployments, and a failed check is not a failed deployment.
func TestRecordDrift_Update_SetsConditionNotLastUpdate(t *testing.T) {
	t.Parallel()
	end := metav1.NewTime(time.Date(2026, 11, 21, 12, 15, 3, 0, time.UTC))
	deployed := &pulumiv1.StackUpdateState{Name: "web-abc-1", Type: "up", State: pulumiv1.UpdateStateSucceeded}
	check := func(phase v1alpha1.UpdatePhase, changes map[string]int64, msg string) *v1alpha1.Update {
		return &v1alpha1.Update{
			ObjectMeta: metav1.ObjectMeta{Name: "web-drift-20261121-1215"},
			Spec:       v1alpha1.UpdateSpec{Type: v1alpha1.UpdateTypeDrift},
			Status:     v1alpha1.UpdateStatus{Phase: phase, Changes: changes, Message: msg, EndTime: &end},
		}
	}
	tests := []struct {
		name          string
		remediate     bool
		update        *v1alpha1.Update
		wantCondition metav1.Condition
		wantRemediate bool
	}{
		{
			name:          "noDrift",
			update:        check(v1alpha1.UpdatePhaseSucceeded, map[string]int64{"same": 2}, "no drift: 2 unchanged"),
			wantCondition: metav1.Condition{Type: pulumiv1.ConditionDriftDetected, Status: metav1.ConditionFalse, Reason: pulumiv1.ReasonNoDrift, Message: "no drift: 2 unchanged (Update web-drift-20261121-1215)"},
		},
		{
			name:          "driftFound",
			update:        check(v1alpha1.UpdatePhaseSucceeded, map[string]int64{"same": 1, "update": 1}, "drift detected: 1 to update"),
			wantCondition: metav1.Condition{Type: pulumiv1.ConditionDriftDetected, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonDriftFound, Message: "drift detected: 1 to update (Update web-drift-20261121-1215)"},
		},
		{
			name:          "driftFoundWithAutoRemediate",
			remediate:     true,
			update:        check(v1alpha1.UpdatePhaseSucceeded, map[string]int64{"delete": 1}, "drift detected: 1 to delete"),
			wantCondition: metav1.Condition{Type: pulumiv1.ConditionDriftDetected, Status: metav1.ConditionTrue, Reason: pulumiv1.ReasonDriftFound, Message: "drift detected: 1 to delete (Update web-drift-20261121-1215); remediating with an update"},
			wantRemediate: true,
		},
		{
			name:          "checkFailed",
			remediate:     true,
			update:        check(v1alpha1.UpdatePhaseFailed, nil, "failed to check stack web for drift: no credentials"),
			wantCondition: metav1.Condition{Type: pulumiv1.ConditionDriftDetected, Status: metav1.ConditionUnknown, Reason: reasonDriftCheckFailed, Message: "drift check failed (Update web-drift-20261121-1215): failed to check stack web for drift: no credentials"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{DriftDetection: &pulumiv1.DriftDetectionSpec{Schedules: []pulumiv1.DriftSchedule{{Cron: "* * * * *", AutoRemediate: tt.remediate}}}}}
			st.Status.LastUpdate = deployed.DeepCopy()
			recordDriftStart(st, tt.update)
			recordDrift(st, tt.update, end.Add(time.Minute))

			if diff := cmp.Diff([]metav1.Condition{tt.wantCondition}, st.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(deployed, st.Status.LastUpdate); diff != "" {
				t.Errorf("status.lastUpdate changed (-want +got):\n%s", diff)
			}
			wantDrift := &pulumiv1.DriftDetectionStatus{LastCheck: &end, LastUpdate: tt.update.Name}
			if diff := cmp.Diff(wantDrift, st.Status.DriftDetection); diff != "" {
				t.Errorf("status.driftDetection (-want +got):\n%s", diff)
			}
			if st.Status.CurrentUpdate != nil {
				t.Errorf("status.currentUpdate = %+v; want none after the check", st.Status.CurrentUpdate)
			}
			if got := stackwrightStatus(st).RemediateDrift; got != tt.wantRemediate {
				t.Errorf("remediateDrift = %v; want %v", got, tt.wantRemediate)
			}
		})
	}
}

func TestDriftUpdateName_Time_FitsAndNamesTheMinute(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 12, 15, 59, 0, time.FixedZone("CET", 3600))
	if got, want := driftUpdateName("web", at), "web-drift-20261121-1115"; got != want {
		t.Errorf("driftUpdateName = %q; want %q", got, want)
	}
	long := driftUpdateName(strings.Repeat("a", 300), at)
	if len(long) > 253 {
		t.Errorf("name of %d characters; want at most 253", len(long))
	}
}
