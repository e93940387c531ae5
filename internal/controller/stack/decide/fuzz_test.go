package decide

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// FuzzNext feeds Next Stacks whose spec and status hold any values a client or a
// crash could leave there (status is writable by anyone with the status subresource).
//
// Properties: Next never panics and is deterministic; a run numbers its attempt from 1
// for a new desired state and one past the last otherwise, never below 1; a backoff waits
// a positive time no longer than its cap allows; a Stack stalls only on permanent failures
// of the same desired state nobody asked to retry; and a desired state already deployed
// is not applied again unless something asks for it (a request, drift, a periodic resync).
func FuzzNext(f *testing.F) {
	f.Add("k", "k", "k", int32(1), int32(0), int64(0), uint8(1), false, "", "", false, int64(0), false, int64(0), int64(0), int64(0), uint8(3))
	f.Add("k", "k", "", int32(3), int32(2), int64(2), uint8(2), false, "r1", "", false, int64(60), true, int64(600), int64(-30), int64(0), uint8(3))
	f.Add("new", "old", "old", int32(math.MaxInt32), int32(9), int64(math.MaxInt64), uint8(2), true, "r2", "r1", true, int64(math.MaxInt64), true, int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), uint8(1))
	f.Add("k", "k", "", int32(4), int32(0), int64(40), uint8(2), false, "", "", false, int64(0), false, int64(math.MaxInt64/2), int64(0), int64(0), uint8(3))
	f.Fuzz(func(t *testing.T, key, lastAttempted, lastSuccessful string, attempt, permanent int32, failures int64, state uint8,
		remediate bool, request, observed string, branch bool, resyncSeconds int64, continueResync bool, retryMaxSeconds int64,
		lastResyncOffset, nowOffset int64, stallAfter uint8) {
		now := t0.Add(time.Duration(nowOffset))
		stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{UID: "8d0c7f3e-5a1b-4c2d-9e8f-0a1b2c3d4e5f"}}
		if request != "" {
			stack.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: request}
		}
		stack.Spec.ResyncFrequencySeconds, stack.Spec.ContinueResyncOnCommitMatch = resyncSeconds, continueResync
		stack.Spec.RetryMaxBackoffDurationSeconds = retryMaxSeconds
		if branch {
			stack.Spec.Branch = "main"
		}
		stack.Status.ObservedReconcileRequest = observed
		stack.Status.Stackwright = &pulumiv1.StackwrightStatus{
			LastAttemptedKey: lastAttempted, LastSuccessfulKey: lastSuccessful, Attempt: attempt,
			PermanentFailures: permanent, RemediateDrift: remediate,
		}
		if state > 0 {
			lu := &pulumiv1.StackUpdateState{State: pulumiv1.UpdateStateSucceeded, Failures: failures,
				LastResyncTime: &metav1.Time{Time: t0.Add(time.Duration(lastResyncOffset))}}
			if state > 1 {
				lu.State = pulumiv1.UpdateStateFailed
			}
			stack.Status.LastUpdate = lu
		}
		pol := Policy{MaxBackoff: 24 * time.Hour, StallAfter: int32(stallAfter%10) + 1}
		before := stack.DeepCopy()

		d := Next(now, stack, key, pol)
		if again := Next(now, stack, key, pol); again != d {
			t.Fatalf("Next is not deterministic: %+v, then %+v", d, again)
		}
		if !cmp.Equal(before, stack) {
			t.Fatal("Next changed the Stack")
		}
		failed := state > 1
		requested := request != "" && request != observed
		switch d.Action {
		case Run:
			want := int32(1)
			if key == lastAttempted {
				want = max(attempt, 0) + 1
				if attempt == math.MaxInt32 {
					want = math.MaxInt32
				}
			}
			if d.Attempt != want || d.Attempt < 1 {
				t.Errorf("run numbered attempt %d; want %d (last attempt %d, same desired state: %v)", d.Attempt, want, attempt, key == lastAttempted)
			}
			if failed && key == lastAttempted && !requested && now.Sub(stack.Status.LastUpdate.LastResyncTime.Time) < time.Duration(float64(backoffBase)*(1-backoffJitter)) {
				t.Errorf("retried a failure %v after it; want a backoff of at least %v", now.Sub(stack.Status.LastUpdate.LastResyncTime.Time), backoffBase)
			}
			deployed := key == lastAttempted && key == lastSuccessful && state == 1
			periodic := continueResync && stack.Spec.ResyncPeriod() > 0
			if deployed && !requested && !remediate && !periodic {
				t.Errorf("decided to apply the deployed desired state again (%q) with nothing asking for it", d.Why)
			}
		case Backoff:
			limit := pol.MaxBackoff
			if retryMaxSeconds > 0 {
				limit = min(time.Duration(min(retryMaxSeconds, math.MaxInt64/int64(time.Second)))*time.Second, maxRetryBackoff)
			}
			if d.RequeueAfter <= 0 || float64(d.RequeueAfter) > float64(limit)*(1+backoffJitter)+1 {
				t.Errorf("backoff waits %v; want (0, %v]", d.RequeueAfter, time.Duration(float64(limit)*(1+backoffJitter)))
			}
			if !failed || key != lastAttempted {
				t.Errorf("backed off without a failure of this desired state")
			}
		case Stalled:
			if !failed || key != lastAttempted || requested || permanent < pol.StallAfter {
				t.Errorf("stalled without %d permanent failures of this desired state (failed %v, same %v, requested %v, permanent %d)",
					pol.StallAfter, failed, key == lastAttempted, requested, permanent)
			}
		case Idle:
			if d.RequeueAfter < 0 {
				t.Errorf("idle requeue after %v", d.RequeueAfter)
			}
		}
	})
}
