// Package executor defines where Updates run. Each implementation lives in a subpackage:
// local runs them as engine processes of the manager itself.
package executor

import "github.com/stackwright/stackwright/api/v1alpha1"

// Executor accepts Updates to run. The Update controller submits every Pending Update; an
// executor must tolerate duplicates and Updates another replica already claimed.
type Executor interface {
	// Submit queues the Update for execution.
	Submit(update *v1alpha1.Update)
	// Owns reports whether runner (an Update's status.runner) names a run of this
	// executor that is still alive. A Running Update whose runner nobody owns was lost.
	Owns(runner string) bool
}
