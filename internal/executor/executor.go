package executor

import (
	"context"
	"time"

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

// Verdict is what an executor finds of a Running Update's runner. At most one of Lost and
// NotStarted is set; with neither, the runner is alive.
type Verdict struct {
	// Lost says why the runner ended, or is gone, without its result: the Update failed,
	// with reason RunnerLost, and its Stack retries.
	Lost string
	// NotStarted says why the runner never started; the executor stopped it, so no engine
	// runs. The Update failed with reason TransientFailure: no run happened, so there is
	// nothing for the next one to recover.
	NotStarted string
	// RecheckAfter asks to be asked again then (zero: when the Update or its runner
	// changes).
	RecheckAfter time.Duration
}

// Detacher runs Updates that exist only in memory. A Stack in a terminating namespace
// cannot create its destroy Update (the API server refuses new objects there), yet must be
// destroyed for the namespace to go away.
type Detacher interface {
	// RunDetached queues u, which is never written to the API server.
	RunDetached(u *v1alpha1.Update)
	// Detached returns the detached Update with u's namespace and name, if one was
	// submitted, with its status as far as it got. A finished one is forgotten once
	// returned.
	Detached(namespace, name string) (*v1alpha1.Update, bool)
}

// ClaimRetry is how long an executor waits to try an Update again when the API server did
// not answer while it was being fetched or claimed: no event may ever bring it back.
const ClaimRetry = 5 * time.Second
