// Package stackset owns the StackSet controller: it lists a set's elements (a
// repository's branches or project directories, or a list), renders one Stack per element
// from the set's template, keeps those Stacks as rendered, and orphans or destroys the
// Stacks of elements that disappear, within the set's bound on removals. It never takes
// over a Stack that is not the set's, and writes nothing but the sets' status and their
// Stacks.
//
// The controller has the Stack controller's shape: Reconcile gets the set, defers the
// status patch, lists the set's Stacks, handles deletion (delete.go) and the finalizer,
// then runs the phases of phases.go in order over a scope (scope.go) that holds what the
// reconcile learned; only the pure setters of status.go set the set's conditions; events
// announce transitions and are emitted once the status that records them is written
// (kit.Events). RemovalsHeld is announced when the Stacks held change, read back from the
// RemovalsHeld condition of the status before, not at every reconcile while they stay
// held. elements.go and render.go hold the pure generation and rendering. Its envtest
// suite runs it alone, with real repositories (internal/testing/gitserver), the tests
// playing the Stack controller.
package stackset
