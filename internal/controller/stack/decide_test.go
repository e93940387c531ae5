package stack

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/source"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestDecide_Status_ChoosesAction(t *testing.T) {
	t.Parallel()
	pol := policy{maxBackoff: 24 * time.Hour, stallAfter: 3}
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
		want   decision
	}{
		{
			name: "neverRunRunsFirstAttempt",
			want: decision{action: actionRun, attempt: 1, why: "first update"},
		},
		{
			name:   "newKeyRunsAtOnceEvenWhileBackingOff",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 2), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "old", Attempt: 2}},
			want:   decision{action: actionRun, attempt: 1, why: "desired state changed"},
		},
		{
			name:   "newKeyRunsEvenWhenStalled",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 5), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "old", PermanentFailures: 5}},
			want:   decision{action: actionRun, attempt: 1, why: "desired state changed"},
		},
		{
			name:   "deployedKeyIsIdle",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   decision{action: actionIdle},
		},
		{
			name:   "detectedDriftIsRemediatedWithARefresh",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1, RemediateDrift: true}},
			want:   decision{action: actionRun, attempt: 2, why: "remediating drift", refresh: true},
		},
		{
			name:   "reconcileRequestRerunsDeployedKey",
			annot:  "2026-11-21T12:00:00Z",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   decision{action: actionRun, attempt: 2, why: "reconcile requested"},
		},
		{
			name:   "handledReconcileRequestIsIdle",
			annot:  "r1",
			status: pulumiv1.StackStatus{ObservedReconcileRequest: "r1", LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k"}},
			want:   decision{action: actionIdle},
		},
		{
			name:   "failureWithinBackoffWaits",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-5*time.Second), 1), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 1}},
			want:   decision{action: actionBackoff, requeueAfter: backoff(backoffBase, 1, 24*time.Hour, "uid-1") - 5*time.Second},
		},
		{
			name:   "failureAfterBackoffRetries",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Minute), 1), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 1, PermanentFailures: 1}},
			want:   decision{action: actionRun, attempt: 2, why: "retrying after failure"},
		},
		{
			name:   "permanentFailuresStall",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Hour), 3), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 3, PermanentFailures: 3}},
			want:   decision{action: actionStalled},
		},
		{
			name:   "reconcileRequestRetriesStalled",
			annot:  "again",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0, 3), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 3, PermanentFailures: 3}},
			want:   decision{action: actionRun, attempt: 4, why: "reconcile requested"},
		},
		{
			name:   "transientFailuresNeverStall",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-48*time.Hour), 9), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 9, PermanentFailures: 0}},
			want:   decision{action: actionRun, attempt: 10, why: "retrying after failure"},
		},
		{
			name: "lockConflictsNeverStall",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Second), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, PermanentFailures: 3, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: decision{action: actionWaitForLock, requeueAfter: backoff(backoffBase, 9, maxLockWait, "uid-1") - time.Second},
		},
		{
			name: "lockConflictRetriedOnceWaitIsOver",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-6*time.Minute), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: decision{action: actionRun, attempt: 10, why: "retrying on a stack that was locked"},
		},
		{
			name: "lockConflictWaitIsCappedBySpec",
			spec: pulumiv1.StackSpec{RetryMaxBackoffDurationSeconds: 20},
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Second), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: decision{action: actionWaitForLock, requeueAfter: backoff(backoffBase, 9, 20*time.Second, "uid-1") - time.Second},
		},
		{
			name: "retryOnUpdateConflictRetriesWithoutBackingOff",
			spec: pulumiv1.StackSpec{RetryOnUpdateConflict: true},
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Second), 9), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 9, LastFailureReason: v1alpha1.ReasonUpdateConflict,
			}},
			want: decision{action: actionWaitForLock, requeueAfter: backoff(backoffBase, 1, maxLockWait, "uid-1") - time.Second},
		},
		{
			name: "permanentFailureAfterConflictsStalls",
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-time.Hour), 5), Stackwright: &pulumiv1.StackwrightStatus{
				LastAttemptedKey: "k", Attempt: 5, PermanentFailures: 3, LastFailureReason: v1alpha1.ReasonPermanentFailure,
			}},
			want: decision{action: actionStalled},
		},
		{
			name:   "specCapsBackoff",
			spec:   pulumiv1.StackSpec{RetryMaxBackoffDurationSeconds: 20},
			status: pulumiv1.StackStatus{LastUpdate: failedAt(t0.Add(-30*time.Second), 6), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", Attempt: 6}},
			want:   decision{action: actionRun, attempt: 7, why: "retrying after failure"},
		},
		{
			name:   "lostUpdateRetried",
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "old", Attempt: 1}},
			want:   decision{action: actionRun, attempt: 2, why: "retrying lost update"},
		},
		{
			name:   "resyncNotDueWaits",
			spec:   pulumiv1.StackSpec{ContinueResyncOnCommitMatch: true, ResyncFrequencySeconds: 120},
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0.Add(-20 * time.Second)), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   decision{action: actionIdle, requeueAfter: 100 * time.Second},
		},
		{
			name:   "resyncDueReruns",
			spec:   pulumiv1.StackSpec{ContinueResyncOnCommitMatch: true},
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0.Add(-61 * time.Second)), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k", Attempt: 1}},
			want:   decision{action: actionRun, attempt: 2, why: "periodic resync"},
		},
		{
			name:   "branchWithoutContinueResyncIsIdle",
			spec:   pulumiv1.StackSpec{GitSource: pulumiv1.GitSource{ProjectRepo: "https://example.invalid/r", Branch: "main"}},
			status: pulumiv1.StackStatus{LastUpdate: succeededAt(t0.Add(-time.Hour)), Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k", LastSuccessfulKey: "k"}},
			want:   decision{action: actionIdle},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &pulumiv1.Stack{Spec: tt.spec, Status: tt.status}
			s.UID = "uid-1"
			if tt.annot != "" {
				s.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: tt.annot}
			}
			got := decide(t0, s, "k", pol)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decide() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackoff_Growth_IsCappedAndJitteredWithinTenPercent(t *testing.T) {
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
				got := backoff(backoffBase, tt.failures, tt.limit, seed)
				if lo, hi := time.Duration(float64(tt.want)*0.9), time.Duration(float64(tt.want)*1.1); got < lo || got > hi {
					t.Errorf("backoff(%d, %v, %q) = %v; want within [%v, %v]", tt.failures, tt.limit, seed, got, lo, hi)
				}
				if again := backoff(backoffBase, tt.failures, tt.limit, seed); again != got {
					t.Errorf("backoff is not deterministic: %v then %v", got, again)
				}
			}
		})
	}
	if backoff(backoffBase, 1, 0, "a") == backoff(backoffBase, 1, 0, "b") {
		t.Errorf("different Stacks got the same jitter; a fleet would retry in lockstep")
	}
}

