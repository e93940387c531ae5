// Package stacktemplate reconciles StackTemplates: for each, it checks what its Stacks and
// objects would be (compose.go: dependency order, object kinds, placeholders), installs the
// CustomResourceDefinition of the kind the template defines (never one it did not create),
// has the instance controller serve that kind, keeps each generation's spec as a
// StackTemplateRevision (deleting those no instance runs any more), counts the instances,
// and on deletion waits for the last instance before removing the definition.
//
// The controller has the Stack controller's shape: Reconcile gets the template, defers the
// status patch, handles deletion (delete.go) and the finalizer, then runs the phases of
// phases.go over a scope (scope.go); conditions are set only by the pure setters of
// status.go. It emits no events. Its envtest suite runs it alone, with the instance
// controller stood in for.
package stacktemplate
