package stack

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
	"github.com/stackwright/stackwright/internal/controller/stack/decide"
)

// finished is an Update of type op, finished with reason (Succeeded succeeds).
func finished(name string, op v1alpha1.UpdateType, reason string) *v1alpha1.Update {
	u := &v1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.UpdateSpec{Type: op, DesiredStateKey: "k1", Attempt: 2}}
	if reason == v1alpha1.ReasonSucceeded {
		u.Status.Phase, u.Status.Result = v1alpha1.UpdatePhaseSucceeded, v1alpha1.UpdateResultSucceeded
		u.MarkFinished(metav1.Condition{Status: metav1.ConditionTrue, Reason: reason})
		return u
	}
	u.Status.Phase, u.Status.Result = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed
	u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: reason})
	return u
}

// bound binds u to the runner that ran it.
func bound(u *v1alpha1.Update) *v1alpha1.Update {
	u.Spec.Runner, u.Status.Runner = "local/m/1/a", "local/m/1/a"
	return u
}

// takenOver binds u to a runner other than the one that ran it.
func takenOver(u *v1alpha1.Update) *v1alpha1.Update {
	u.Spec.Runner, u.Status.Runner = "local/m/1/a", "local/m/2/b"
	return u
}

func TestRecordFinish_LostUpdates_RememberedUntilSuccess(t *testing.T) {
	t.Parallel()
	ten := make([]string, 10)
	for i := range ten {
		ten[i] = fmt.Sprintf("web-k1-%d", i+1)
	}
	tests := []struct {
		name   string
		before []string
		u      *v1alpha1.Update
		want   []string
	}{
		{name: "LostUpIsRemembered", u: finished("web-k1-1", v1alpha1.UpdateTypeUp, v1alpha1.ReasonRunnerLost), want: []string{"web-k1-1"}},
		{name: "LostUpJoinsEarlierOnes", before: []string{"web-k1-1"}, u: finished("web-k1-2", v1alpha1.UpdateTypeUp, v1alpha1.ReasonRunnerLost), want: []string{"web-k1-1", "web-k1-2"}},
		{name: "OOMKilledUpIsRemembered", u: finished("web-k1-1", v1alpha1.UpdateTypeUp, v1alpha1.ReasonOOMKilled), want: []string{"web-k1-1"}},
		{name: "LostDestroyIsNot", u: finished("web-k1-1", v1alpha1.UpdateTypeDestroy, v1alpha1.ReasonRunnerLost)},
		{name: "OtherFailureKeepsThem", before: []string{"web-k1-1"}, u: finished("web-k1-2", v1alpha1.UpdateTypeUp, v1alpha1.ReasonTransientFailure), want: []string{"web-k1-1"}},
		{name: "SuccessForgetsThem", before: []string{"web-k1-1"}, u: finished("web-k1-2", v1alpha1.UpdateTypeUp, v1alpha1.ReasonSucceeded)},
		{name: "OldestDropPastTen", before: ten, u: finished("web-k1-11", v1alpha1.UpdateTypeUp, v1alpha1.ReasonRunnerLost), want: append(ten[1:], "web-k1-11")},
		// Its bound runner may have applied it before its manager stopped: whatever the
		// failure of the runner that took it over (a lock the first still held), the next
		// up looks for it.
		{name: "FailedTakeoverIsRemembered", u: takenOver(finished("web-k1-1", v1alpha1.UpdateTypeUp, v1alpha1.ReasonUpdateConflict)), want: []string{"web-k1-1"}},
		{name: "FailedUpOfItsBoundRunnerIsNot", u: bound(finished("web-k1-1", v1alpha1.UpdateTypeUp, v1alpha1.ReasonUpdateConflict))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{Status: pulumiv1.StackStatus{Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k1", Attempt: 1, LostUpdates: tt.before}}}
			recordFinish(st, tt.u, nil, time.Now())
			if diff := cmp.Diff(tt.want, st.Status.Stackwright.LostUpdates); diff != "" {
				t.Errorf("lostUpdates (-want +got):\n%s", diff)
			}
		})
	}
}

// Only a permanent failure counts towards stalling, a lock conflict never does whatever
// retryOnUpdateConflict says, and the failure's reason is kept until a success.
func TestRecordFinish_FailureReason_CountsOnlyPermanentFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		retryConflict bool
		u             *v1alpha1.Update
		wantCount     int32
		wantReason    string
	}{
		{name: "PermanentFailureCounts", u: finished("u", v1alpha1.UpdateTypeUp, v1alpha1.ReasonPermanentFailure), wantCount: 2, wantReason: v1alpha1.ReasonPermanentFailure},
		{name: "ConflictDoesNotCount", u: finished("u", v1alpha1.UpdateTypeUp, v1alpha1.ReasonUpdateConflict), wantCount: 1, wantReason: v1alpha1.ReasonUpdateConflict},
		{name: "ConflictWithRetryDoesNotCount", retryConflict: true, u: finished("u", v1alpha1.UpdateTypeDestroy, v1alpha1.ReasonUpdateConflict), wantCount: 1, wantReason: v1alpha1.ReasonUpdateConflict},
		{name: "OOMKilledCounts", u: finished("u", v1alpha1.UpdateTypeUp, v1alpha1.ReasonOOMKilled), wantCount: 2, wantReason: v1alpha1.ReasonOOMKilled},
		{name: "TransientFailureDoesNotCount", u: finished("u", v1alpha1.UpdateTypeUp, v1alpha1.ReasonTransientFailure), wantCount: 1, wantReason: v1alpha1.ReasonTransientFailure},
		{name: "SuccessResetsBoth", u: finished("u", v1alpha1.UpdateTypeUp, v1alpha1.ReasonSucceeded)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{
				Spec:   pulumiv1.StackSpec{RetryOnUpdateConflict: tt.retryConflict},
				Status: pulumiv1.StackStatus{Stackwright: &pulumiv1.StackwrightStatus{LastAttemptedKey: "k1", Attempt: 1, PermanentFailures: 1, LastFailureReason: "earlier"}},
			}
			recordFinish(st, tt.u, nil, time.Now())
			sw := st.Status.Stackwright
			if sw.PermanentFailures != tt.wantCount || sw.LastFailureReason != tt.wantReason {
				t.Errorf("permanentFailures, lastFailureReason = %d, %q; want %d, %q", sw.PermanentFailures, sw.LastFailureReason, tt.wantCount, tt.wantReason)
			}
		})
	}
}

