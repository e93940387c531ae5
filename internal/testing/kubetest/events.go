package kubetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event is one event a Recorder received.
type Event struct {
	// Namespace and Name are those of the object the event is about.
	Namespace, Name string
	Type, Reason    string
	// Message is the event's note, formatted.
	Message string
	// Related is the event's related object (the Update of a Stack's event, say), nil when
	// it has none.
	Related runtime.Object
	// Unwritten says what the event announced that the object's stored status did not show
	// yet when the event came; "" when it showed all of it.
	Unwritten string
}

// Check says what event e about sent (the object as the controller emitted it) announces
// that stored (the object as the API server held it when the event came) does not show;
// nil when stored shows all of it, or when e announces nothing a status shows.
type Check[T client.Object] func(e Event, sent, stored T) error

// Recorder is the event recorder of a suite that checks that a controller emits each event
// only once the status it announces is written, so that whoever sees the event can read
// that status. As each event about a T comes, it reads the T from the API server (not a
// cache: what a reader who sees the event would find), keeps the event with what its Check
// found missing there, and lets the tests count the events. Events about other kinds are
// neither checked nor kept.
type Recorder[T client.Object] struct {
	reader client.Reader
	check  Check[T]

	mu  sync.Mutex
	all []Event
}

var _ events.EventRecorder = (*Recorder[client.Object])(nil)

// NewRecorder returns a Recorder that reads with reader (an uncached client, such as
// Env.Client) and checks with check.
func NewRecorder[T client.Object](reader client.Reader, check Check[T]) *Recorder[T] {
	return &Recorder[T]{reader: reader, check: check}
}

// Eventf checks and keeps the event. It sends it nowhere: see Wrap for a suite that also
// reads events from the API server.
func (r *Recorder[T]) Eventf(regarding, related runtime.Object, typ, reason, _, note string, args ...any) {
	sent, ok := regarding.(T)
	if !ok {
		return
	}
	e := Event{Namespace: sent.GetNamespace(), Name: sent.GetName(), Type: typ, Reason: reason, Message: fmt.Sprintf(note, args...), Related: related}
	e.Unwritten = r.unwritten(e, sent)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, e)
}

// unwritten checks e against the object as the API server holds it now.
func (r *Recorder[T]) unwritten(e Event, sent T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored := emptyLike(sent)
	err := r.reader.Get(ctx, client.ObjectKeyFromObject(sent), stored)
	switch {
	case apierrors.IsNotFound(err) && !sent.GetDeletionTimestamp().IsZero():
		// Its deletion completed: it has no status left to show.
		return ""
	case err != nil:
		return fmt.Sprintf("failed to read it: %v", err)
	}
	if err := r.check(e, sent, stored); err != nil {
		return err.Error()
	}
	return ""
}

// emptyLike returns an empty object of obj's type, of obj's kind when it is unstructured:
// decoding into a copy of obj would keep the fields the server no longer has.
func emptyLike[T client.Object](obj T) T {
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if u, ok := any(out).(*unstructured.Unstructured); ok {
		u.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	}
	return out
}

// Wrap returns a recorder that passes every event on to next once r has seen it: for the
// suites whose tests also wait for the events themselves (Scenario.WaitEvent).
func (r *Recorder[T]) Wrap(next events.EventRecorder) events.EventRecorder {
	return &passOn[T]{recorder: r, next: next}
}

type passOn[T client.Object] struct {
	recorder *Recorder[T]
	next     events.EventRecorder
}

func (p *passOn[T]) Eventf(regarding, related runtime.Object, typ, reason, action, note string, args ...any) {
	p.recorder.Eventf(regarding, related, typ, reason, action, note, args...)
	p.next.Eventf(regarding, related, typ, reason, action, note, args...)
}

// Of returns the events about the object ns/name, oldest first. An empty namespace or name
// matches every one: Of("", "") is every event kept.
func (r *Recorder[T]) Of(ns, name string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.all {
		if (ns == "" || e.Namespace == ns) && (name == "" || e.Name == name) {
			out = append(out, e)
		}
	}
	return out
}

// Reasons returns the reasons of the events about the object ns/name, oldest first (see Of).
func (r *Recorder[T]) Reasons(ns, name string) []string {
	var out []string
	for _, e := range r.Of(ns, name) {
		out = append(out, e.Reason)
	}
	return out
}

// Count counts the events of reason about the object ns/name (see Of).
func (r *Recorder[T]) Count(ns, name, reason string) int {
	n := 0
	for _, e := range r.Of(ns, name) {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// Unwritten lists the events about the objects of namespace ns ("" for every namespace)
// that came before the status they announce was written, one line each.
func (r *Recorder[T]) Unwritten(ns string) []string {
	var out []string
	for _, e := range r.Of(ns, "") {
		if e.Unwritten != "" {
			out = append(out, fmt.Sprintf("%s about %s/%s: %s", e.Reason, e.Namespace, e.Name, e.Unwritten))
		}
	}
	return out
}

// CheckOnCleanup fails t when it ends if an event about an object of namespace ns came
// before the status it announces: every test of the namespace then checks its events,
// whatever else it tests.
func (r *Recorder[T]) CheckOnCleanup(t testing.TB, ns string) {
	t.Cleanup(func() {
		if late := r.Unwritten(ns); len(late) > 0 {
			t.Errorf("events emitted before the status they announce was written:\n%s", strings.Join(late, "\n"))
		}
	})
}
