package notify

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Severities of an Event, the values notification-controller matches an Alert's
// eventSeverity against.
const (
	SeverityInfo  = "info"
	SeverityError = "error"
)

// Metadata keys, without the involved object's API group that prefixes them on the wire.
// notification-controller keeps only keys prefixed with that group (or its own), strips
// the prefix for the Providers, and hashes revision and token into the key of its
// duplicate rate limiter.
const (
	MetaRevision  = "revision"
	MetaUpdate    = "update"
	MetaOperation = "operation"
	MetaToken     = "token"
)

// Event is what notification-controller's event receiver decodes: the same fields and
// JSON names as Flux's event/v1beta1.Event, which is not imported to keep Flux's module
// graph out of Stackwright's.
type Event struct {
	// InvolvedObject is the object the event is about; Alerts match its kind, namespace
	// and name.
	InvolvedObject corev1.ObjectReference `json:"involvedObject"`
	// Severity is SeverityInfo or SeverityError.
	Severity string `json:"severity"`
	// Timestamp is when the event was recorded.
	Timestamp metav1.Time `json:"timestamp"`
	// Message is the event's note, as the Kubernetes Event shows it.
	Message string `json:"message"`
	// Reason is the event's reason.
	Reason string `json:"reason"`
	// Metadata holds the Meta* keys, each prefixed with the involved object's API group
	// and "/".
	Metadata map[string]string `json:"metadata,omitempty"`
	// ReportingController names the controller that recorded the event.
	ReportingController string `json:"reportingController"`
	// ReportingInstance names the manager replica that recorded it.
	ReportingInstance string `json:"reportingInstance,omitempty"`
}

// token identifies an incident for notification-controller's duplicate rate limiter: the
// same reason about the same Update is one notification however often it is recorded,
// while the same message about another Update is a new one. Only equality matters, so a
// short hash does.
func token(reason, update string) string {
	sum := sha256.Sum256([]byte(reason + "\x00" + update))
	return hex.EncodeToString(sum[:8])
}
