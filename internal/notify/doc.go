// Package notify owns the forwarding of the events Stackwright's controllers record to
// Flux's notification-controller, in the JSON shape Flux's own controllers post to its
// event receiver. Teams that already route Flux's events to chat or paging through Alerts
// and Providers then get Stackwright's failed updates, stalls, previews awaiting approval
// and drift the same way, without a second notification system.
//
// Forwarding is best effort and never slows a reconcile: events wait in a bounded queue
// and are dropped, and counted, when notification-controller cannot keep up. Kubernetes
// Events are still recorded as before; the forwarded copy carries only the event's reason
// and message and, for an Update, its name, operation and revision, never values read
// from a Stack's spec or outputs.
package notify
