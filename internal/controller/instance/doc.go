// Package instance reconciles the instances of the kinds StackTemplates define: each
// instance, a tenant's object, becomes a Stack in the template's platform namespace
// (rendered from a template revision and the instance's parameters), shows that Stack's
// progress in its status, and receives the outputs the template publishes in its own
// namespace. A composed template's instance also becomes the Stacks of its spec.stacks,
// made in dependency order before its own and deleted after it (compose.go), and the
// objects of its spec.objects in its namespace (objects.go). Which template revision the
// Stacks are rendered from follows the template's updateStrategy, or, for an instance whose
// Stack a StackRollout of the template's revisions selects, the rollout's status
// (rollout.go); its parameters are converted to the version the revision names them in.
// The kinds are unknown at build time: the controller works on unstructured objects
// (through the typed view of status.go) and starts watching a kind when its template is
// served (setup.go).
//
// The controller has the Stack controller's shape: Reconcile gets the template and the
// instance, defers the status write, handles deletion (delete.go) and the finalizer, then
// runs the phases of phases.go over a scope (scope.go). Conditions are set only by the pure
// setters of status.go. Events are collected during the reconcile and emitted after the
// status write they announce, on transitions only: warnings that no status records
// (approvals ignored, a revision not opened) are remembered by the process, so each state
// is announced once. Its envtest suite runs it with the StackTemplate controller and
// drives the Stacks' status itself.
package instance
