package stack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/internal/controller/patch"
)

// Expiry events.
const (
	EventExpired         = "Expired"
	EventExpiryIgnored   = "ExpiryAnnotationIgnored"
	expiryAnnotationNote = "the " + pulumiv1.ExpiresAtAnnotation + " annotation %q is not an RFC 3339 time and is ignored"
)

// expiry is when the Stack's TTL expires, and whether it has one. bad says why the
// expires-at annotation was ignored ("" when it was not).
func expiry(s *pulumiv1.Stack) (at time.Time, ok bool, bad string) {
	var ttl *pulumiv1.StackTTL
	if s.Spec.Stackwright != nil {
		ttl = s.Spec.Stackwright.TTL
	}
	if ttl == nil {
		return time.Time{}, false, ""
	}
	from := s.CreationTimestamp.Time
	if lu := s.Status.LastUpdate; ttl.From == pulumiv1.TTLFromLastUpdate && lu != nil && lu.LastResyncTime != nil && lu.LastResyncTime.After(from) {
		from = lu.LastResyncTime.Time
	}
	at = from.Add(ttl.After.Duration)
	if v, set := s.Annotations[pulumiv1.ExpiresAtAnnotation]; set {
		ext, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return at, true, fmt.Sprintf(expiryAnnotationNote, v)
		}
		if ext.After(at) {
			at = ext
		}
	}
	return at, true, ""
}

// checkExpiry deletes a Stack whose TTL has expired, destroying its resources: the
// expiry is recorded before the deletion, and the deletion's destroy reads it, so a crash
// in between only deletes it again. Until then the Stack is looked at again when it
// expires.
func (r *Reconciler) checkExpiry(ctx context.Context, s *scope) (bool, error) {
	stack := s.stack
	sw := stackwrightStatus(stack)
	at, ok, bad := expiry(stack)
	if bad != "" && sw.ExpiresAt == nil {
		s.event(corev1.EventTypeWarning, EventExpiryIgnored, "%s", bad)
	}
	if !ok {
		sw.ExpiresAt = nil
		return true, nil
	}
	sw.ExpiresAt = &metav1.Time{Time: at.UTC().Truncate(time.Second)}
	now := r.Now()
	if sw.ExpiredAt == nil && now.Before(at) {
		s.requeueAfter(at.Sub(now) + time.Second)
		return true, nil
	}
	if sw.ExpiredAt == nil {
		sw.ExpiredAt = &metav1.Time{Time: now}
		msg := fmt.Sprintf("the Stack's TTL expired at %s: destroying its resources and deleting it", sw.ExpiresAt.Format(time.RFC3339))
		markReconciling(stack, pulumiv1.ReasonExpired, msg)
		if err := s.patcher.Status(ctx, stack, patch.WithOptimisticLock()); err != nil {
			return false, err
		}
		s.event(corev1.EventTypeNormal, EventExpired, "%s", msg)
	}
	err := r.Client.Delete(ctx, stack, client.Preconditions{UID: &stack.UID})
	switch {
	case apierrors.IsForbidden(err) && stack.Annotations[pulumiv1.ProtectedAnnotation] == "true":
		// The install's deletion protection refused it: a person must remove the
		// annotation (the Stack is looked at again when they do).
		markStalled(stack, pulumiv1.ReasonDeletionProtected, fmt.Sprintf("the Stack's TTL expired at %s, but it is protected (%s=true): remove the annotation to let it be destroyed and deleted",
			sw.ExpiresAt.Format(time.RFC3339), pulumiv1.ProtectedAnnotation))
		return false, nil
	case client.IgnoreNotFound(err) != nil:
		return false, fmt.Errorf("failed to delete expired Stack: %w", err)
	}
	return false, nil
}

// expired reports whether the Stack is being deleted because its TTL expired.
func expired(s *pulumiv1.Stack) bool {
	return s.Status.Stackwright != nil && s.Status.Stackwright.ExpiredAt != nil
}
