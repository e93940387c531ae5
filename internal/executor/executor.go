package executor

import (
	"time"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Executor accepts Updates to run. The Update controller submits every Pending Update; an
// executor must tolerate duplicates and Updates another replica already claimed.
type Executor interface {
	// Submit queues the Update for execution.
	Submit(update *v1alpha1.Update)
	// Owns reports whether runner (an Update's status.runner) names a run of this
	// executor that is still alive. A Running Update whose runner nobody owns was lost.
	Owns(runner string) bool
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
