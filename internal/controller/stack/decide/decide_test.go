package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestNext_Status_ChoosesAction(t *testing.T) {
	t.Parallel()
	pol := Policy{MaxBackoff: 24 * time.Hour, StallAfter: 3}
	failedAt := func(at time.Time, failures int64) *pulumiv1.StackUpdateState {
		return &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed, Failures: failures, LastResyncTime: &metav1.Time{Time: at}}
	}
	succeededAt := func(at time.Time) *pulumiv1.StackUpdateState {
		return &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateSucceeded, LastResyncTime: &metav1.Time{Time: at}}
	}
	tests := []struct {
		name   string
		spec   pulumiv1.StackSpec
		annot  string
		status pulumiv1.StackStatus
		want   Decision
	}{
		{
			name: "neverRunRunsFirstAttempt",
			want: Decision{Action: Run, Attempt: 1, Why: "first update"},
		},
		{
			name:   "newKeyRunsAtOnceEvenWhileBackingOff",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 2), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "old", Attempt: 2}},
			want:   Decision{Action: Run, Attempt: 1, Why: "desired state changed"},
		},
		{
			name:   "newKeyRunsEvenWhenStalled",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 5), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "old", PermanentFailures: 5}},
			want:   Decision{Action: Run, Attempt: 1, Why: "desired state changed"},
		},
		{
			name:   "deployedKeyIsIdle",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   Decision{Action: Idle},
		},
		{
			name:   "detectedDriftIsRemediatedWithARefresh",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1, RemediateDrift: true}},
			want:   Decision{Action: Run, Attempt: 2, Why: "remediating drift", Refresh: true},
		},
		{
			name:   "reconcileRequestRerunsDeployedKey",
			annot:  "2026-11-21T12:00:00Z",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   Decision{Action: Run, Attempt: 2, Why: "reconcile requested"},
		},
		{
			name:   "handledReconcileRequestIsIdle",
			annot:  "r1",
			status: pulumiv1.StackStatus{ObservedReconcileRequest: "r1", LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k"}},
			want:   Decision{Action: Idle},
		},
		{
			name:   "failureWithinBackoffWaits",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-5*time.Second), 1), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 1}},
			want:   Decision{Action: Backoff, RequeueAfter: retryDelay(backoffBase, 1, 24*time.Hour, "uid-1") - 5*time.Second},
		},
		{
			name:   "failureAfterBackoffRetries",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Minute), 1), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 1, PermanentFailures: 1}},
			want:   Decision{Action: Run, Attempt: 2, Why: "retrying after failure"},
		},
		{
			name:   "permanentFailuresStall",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Hour), 3), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 3, PermanentFailures: 3}},
			want:   Decision{Action: Stalled},
		},
		{
			name:   "reconcileRequestRetriesStalled",
			annot:  "again",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 3), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 3, PermanentFailures: 3}},
			want:   Decision{Action: Run, Attempt: 4, Why: "reconcile requested"},
		},
		{
			name:   "transientFailuresNeverStall",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-48*time.Hour), 9), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 9, PermanentFailures: 0}},
			want:   Decision{Action: Run, Attempt: 10, Why: "retrying after failure"},
		},
		{
			name: "lockConflictsNeverStall",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Second), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, PermanentFailures: 3, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: Decision{Action: WaitForLock, RequeueAfter: retryDelay(backoffBase, 9, maxLockWait, "uid-1") - time.Second},
		},
		{
			name: "lockConflictRetriedOnceWaitIsOver",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-6*time.Minute), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: Decision{Action: Run, Attempt: 10, Why: "retrying on a stack that was locked"},
		},
		{
			name: "lockConflictWaitIsCappedBySpec",
			spec: pulumiv1.StackSpec{RetryMaxBackoffDurationSeconds: 20},
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Second), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: Decision{Action: WaitForLock, RequeueAfter: retryDelay(backoffBase, 9, 20*time.Second, "uid-1") - time.Second},
		},
		{
			name: "retryOnUpdateConflictRetriesWithoutBackingOff",
			spec: pulumiv1.StackSpec{RetryOnUpdateConflict: true},
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Second), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: Decision{Action: WaitForLock, RequeueAfter: retryDelay(backoffBase, 1, maxLockWait, "uid-1") - time.Second},
		},
		{
			name: "permanentFailureAfterConflictsStalls",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Hour), 5), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 5, PermanentFailures: 3, LastFailureReason: v1alpha1.ReasonPermanentFailure,
			}},
			want: Decision{Action: Stalled},
		},
		{
			name: "missingPluginStallsAtOnce",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 1), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 1, PermanentFailures: 1, LastFailureReason: v1alpha1.ReasonMissingPlugin,
			}},
			want: Decision{Action: Stalled},
		},
		{
			name: "backendUnsupportedStallsAtOnce",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 1), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 1, PermanentFailures: 1, LastFailureReason: v1alpha1.ReasonBackendUnsupported,
			}},
			want: Decision{Action: Stalled},
		},
		{
			name:  "reconcileRequestRetriesBackendUnsupported",
			annot: "moved to Pulumi Cloud",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 1), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 1, PermanentFailures: 1, LastFailureReason: v1alpha1.ReasonBackendUnsupported,
			}},
			want: Decision{Action: Run, Attempt: 2, Why: "reconcile requested"},
		},
		{
			name:  "reconcileRequestRetriesMissingPlugin",
			annot: "plugins added",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 1), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 1, PermanentFailures: 1, LastFailureReason: v1alpha1.ReasonMissingPlugin,
			}},
			want: Decision{Action: Run, Attempt: 2, Why: "reconcile requested"},
		},
		{
			name: "newDesiredStateRunsAfterMissingPlugin",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 1), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "old", Attempt: 1, PermanentFailures: 1, LastFailureReason: v1alpha1.ReasonMissingPlugin,
			}},
			want: Decision{Action: Run, Attempt: 1, Why: "desired state changed"},
		},
		{
			name:   "specCapsBackoff",
			spec:   pulumiv1.StackSpec{RetryMaxBackoffDurationSeconds: 20},
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-30*time.Second), 6), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 6}},
			want:   Decision{Action: Run, Attempt: 7, Why: "retrying after failure"},
		},
		{
			name:   "lostUpdateRetried",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "old", Attempt: 1}},
			want:   Decision{Action: Run, Attempt: 2, Why: "retrying lost update"},
		},
		{
			name:   "resyncNotDueWaits",
			spec:   pulumiv1.StackSpec{ContinueResyncOnCommitMatch: true, ResyncFrequencySeconds: 120},
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0.Add(-20 * time.Second)), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   Decision{Action: Idle, RequeueAfter: 100 * time.Second},
		},
		{
			name:   "resyncDueReruns",
			spec:   pulumiv1.StackSpec{ContinueResyncOnCommitMatch: true},
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0.Add(-61 * time.Second)), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   Decision{Action: Run, Attempt: 2, Why: "periodic resync"},
		},
		{
			name:   "branchWithoutContinueResyncIsIdle",
			spec:   pulumiv1.StackSpec{GitSource: pulumiv1.GitSource{ProjectRepo: "https://example.invalid/r", Branch: "main"}},
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0.Add(-time.Hour)), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k"}},
			want:   Decision{Action: Idle},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &pulumiv1.Stack{Spec: tt.spec, Status: tt.status}
			s.UID = "uid-1"
			if tt.annot != "" {
				s.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: tt.annot}
			}
			got := Next(t0, s, "k", pol)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Decision{})); diff != "" {
				t.Errorf("Next() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryDelay_Growth_IsCappedAndJitteredWithinTenPercent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		failures int64
		limit    time.Duration
		want     time.Duration
	}{
		{name: "first", failures: 1, want: 10 * time.Second},
		{name: "zeroTreatedAsFirst", failures: 0, want: 10 * time.Second},
		{name: "second", failures: 2, want: 30 * time.Second},
		{name: "third", failures: 3, want: 90 * time.Second},
		{name: "capped", failures: 10, limit: time.Hour, want: time.Hour},
		{name: "hugeFailureCountCapped", failures: 1000, limit: 24 * time.Hour, want: 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, seed := range []string{"a", "b", "c", "d"} {
				got := retryDelay(backoffBase, tt.failures, tt.limit, seed)
				if lo, hi := time.Duration(float64(tt.want)*0.9), time.Duration(float64(tt.want)*1.1); got < lo || got > hi {
					t.Errorf("retryDelay(%d, %v, %q) = %v; want within [%v, %v]", tt.failures, tt.limit, seed, got, lo, hi)
				}
				if again := retryDelay(backoffBase, tt.failures, tt.limit, seed); again != got {
					t.Errorf("retryDelay is not deterministic: %v then %v", got, again)
				}
			}
		})
	}
	if retryDelay(backoffBase, 1, 0, "a") == retryDelay(backoffBase, 1, 0, "b") {
		t.Errorf("different Stacks got the same jitter; a fleet would retry in lockstep")
	}
}
