package kit

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Events collects the events a reconcile decides on and emits them only after the status
// they announce was written: a reader who sees an event can then read its status, and a
// reconcile whose status write fails (and that runs again) does not announce twice.
type Events struct {
	rec     events.EventRecorder
	action  string
	pending []pending
}

type pending struct {
	regarding, related runtime.Object
	typ, reason        string
	note               string
	args               []any
}

// NewEvents returns an empty set of events for rec, each with action (a constant of the
// controller).
func NewEvents(rec events.EventRecorder, action string) *Events {
	return &Events{rec: rec, action: action}
}

// Add records an event about regarding, to be emitted by Flush.
func (e *Events) Add(regarding runtime.Object, typ, reason, note string, args ...any) {
	e.AddRelated(regarding, nil, typ, reason, note, args...)
}

// AddRelated records an event about regarding that concerns related too (a Stack's Update,
// say), to be emitted by Flush.
func (e *Events) AddRelated(regarding, related runtime.Object, typ, reason, note string, args ...any) {
	e.pending = append(e.pending, pending{regarding: regarding, related: related, typ: typ, reason: reason, note: note, args: args})
}

// Reasons lists the pending events' reasons in order (for tests).
func (e *Events) Reasons() []string {
	out := make([]string, 0, len(e.pending))
	for _, p := range e.pending {
		out = append(out, p.reason)
	}
	return out
}

// Flush emits the pending events when statusErr is nil (the status they announce was
// written) and drops them otherwise: the reconcile that runs again decides anew. Either
// way nothing stays pending. A nil recorder drops them too.
func (e *Events) Flush(statusErr error) {
	list := e.pending
	e.pending = nil
	if statusErr != nil || e.rec == nil {
		return
	}
	for _, p := range list {
		e.rec.Eventf(p.regarding, p.related, p.typ, p.reason, e.action, p.note, p.args...)
	}
}
