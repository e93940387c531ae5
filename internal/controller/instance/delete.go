package instance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// reconcileDelete deletes the instance's Stack (which destroys the stack or keeps it, as
// the template's destroyOnFinalize says), waits until it is gone, removes the parameter
// Secret, and lets the instance go; its published outputs are owned by it and go with it.
func (c *Controller) reconcileDelete(ctx context.Context, s *scope) error {
	t, u := s.template, s.in.obj
	if !controllerutil.ContainsFinalizer(u, v1alpha1.InstanceFinalizer) {
		return nil
	}
	st := &pulumiv1.Stack{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: t.Spec.Namespace, Name: s.name}, st)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("failed to get Stack %s/%s: %w", t.Spec.Namespace, s.name, err)
	case err == nil && st.Labels[v1alpha1.InstanceUIDLabel] == string(u.GetUID()):
		if st.DeletionTimestamp.IsZero() {
			err := c.Client.Delete(ctx, st)
			if apierrors.IsForbidden(err) && st.Annotations[pulumiv1.ProtectedAnnotation] == "true" {
				// The platform team protects what the instance stands for: its deletion waits
				// for them (the Stack's annotation change brings the instance back).
				markStackProtected(s.in, st)
				return nil
			}
			if client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to delete Stack %s/%s: %w", st.Namespace, st.Name, err)
			}
		}
		markDestroying(s.in, st, t.Spec.InstanceMessages)
		return nil
	}
	if err := c.applyParameterSecret(ctx, t, u, s.name, nil); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(u, v1alpha1.InstanceFinalizer)
	return s.patcher.Finalizers(ctx, u)
}

// removeOrphans deletes the Stacks (and parameter Secrets) of an instance that is gone
// without its finalizer having run (removed by hand, or its kind's definition deleted).
func (c *Controller) removeOrphans(ctx context.Context, t *v1alpha1.StackTemplate, key types.NamespacedName) error {
	var stacks pulumiv1.StackList
	if err := c.Client.List(ctx, &stacks, client.InNamespace(t.Spec.Namespace), client.MatchingLabels{
		v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceNamespaceLabel: key.Namespace,
	}); err != nil {
		return fmt.Errorf("failed to list Stacks of %s: %w", key, err)
	}
	for i := range stacks.Items {
		st := &stacks.Items[i]
		if ns, name, _ := instanceOf(st); ns != key.Namespace || name != key.Name || !st.DeletionTimestamp.IsZero() {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleting the Stack of a deleted instance", "stack", st.Name)
		if err := c.Client.Delete(ctx, st); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Stack %s/%s: %w", st.Namespace, st.Name, err)
		}
		// The Stack's parameter Secret, if it is the same instance's.
		sec := &corev1.Secret{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: parameterSecretName(st.Name)}, sec)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to get Secret %s/%s: %w", st.Namespace, parameterSecretName(st.Name), err)
		}
		if err != nil || sec.Labels[v1alpha1.InstanceUIDLabel] != st.Labels[v1alpha1.InstanceUIDLabel] {
			continue
		}
		if err := c.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
	}
	return nil
}
