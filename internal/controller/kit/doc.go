// Package kit holds what every Stackwright controller's Reconcile shares: the ordered phase
// runner (a reconcile is a scope that phases read and add to, in a fixed order) and the
// deferred event recorder (an event announces a status, so it is emitted only once that
// status is written). It imports nothing of Stackwright: controllers build on it, never the
// other way round.
package kit