func TestDesiredStateKey_Inputs_EachChangesKey(t *testing.T) {
	t.Parallel()
	base := func() (*pulumiv1.Stack, source.Artifact, string) {
		s := &pulumiv1.Stack{Spec: pulumiv1.StackSpec{Stack: "dev"}}
		s.Generation = 1
		return s, source.Artifact{Revision: "r1", Digest: "sha256:aa"}, "fp"
	}
	s, a, fp := base()
	ref := desiredStateKey(s, operation(&s.Spec), a, fp)
	if again := desiredStateKey(s, operation(&s.Spec), a, fp); again != ref {
		t.Fatalf("key not deterministic: %s then %s", ref, again)
	}
	mutations := map[string]func(*pulumiv1.Stack, *source.Artifact, *string){
		"revision":   func(_ *pulumiv1.Stack, a *source.Artifact, _ *string) { a.Revision = "r2" },
		"digest":     func(_ *pulumiv1.Stack, a *source.Artifact, _ *string) { a.Digest = "sha256:bb" },
		"dir":        func(_ *pulumiv1.Stack, a *source.Artifact, _ *string) { a.Dir = "sub" },
		"generation": func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Generation = 2 },
		"inputs":     func(_ *pulumiv1.Stack, _ *source.Artifact, fp *string) { *fp = "fp2" },
		"preview":    func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Spec.Preview = true },
		"refresh":    func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Spec.Refresh = true },
		"targets":    func(s *pulumiv1.Stack, _ *source.Artifact, _ *string) { s.Spec.Targets = []string{"urn:x"} },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			s, a, fp := base()
			mutate(s, &a, &fp)
			if desiredStateKey(s, operation(&s.Spec), a, fp) == ref {
				t.Errorf("changing %s did not change the desired-state key", name)
			}
		})
	}
}

func TestUpdateName_Stack_FitsAndStaysDeterministic(t *testing.T) {
	t.Parallel()
	key := "0123456789abcdef"
	tests := []struct {
		name, stack string
		attempt     int32
		want        string
	}{
		{name: "short", stack: "web", attempt: 1, want: "web-0123456789-1"},
		{name: "attemptCounts", stack: "web", attempt: 12, want: "web-0123456789-12"},
		{name: "longTruncatedWithoutTrailingDot", stack: strings.Repeat("a", 239) + "." + strings.Repeat("b", 20), attempt: 3, want: strings.Repeat("a", 239) + "-0123456789-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := updateName(tt.stack, key, tt.attempt)
			if got != tt.want {
				t.Errorf("updateName() = %q; want %q", got, tt.want)
			}
			if len(got) > 253 {
				t.Errorf("updateName() is %d characters; names are limited to 253", len(got))
			}
		})
	}
}
