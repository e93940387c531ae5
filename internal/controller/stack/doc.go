// Package stack is the Stack controller. It never runs the engine; each reconcile is one
// pass of a decide/record/observe loop:
//
//   - observe: fold the result of the Update recorded in status.currentUpdate into the
//     status (PKO's lastUpdate, outputs, failure counts), or end here while it runs;
//   - resolve: the source into an artifact, the referenced Secrets and ConfigMaps into
//     inputs, together a desired-state key;
//   - decide: run (the key never succeeded, a reconcile request, a resync), back off,
//     stall after repeated permanent failures, or report Ready;
//   - record: write the intent to status.currentUpdate (optimistic lock), then create
//     the Update under the recorded name, so a crash in between re-creates the same one.
//
// Deletion runs the same loop with destroy as the operation, then releases the finalizer.
// scope.go holds what a reconcile learns, phases.go the steps, status.go the pure setters.
package stack
