package instance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pulumiv1 "github.com/stackwright/stackwright/api/v1"
	"github.com/stackwright/stackwright/api/v1alpha1"
)

// reconcileDelete takes down what the instance became in the reverse of the order it was
// made in: its objects first, then its Stack of spec.stack, then the Stacks of spec.stacks,
// each once no other Stack of the instance depends on it (each destroys its stack or keeps
// it, as its spec's destroyOnFinalize says). It waits until every Stack is gone, removes
// the parameter Secrets, and lets the instance go; its published outputs are owned by it
// and go with it.
func (c *Controller) reconcileDelete(ctx context.Context, s *scope) error {
	t, u := s.template, s.in.obj
	if !controllerutil.ContainsFinalizer(u, v1alpha1.InstanceFinalizer) {
		return nil
	}
	if err := c.deleteObjects(ctx, s); err != nil {
		return err
	}
	stacks, err := c.instanceStacks(ctx, s)
	if err != nil {
		return err
	}
	if len(stacks) > 0 {
		protected, err := c.deleteUnneeded(ctx, stacks, func(*pulumiv1.Stack) bool { return false })
		if err != nil {
			return err
		}
		if protected != nil {
			// The platform team protects what the instance stands for: its deletion waits
			// for them (the Stack's annotation change brings the instance back).
			markStackProtected(s.in, protected)
			return nil
		}
		// The Stack of spec.stack goes first; name it while it is there.
		slices.SortStableFunc(stacks, func(a, b *pulumiv1.Stack) int {
			return strings.Compare(a.Labels[v1alpha1.TemplateStackLabel], b.Labels[v1alpha1.TemplateStackLabel])
		})
		markDestroying(s.in, stacks[0], t.Spec.InstanceMessages)
		return nil
	}
	if err := c.deleteParameterSecrets(ctx, t, u); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(u, v1alpha1.InstanceFinalizer)
	return s.patcher.Finalizers(ctx, u)
}

// deleteParameterSecrets deletes the parameter Secrets of the instance's Stacks, all gone:
// by label, since the names of Stacks of entries a later revision dropped are not known.
// They are read from the API server, as the manager caches no Secrets.
func (c *Controller) deleteParameterSecrets(ctx context.Context, t *v1alpha1.StackTemplate, u client.Object) error {
	var list corev1.SecretList
	if err := c.APIReader.List(ctx, &list, client.InNamespace(t.Spec.Namespace), client.MatchingLabels{
		v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceUIDLabel: string(u.GetUID()),
	}); err != nil {
		return fmt.Errorf("failed to list the parameter Secrets of %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	for i := range list.Items {
		sec := &list.Items[i]
		if err := c.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
	}
	return nil
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
