package executor

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Executor accepts Updates to run and says how their runners fare. The Update controller
// submits every Pending Update, and asks about every Running one; an executor must
// tolerate duplicates and Updates another replica already claimed. An executor starts and
// stops work and records what a runner reports; that a runner is gone is the Update
// controller's to record, from the Verdict.
type Executor interface {
	// Submit queues the Update for execution.
	Submit(update *v1alpha1.Update)
	// Check looks at the runner of the Running Update u.
	Check(ctx context.Context, u *v1alpha1.Update) Verdict
}

// TenantOf names the namespace whose fair share an Update's run counts against; "" means
// the Update's own namespace.
type TenantOf func(ctx context.Context, u *v1alpha1.Update) string

// Tenant calls f, nil meaning the Update's own namespace.
func (f TenantOf) Tenant(ctx context.Context, u *v1alpha1.Update) string {
	if f == nil {
		return ""
	}
	return f(ctx, u)
}

// Verdict is what an executor finds of a Running Update's runner. At most one of Lost and
// NotStarted is set; with neither, the runner is alive.
type Verdict struct {
	// Lost says why the runner ended, or is gone, without its result: the Update failed,
	// with reason LostReason, and its Stack retries.
	Lost string
	// LostReason is the Update's reason for a lost runner: Evicted when its node evicted
	// the runner's Pod, OOMKilled when the kernel killed its container out of memory (Lost
	// says which limit), RunnerLost when empty (and for anything but those three).
	LostReason string
	// NotStarted says why the runner never started; the executor stopped it, so no engine
	// runs. The Update failed with reason TransientFailure: no run happened, so there is
	// nothing for the next one to recover.
	NotStarted string
	// RecheckAfter asks to be asked again then (zero: when the Update or its runner
	// changes).
	RecheckAfter time.Duration
}

// Apply fails u when the verdict says its runner is gone (its engine process died with it)
// or never started, and reports whether it did. Nothing runs any more; the Stack
// controller retries with a new Update. The result is Failed either way, so that runners
// killed again and again (out of memory, evicted) count in
// stackwright_updates_total{result="failed"} like any failed run; the reason says which:
// RunnerLost (Evicted, OOMKilled), or TransientFailure for a runner that never started (no
// engine ran, so there is no run for the next up to look for in the backend's history).
// The Update controller applies it to stored Updates, the Job executor to the detached
// ones it keeps.
func (v Verdict) Apply(u *v1alpha1.Update, now metav1.Time) bool {
	runner := u.Status.Runner
	switch {
	case v.Lost != "":
		reason := v1alpha1.ReasonRunnerLost
		if v1alpha1.RunnerLostReason(v.LostReason) {
			reason = v.LostReason
		}
		u.MarkRunnerLost(v1alpha1.UpdateResultFailed, reason, fmt.Sprintf("runner %s lost: %s; it will be retried", runner, v.Lost), now)
	case v.NotStarted != "":
		msg := fmt.Sprintf("runner %s did not start: %s; it will be retried", runner, v.NotStarted)
		u.Status.Phase, u.Status.Result, u.Status.Message, u.Status.EndTime = v1alpha1.UpdatePhaseFailed, v1alpha1.UpdateResultFailed, msg, &now
		u.MarkFinished(metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTransientFailure, Message: msg})
	default:
		return false
	}
	return true
}

// Positioner is an executor that can say where a submitted Update stands in its queue.
type Positioner interface {
	// Position reports where the queued Update with key stands; false when it is not
	// queued (running, finished or unknown).
	Position(key types.NamespacedName) (Position, bool)
}

// Detacher runs Updates that exist only in memory. A Stack in a terminating namespace
// cannot create its destroy Update (the API server refuses new objects there), yet must be
// destroyed for the namespace to go away.
type Detacher interface {
	// RunDetached queues u, which is never written to the API server. An executor that
	// runs it outside the manager reads what the run needs now, with ctx: the run is the
	// one decided, whenever it starts.
	RunDetached(ctx context.Context, u *v1alpha1.Update)
	// Detached returns the detached Update with u's namespace and name, if one was
	// submitted, with its status as far as it got. A finished one is forgotten once
	// returned.
	Detached(namespace, name string) (*v1alpha1.Update, bool)
}

// ClaimRetry is how long an executor waits to try an Update again when the API server did
// not answer while it was being fetched or claimed: no event may ever bring it back.
const ClaimRetry = 5 * time.Second
