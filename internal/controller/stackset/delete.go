package stackset

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// reconcileDelete applies the deletion policy to every Stack of the set: Orphan releases
// them before the set goes (the garbage collector would delete them otherwise), Destroy
// deletes them and waits until they are gone.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	set := s.set
	if !controllerutil.ContainsFinalizer(set, v1alpha1.StackSetFinalizer) {
		return nil
	}
	for i := range s.stacks {
		if st := &s.stacks[i]; st.DeletionTimestamp.IsZero() {
			if err := r.remove(ctx, s, st); err != nil {
				return err
			}
		}
	}
	if set.Spec.DeletionPolicy == v1alpha1.StackSetDestroy && len(s.stacks) > 0 {
		markDestroying(set, len(s.stacks), s.stacks[0].Name)
		return nil
	}
	r.listings.forget(client.ObjectKeyFromObject(set))
	controllerutil.RemoveFinalizer(set, v1alpha1.StackSetFinalizer)
	return s.patcher.Finalizers(ctx, set)
}
