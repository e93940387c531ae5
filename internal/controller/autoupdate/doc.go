// Package autoupdate serves PKO v2's hand-made one-off operations: auto.pulumi.com
// Updates, each naming a Stack (spec.workspaceName) and an operation (preview, up, refresh,
// destroy).
//
// The work is split so that only the Stack controller decides what runs on a Stack, as
// for every other operation: it picks a Stack's pending requests, oldest first, when the
// Stack has no Update in flight, runs each as a stackwright.dev Update of the Stack (named
// by UpdateName, so a crash resumes the same one), marks the request running, and records
// the result in it before the Update can leave the history. This package holds what both
// sides share (validation, the mapping of PKO's options, the pure status setters) and the
// Reconciler for what no Stack can do: refusing a request that names no Stack or cannot
// run, saying that an accepted one waits, and deleting completed ones after their
// spec.ttlAfterCompleted.
package autoupdate
