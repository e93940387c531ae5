package stack

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
)

// patcher writes a Stack's changes as merge patches against the last state it wrote, so a
// reconcile can persist intent midway (before creating an Update) and again at the end.
type patcher struct {
	c    client.Client
	base *pulumiv1.Stack
}

func newPatcher(c client.Client, s *pulumiv1.Stack) *patcher {
	return &patcher{c: c, base: s.DeepCopy()}
}

// patchStatus writes the status if it changed. A Stack that is gone (its finalizer was
// just removed) has no status left to write.
func (p *patcher) patchStatus(ctx context.Context, s *pulumiv1.Stack) error {
	if equality.Semantic.DeepEqual(p.base.Status, s.Status) {
		return nil
	}
	obj := s.DeepCopy()
	if err := p.c.Status().Patch(ctx, obj, client.MergeFrom(p.base), client.FieldOwner(fieldManager)); err != nil {
		if apierrors.IsNotFound(err) && !s.DeletionTimestamp.IsZero() {
			return nil
		}
		return fmt.Errorf("failed to patch status of Stack %s/%s: %w", s.Namespace, s.Name, err)
	}
	p.base.Status = *s.Status.DeepCopy()
	p.base.ResourceVersion, s.ResourceVersion = obj.ResourceVersion, obj.ResourceVersion
	return nil
}

// patchFinalizers writes the finalizers, with an optimistic lock so that another
// controller's finalizer is never dropped.
func (p *patcher) patchFinalizers(ctx context.Context, s *pulumiv1.Stack) error {
	obj := p.base.DeepCopy()
	obj.Finalizers = s.Finalizers
	if err := p.c.Patch(ctx, obj, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("failed to patch finalizers of Stack %s/%s: %w", s.Namespace, s.Name, err)
	}
	p.base.Finalizers = obj.Finalizers
	p.base.ResourceVersion, s.ResourceVersion = obj.ResourceVersion, obj.ResourceVersion
	return nil
}