// The next up of the same desired state is told which lost runs to look for; an up of
// another desired state, or another operation, is not, and starting it forgets them.
func TestReconciler_BuildUpdate_RecoverOnlyForTheSameDesiredState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		op   v1alpha1.UpdateType
		want []string
	}{
		{name: "SameDesiredState", key: "k1", op: v1alpha1.UpdateTypeUp, want: []string{"web-k1-1"}},
		{name: "NewDesiredState", key: "k2", op: v1alpha1.UpdateTypeUp},
		{name: "Destroy", key: "k1", op: v1alpha1.UpdateTypeDestroy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
			st.Status.Stackwright = &pulumiv1.StackwrightStatus{LastAttemptedKey: "k1", Attempt: 1, LostUpdates: []string{"web-k1-1"}}
			s := &scope{stack: st, op: tt.op, key: tt.key, next: decide.Decision{Action: decide.Run, Attempt: 2, Why: "retrying"}}
			u := (&Reconciler{}).buildUpdate(s)
			if diff := cmp.Diff(tt.want, u.Spec.Options.Recover); diff != "" {
				t.Errorf("options.recover (-want +got):\n%s", diff)
			}
			recordStart(st, u)
			if tt.key != "k1" && len(st.Status.Stackwright.LostUpdates) > 0 {
				t.Errorf("lostUpdates = %v after starting another desired state; want none", st.Status.Stackwright.LostUpdates)
			}
		})
	}
}

