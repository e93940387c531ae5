package instance

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// applyParameterSecret keeps the Secret of the instance's secret config values in the
// platform namespace, and deletes it when there are none.
func (c *Controller) applyParameterSecret(ctx context.Context, t *v1alpha1.StackTemplate, u *unstructured.Unstructured, stack string, data map[string][]byte) error {
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: t.Spec.Namespace, Name: parameterSecretName(stack)}
	err := c.Client.Get(ctx, key, sec)
	switch {
	case apierrors.IsNotFound(err):
		if len(data) == 0 {
			return nil
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
				v1alpha1.TemplateLabel: t.Name, v1alpha1.InstanceUIDLabel: string(u.GetUID()),
			}},
			Type: corev1.SecretTypeOpaque, Data: data,
		}
		if err := c.Client.Create(ctx, sec, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("failed to create Secret %s: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get Secret %s: %w", key, err)
	case sec.Labels[v1alpha1.TemplateLabel] != t.Name || sec.Labels[v1alpha1.InstanceUIDLabel] != string(u.GetUID()):
		// Another instance's (their Stacks' names collided), or not Stackwright's: neither
		// rewritten nor deleted.
		if len(data) == 0 {
			return nil
		}
		return fmt.Errorf("failed to write Secret %s: it exists and is not the instance's", key)
	case len(data) == 0:
		if err := c.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Secret %s: %w", key, err)
		}
		return nil
	case maps.EqualFunc(sec.Data, data, func(a, b []byte) bool { return string(a) == string(b) }):
		return nil
	}
	sec.Data = data
	if err := c.Client.Update(ctx, sec, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("failed to update Secret %s: %w", key, err)
	}
	return nil
}
