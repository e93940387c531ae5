package conditions

import (
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// Object is an API object with status conditions.
type Object interface {
	GetGeneration() int64
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// MaxMessage keeps condition messages far below the API's 32768-byte limit: a status patch
// refused for a long error message would hide the error for good.
const MaxMessage = 4096

// Set sets one condition for the object's current generation. The message is truncated to
// MaxMessage on a UTF-8 boundary.
func Set(o Object, typ string, status metav1.ConditionStatus, reason, msg string) {
	if len(msg) > MaxMessage {
		msg = strings.ToValidUTF8(msg[:MaxMessage], "") + "..."
	}
	c := o.GetConditions()
	apimeta.SetStatusCondition(&c, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: o.GetGeneration(),
	})
	o.SetConditions(c)
}

// Remove deletes a condition.
func Remove(o Object, typ string) {
	c := o.GetConditions()
	apimeta.RemoveStatusCondition(&c, typ)
	o.SetConditions(c)
}

// Get returns a condition, or nil.
func Get(o Object, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(o.GetConditions(), typ)
}

// IsTrue reports whether a condition is True, whatever generation it was set for.
func IsTrue(o Object, typ string) bool {
	return apimeta.IsStatusConditionTrue(o.GetConditions(), typ)
}

// SetBool sets a condition True or False.
func SetBool(o Object, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	Set(o, typ, status, reason, msg)
}

// MarkReady records that the current generation reached its desired state.
func MarkReady(o Object, reason, msg string) {
	Set(o, pulumiv1.ConditionReady, metav1.ConditionTrue, reason, msg)
	Remove(o, pulumiv1.ConditionReconciling)
	Remove(o, pulumiv1.ConditionStalled)
}

// MarkReconciling records progress, or a wait that clears by itself.
func MarkReconciling(o Object, reason, msg string) {
	Set(o, pulumiv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	Set(o, pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyInProgress, msg)
	Remove(o, pulumiv1.ConditionStalled)
}

// MarkStalled records that only a human can move the object on.
func MarkStalled(o Object, reason, msg string) {
	Set(o, pulumiv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	Set(o, pulumiv1.ConditionReady, metav1.ConditionFalse, pulumiv1.ReasonNotReadyStalled, msg)
	Remove(o, pulumiv1.ConditionReconciling)
}

// MarkProgress says what a slow phase is doing, without deciding the outcome: an object
// that is Ready or Stalled for its current generation keeps saying so, so that a routine
// resync does not flap it.
func MarkProgress(o Object, msg string) {
	if Settled(o) {
		return
	}
	MarkReconciling(o, pulumiv1.ReasonStackProcessing, msg)
}

// Finalize records the generation in observed once it is settled (Ready or Stalled for it)
// and clears Reconciling: the end of every controller's status, so that kstatus reads an
// object that cannot go further as stalled, not in progress.
func Finalize(o Object, observed *int64) {
	if !Settled(o) {
		return
	}
	*observed = o.GetGeneration()
	Remove(o, pulumiv1.ConditionReconciling)
}

// Settled reports whether everything that can be done for the current generation has been:
// Ready, or Stalled, for that generation. It is what observedGeneration records.
func Settled(o Object) bool {
	for _, typ := range []string{pulumiv1.ConditionReady, pulumiv1.ConditionStalled} {
		if c := Get(o, typ); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == o.GetGeneration() {
			return true
		}
	}
	return false
}