// Every Update the Stack controller creates is bound to this manager's runner, when it has
// one (the local executor), so that it starts without a claim.
func TestReconciler_BuildUpdate_BoundToTheManagersRunner(t *testing.T) {
	t.Parallel()
	for _, runner := range []string{"", "local/m/1/a"} {
		st := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
		s := &scope{stack: st, op: v1alpha1.UpdateTypeUp, key: "k1", next: decide.Decision{Action: decide.Run, Attempt: 1, Why: "first update"}}
		u := (&Reconciler{Options: Options{Runner: runner}}).buildUpdate(s)
		if diff := cmp.Diff(runner, u.Spec.Runner); diff != "" {
			t.Errorf("spec.runner (-want +got):\n%s", diff)
		}
	}
}

// A retry waiting for a runner still says why the last attempt failed.
func TestMarkUpdateInFlight_Retry_SaysWhyTheLastAttemptFailed(t *testing.T) {
	t.Parallel()
	failure := `failed to update stack dev: unable to find resource type "stackwright-testing:index:Nope"`
	tests := []struct {
		name    string
		attempt int32
		last    *pulumiv1.StackUpdateState
		// runner binds the Update to a runner (spec.runner), queue gives it a queue
		// position.
		runner string
		queue  *v1alpha1.UpdateQueue
		want   string
	}{
		{name: "FirstAttempt", attempt: 1, want: "Waiting to run up (Update web-k1-1)"},
		// A bound Update's runner says Running only after a while: until then it is
		// starting, unless the Update controller says it waits in the queue.
		{name: "BoundNotReportedRunning", attempt: 1, runner: "local/m/1/a", want: "Starting up (Update web-k1-1)"},
		{name: "BoundQueued", attempt: 1, runner: "local/m/1/a", queue: &v1alpha1.UpdateQueue{Ahead: 3}, want: "Waiting to run up (Update web-k1-1)"},
		{name: "RetryAfterFailure", attempt: 3, last: &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateFailed, Message: failure},
			want: "Waiting to run up (Update web-k1-3); attempt 3, the last one failed: " + failure},
		{name: "RunAgainAfterSuccess", attempt: 2, last: &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateSucceeded, Message: "up succeeded"},
			want: "Waiting to run up (Update web-k1-2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &pulumiv1.Stack{Status: pulumiv1.StackStatus{LastUpdate: tt.last}}
			u := &v1alpha1.Update{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-k1-%d", tt.attempt)},
				Spec:       v1alpha1.UpdateSpec{Type: v1alpha1.UpdateTypeUp, Attempt: tt.attempt, Runner: tt.runner},
				Status:     v1alpha1.UpdateStatus{Queue: tt.queue},
			}
			markUpdateInFlight(st, u, false)
			c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ConditionReconciling)
			if c == nil || c.Message != tt.want {
				t.Errorf("Reconciling = %+v; want message %q", c, tt.want)
			}
		})
	}
}

// A person must act on a stall, whatever caused it: exactly one Stalled event announces
// each new stall, and a stall that goes on says nothing more.
func TestReconciler_AnnounceStall_OncePerNewStall(t *testing.T) {
	for _, tc := range []struct {
		reason string
		before string // the Stalled reason before the reconcile, "" for none
		after  string // the Stalled reason after it, "" for none
		want   []string
	}{
		{reason: "not stalled says nothing"},
		{reason: "a new stall is announced", after: pulumiv1.ReasonSpecInvalid,
			want: []string{"Warning Stalled Stalled (SpecInvalid): the message"}},
		{reason: "a stall that goes on is not announced again", before: pulumiv1.ReasonUpdateFailed, after: pulumiv1.ReasonUpdateFailed},
		{reason: "a stall for another reason is announced", before: pulumiv1.ReasonUpdateFailed, after: pulumiv1.ReasonSpecInvalid,
			want: []string{"Warning Stalled Stalled (SpecInvalid): the message"}},
		{reason: "a stall that ends says nothing", before: pulumiv1.ReasonUpdateFailed},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{Recorder: rec}
			st := &pulumiv1.Stack{}
			if tc.after != "" {
				markStalled(st, tc.after, "the message")
			}
			r.announceStall(st, tc.before)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
