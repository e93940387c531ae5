package stacktemplate

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// reconcileDelete waits for the template's last instance to go (each destroys its stack
// as the template says), then removes the kind's CustomResourceDefinition and the
// finalizer. Instances are the tenants' objects: the template's deletion never deletes
// them, since deleting the CustomResourceDefinition first would delete them all at once.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.template
	if !controllerutil.ContainsFinalizer(t, v1alpha1.TemplateFinalizer) {
		return ctrl.Result{}, nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: t.DefinitionName()}, crd)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("failed to get CustomResourceDefinition %s: %w", t.DefinitionName(), err)
	case crd.Labels[v1alpha1.TemplateLabel] != t.Name:
		// Not this template's: nothing of it to remove.
	default:
		if established(crd) {
			list, err := listInstances(ctx, r.APIReader, t)
			if err != nil {
				return ctrl.Result{}, err
			}
			if n := len(list.Items); n > 0 {
				markInstancesRemain(t, n, list.Items[0].GetNamespace()+"/"+list.Items[0].GetName())
				s.requeue.After(instancesPoll / 6)
				return s.requeue.Result(), nil
			}
		}
		if err := r.Client.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete CustomResourceDefinition %s: %w", crd.Name, err)
		}
		if err := r.Instances.Forget(ctx, t.GVK()); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(t, v1alpha1.TemplateFinalizer)
	return ctrl.Result{}, s.patcher.Finalizers(ctx, t)
}
