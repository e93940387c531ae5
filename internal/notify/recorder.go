package notify

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// Recorder returns a recorder that records with next as before and also queues each event
// for notification-controller. A nil Forwarder (forwarding off) returns next itself, so
// that the manager can wrap its recorders unconditionally.
func (f *Forwarder) Recorder(next events.EventRecorder) events.EventRecorder {
	if f == nil {
		return next
	}
	return &recorder{next: next, f: f}
}

type recorder struct {
	next events.EventRecorder
	f    *Forwarder
}

func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r.next != nil {
		r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
	if regarding == nil {
		return
	}
	ev, err := r.f.event(regarding, related, eventtype, reason, fmt.Sprintf(note, args...))
	if err != nil {
		r.f.log.V(1).Info("Not forwarding event to notification-controller", "reason", reason, "error", err.Error())
		return
	}
	select {
	case r.f.queue <- *ev:
	default:
		// A reconcile never waits for notification-controller.
		forwarded.WithLabelValues(ResultDropped).Inc()
		r.f.log.V(1).Info("Dropped event, queue to notification-controller full", "kind", ev.InvolvedObject.Kind,
			"namespace", ev.InvolvedObject.Namespace, "name", ev.InvolvedObject.Name, "reason", reason)
	}
}

// event builds the Event now, since the controller goes on changing regarding and related.
// Its metadata is limited to an Update's name, operation and revision: everything else in
// the objects, spec values and outputs above all, may be secret.
func (f *Forwarder) event(regarding, related runtime.Object, eventtype, reason, message string) (*Event, error) {
	gvk := regarding.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		// Typed objects read through a client usually have no TypeMeta.
		var err error
		if gvk, err = apiutil.GVKForObject(regarding, f.scheme); err != nil {
			return nil, fmt.Errorf("failed to resolve kind of object: %w", err)
		}
	}
	obj, err := meta.Accessor(regarding)
	if err != nil {
		return nil, fmt.Errorf("failed to read metadata of %s: %w", gvk.Kind, err)
	}
	if obj.GetNamespace() == "" {
		return nil, fmt.Errorf("%s %s is cluster-scoped, and Alerts only match namespaced objects", gvk.Kind, obj.GetName())
	}
	if obj.GetName() == "" {
		return nil, errors.New("object has no name")
	}

	// notification-controller keeps only the metadata prefixed with the object's group.
	prefix := gvk.Group + "/"
	md := map[string]string{}
	var update string
	if u, ok := related.(*v1alpha1.Update); ok && u != nil {
		update = u.Name
		md[prefix+MetaUpdate] = u.Name
		md[prefix+MetaOperation] = string(u.Spec.Type)
		if u.Spec.Revision != "" {
			md[prefix+MetaRevision] = u.Spec.Revision
		}
	}
	md[prefix+MetaToken] = token(reason, update)

	severity := SeverityInfo
	if eventtype == corev1.EventTypeWarning {
		severity = SeverityError
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return &Event{
		InvolvedObject: corev1.ObjectReference{
			APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Severity:            severity,
		Timestamp:           metav1.Now(),
		Message:             message,
		Reason:              reason,
		Metadata:            md,
		ReportingController: f.controller,
		ReportingInstance:   f.instance,
	}, nil
}
