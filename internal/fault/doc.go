// Package fault carries the one distinction the Stack controller needs from the code that
// resolves a Stack's references: whether a failure clears by itself (a missing Secret that
// may appear, a source that is not ready yet: keep reconciling) or needs a human (a spec
// that cannot work as written: Stalled). Each fault names the condition reason to report.
package fault
