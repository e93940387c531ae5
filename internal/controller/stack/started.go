package stack

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// An Update's start is announced (UpdateStarted) when the Stack sees it Running, not when
// it is created: an Update bound to the local executor's runner reads Running only once it
// has run for a while, so a short run is announced once, by UpdateSucceeded or
// UpdateFailed, and its start costs no event. A Job executor's claim says Running at once.
//
// Nothing in the API says a start was announced: writing it would cost the write the
// event saves. The manager remembers instead, per Stack, the Update whose start it is to
// announce, from when it saw that Update before it ran (created it, or found it Pending).
// A manager that first sees an Update Running (it restarted, or took over as leader)
// announces nothing: the one before did, or, rarely, nobody does; never twice.

// pendingStart is an Update whose start is to be announced.
type pendingStart struct {
	uid types.UID
	// why is the decision that started it, "" when this manager did not make it.
	why string
}

// startAnnouncements holds the pending announcements. The zero value is ready.
type startAnnouncements struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]pendingStart
}

// expect records that the start of stack's Update uid is to be announced, unless one is
// recorded for it already (with the decision that started it).
func (a *startAnnouncements) expect(stack types.NamespacedName, uid types.UID, why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[stack]; ok && p.uid == uid {
		return
	}
	if a.pending == nil {
		a.pending = map[types.NamespacedName]pendingStart{}
	}
	a.pending[stack] = pendingStart{uid: uid, why: why}
}

// take returns the announcement pending for stack's Update uid and forgets it.
func (a *startAnnouncements) take(stack types.NamespacedName, uid types.UID) (pendingStart, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[stack]
	if !ok || p.uid != uid {
		return pendingStart{}, false
	}
	delete(a.pending, stack)
	return p, true
}

// forget drops what is pending for stack: its Update finished, or it is gone.
func (a *startAnnouncements) forget(stack types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pending, stack)
}

// announcesStart reports whether u's start is news: a resync of the deployed state (its
// period, a reconcile request, a drift check) is announced only if it changes something,
// which its result tells.
func announcesStart(s *scope, u *v1alpha1.Update) bool {
	return u.Spec.DesiredStateKey != stackwrightStatus(s.stack).LastSuccessfulKey
}

// followStart announces the start of u, the Update in flight that the status records,
// once it reads Running, if this manager saw it before it ran; it remembers one seen
// Pending, and forgets one finished.
func (r *Reconciler) followStart(s *scope, u *v1alpha1.Update, detached bool) {
	key := types.NamespacedName{Namespace: s.stack.Namespace, Name: s.stack.Name}
	switch {
	case u == nil || detached:
		// Never created, or run outside the API (no Update announces it).
	case u.Status.Finished():
		r.starts.forget(key)
	case u.Status.Phase != v1alpha1.UpdatePhaseRunning:
		if announcesStart(s, u) {
			r.starts.expect(key, u.UID, "")
		}
	default:
		if p, ok := r.starts.take(key, u.UID); ok {
			s.eventAbout(u, corev1.EventTypeNormal, EventUpdateStarted, "%s", startedNote(u, p.why))
		}
	}
}

// startedNote is what UpdateStarted says of u, started because why ("" when unknown).
func startedNote(u *v1alpha1.Update, why string) string {
	if why == "" {
		return "Started " + string(u.Spec.Type) + " at revision " + u.Spec.Revision + " (Update " + u.Name + ")"
	}
	return "Started " + string(u.Spec.Type) + " at revision " + u.Spec.Revision + ": " + why + " (Update " + u.Name + ")"
}

// took says how long u ran (" in 3s", with prep), "" when its record has no start (its
// runner was lost before it reported one): the event that ends a run says when it began,
// since a short run has no UpdateStarted.
func took(u *v1alpha1.Update, prep string) string {
	st := u.Status
	if st.StartTime == nil || st.EndTime == nil || st.EndTime.Before(st.StartTime) {
		return ""
	}
	d := st.EndTime.Sub(st.StartTime.Time)
	if d < time.Second {
		return " " + prep + " under a second"
	}
	return " " + prep + " " + d.Round(time.Second).String()
}
