// Package decide chooses what reconciling a Stack with no Update in flight does next: run
// (and which attempt), back off, wait for a lock, stall, or stay idle until a resync. It is
// pure (a Stack, a desired-state key, the time and the manager's retry policy in; a
// Decision out), so it lives apart from the controller: its fuzz target then compiles,
// with coverage instrumentation, only the API types instead of the controller's whole
// dependency graph.
package decide
